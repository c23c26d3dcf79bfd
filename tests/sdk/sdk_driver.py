#!/usr/bin/env python3
"""Drive gyre the way Claude Code's Agent SDKs drive `claude`.

Starts gyre-testkit with a script, runs `gyre -p --output-format stream-json --verbose`
as a subprocess (prompt as an argument, and as stream-json on stdin), parses every stdout
line as JSON and checks the init / assistant / user / result sequence and its fields.

Usage: sdk_driver.py --gyre PATH --testkit PATH
Prints 'N passed, M failed' and exits non-zero on any failure.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from gyre_testkit import Testkit  # noqa: E402

API_KEY = "sk-ant-sdk-driver-test-key"


def run_gyre(gyre, url, cwd, home, args, stdin_lines=None):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": home,
        "GYRE_HOME": home,
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": API_KEY,
    }
    proc = subprocess.Popen(
        [gyre, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Like the SDKs: write user messages, close stdin, read lines as they come.
    for msg in stdin_lines or []:
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
    proc.stdin.close()
    messages = []
    for raw in proc.stdout:
        raw = raw.strip()
        if raw:
            messages.append(json.loads(raw))  # every line must be JSON
    stderr = proc.stderr.read()
    code = proc.wait(timeout=60)
    return code, messages, stderr


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def check_common(messages, code, stderr):
    expect(code == 0, f"exit code {code}, stderr: {stderr}")
    expect(messages[0]["type"] == "system" and messages[0]["subtype"] == "init", "first line is init")
    init = messages[0]
    for key in ("cwd", "session_id", "tools", "model", "permissionMode"):
        expect(key in init, f"init has {key}")
    session_id = init["session_id"]
    for m in messages:
        expect(m.get("session_id") == session_id, f"{m['type']} line carries the session id")
        if m["type"] in ("assistant", "user"):
            expect("uuid" in m and "parent_tool_use_id" in m, f"{m['type']} line has uuid and parent_tool_use_id")
            expect(m["message"]["role"] == m["type"], "message role matches the line type")
    result = messages[-1]
    expect(result["type"] == "result", "last line is the result")
    for key in ("subtype", "is_error", "result", "num_turns", "duration_ms", "duration_api_ms",
                "total_cost_usd", "usage", "permission_denials", "session_id"):
        expect(key in result, f"result has {key}")
    return init, result


def test_tool_round_trip(gyre, testkit, work):
    cwd = os.path.join(work, "project")
    os.makedirs(cwd)
    path = os.path.join(cwd, "hello.txt")
    with open(path, "w") as f:
        f.write("hello from the sdk test\n")
    script = {"turns": [
        {"content": [{"type": "text", "text": "Reading."},
                     {"type": "tool_use", "name": "Read", "input": {"file_path": path}}]},
        {"content": [{"type": "text", "text": "It says hello."}]},
    ]}
    tk = Testkit(testkit, script, work)
    try:
        code, messages, stderr = run_gyre(
            gyre, tk.url, cwd, os.path.join(work, "home"),
            ["-p", "read hello.txt", "--output-format", "stream-json", "--verbose"])
    finally:
        tk.close()
    _, result = check_common(messages, code, stderr)
    types = [m["type"] for m in messages]
    expect(types == ["system", "assistant", "user", "assistant", "result"], f"sequence {types}")
    tool_use = messages[1]["message"]["content"][1]
    tool_result = messages[2]["message"]["content"][0]
    expect(tool_use["type"] == "tool_use" and tool_use["name"] == "Read", "assistant asks for Read")
    expect(tool_result["tool_use_id"] == tool_use["id"], "the result answers the call")
    expect("1\thello from the sdk test" in tool_result["content"], "numbered file content")
    expect(result["subtype"] == "success" and result["is_error"] is False, "success")
    expect(result["result"] == "It says hello.", "final text")
    expect(result["num_turns"] == 2, "two turns")


def test_streaming_input(gyre, testkit, work):
    cwd = os.path.join(work, "project2")
    os.makedirs(cwd)
    script = {"turns": [
        {"content": [{"type": "text", "text": "Noted: 7."}]},
        {"content": [{"type": "text", "text": "You said 7."}]},
    ]}
    tk = Testkit(testkit, script, work)
    try:
        code, messages, stderr = run_gyre(
            gyre, tk.url, cwd, os.path.join(work, "home2"),
            ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"],
            stdin_lines=[
                {"type": "user", "message": {"role": "user", "content": "Remember 7."}},
                {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "What number?"}]}},
            ])
    finally:
        tk.close()
    check_common(messages, code, stderr)
    types = [m["type"] for m in messages]
    expect(types == ["system", "assistant", "result", "assistant", "result"], f"sequence {types}")
    expect(messages[-1]["result"] == "You said 7.", "second turn answered")
    expect(messages[2]["session_id"] == messages[4]["session_id"], "one session")


def test_max_turns_error_result(gyre, testkit, work):
    cwd = os.path.join(work, "project3")
    os.makedirs(cwd)
    script = {"turns": [{"content": [{"type": "tool_use", "name": "Glob", "input": {"pattern": "*"}}]}],
              "when_exhausted": "repeat_last"}
    tk = Testkit(testkit, script, work)
    try:
        code, messages, stderr = run_gyre(
            gyre, tk.url, cwd, os.path.join(work, "home3"),
            ["-p", "loop", "--max-turns", "1", "--output-format", "stream-json", "--verbose"])
    finally:
        tk.close()
    expect(code == 1, f"exit 1 on error, got {code}")
    result = messages[-1]
    expect(result["subtype"] == "error_max_turns" and result["is_error"] is True, "max turns result")
    expect(result["errors"] == ["Reached maximum number of turns (1)"], f"errors {result.get('errors')}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gyre", required=True)
    parser.add_argument("--testkit", required=True)
    args = parser.parse_args()
    tests = [test_tool_round_trip, test_streaming_input, test_max_turns_error_result]
    passed = failed = 0
    for test in tests:
        with tempfile.TemporaryDirectory() as work:
            try:
                test(os.path.abspath(args.gyre), os.path.abspath(args.testkit), work)
                print(f"ok   {test.__name__}")
                passed += 1
            except Exception:  # noqa: BLE001 - report every failure, keep going
                print(f"FAIL {test.__name__}")
                traceback.print_exc()
                failed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
