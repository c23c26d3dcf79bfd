"""gyre-testkit, the scripted Anthropic API, as the Python test clients start it.

The client scripts (tests/acp, tests/sdk) put this folder on `sys.path` and import
`Testkit` from here.
"""

import json
import os
import subprocess
import urllib.request


class Testkit:
    """A gyre-testkit process serving `script` on a loopback port (`url`)."""

    def __init__(self, binary, script, workdir):
        path = os.path.join(workdir, "script.json")
        with open(path, "w") as f:
            json.dump(script, f)
        self.proc = subprocess.Popen([binary, "--script", path], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("PORT "):
            raise RuntimeError(f"gyre-testkit printed {line!r}, expected 'PORT <n>'")
        self.url = f"http://127.0.0.1:{line.split()[1]}"

    def requests(self):
        """The bodies of the Messages API requests it received, in order."""
        with urllib.request.urlopen(self.url + "/_testkit/requests") as r:
            return [q["body"] for q in json.load(r) if q["path"] == "/v1/messages"]

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
