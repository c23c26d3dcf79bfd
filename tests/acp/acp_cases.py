#!/usr/bin/env python3
"""An editor written with the Python `agent-client-protocol` package (PyPI) drives
`gyre acp` against gyre-testkit.

Each case starts gyre-testkit with a script, spawns `gyre acp` through the package's
`spawn_agent_process`, and checks what the editor sees and what gyre sent to the API.
Run with the venv's python:

    acp_cases.py --gyre PATH --testkit PATH [--only NAME]

Prints one 'ok'/'FAIL' line per case and 'N passed, M failed'; exits non-zero on a failure.
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from gyre_testkit import Testkit  # noqa: E402
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

API_KEY = "sk-ant-acp-python-test-key"
GYRE = ""
TESTKIT = ""
# Zed's Node adapter (`claude-agent-acp`'s dist/index.js) to drive instead of `gyre acp`,
# with gyre as the Claude Code executable it starts.
ADAPTER = ""


class Editor:
    """The editor's side: what it was told, and its answers to gyre's requests."""

    def __init__(self):
        self.updates = []  # (session_id, update)
        self.answers = []  # option ids, in order; a question waits for one
        self.asked = []
        self.buffers = {}
        self.written = []
        self.terminals = []  # (command line, task giving (output, exit code))
        self.changed = asyncio.Event()

    def _touch(self):
        self.changed.set()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append((session_id, tool_call, options))
        self._touch()
        while not self.answers:
            self.changed.clear()
            await self.changed.wait()
        option = self.answers.pop(0)
        # An answer may name an option's kind: the id of that option (adapters name
        # their options differently from gyre).
        option = next((o.option_id for o in options if o.kind == option), option)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option))

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append((session_id, update))
        self._touch()

    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.written.append((path, content))
        return WriteTextFileResponse()

    async def create_terminal(self, session_id, command, args=None, env=None, cwd=None,
                              output_byte_limit=None, **kwargs):
        variables = {**os.environ, **{e.name: e.value for e in env or []}}

        async def run():
            proc = await asyncio.create_subprocess_exec(
                command, *(args or []), cwd=cwd, env=variables,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            out, _ = await proc.communicate()
            return out.decode(), proc.returncode

        self.terminals.append((" ".join([command, *(args or [])]), asyncio.create_task(run())))
        return CreateTerminalResponse(terminal_id=str(len(self.terminals) - 1))

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kwargs):
        _, code = await self.terminals[int(terminal_id)][1]
        return WaitForTerminalExitResponse(exit_code=code)

    async def terminal_output(self, session_id, terminal_id, **kwargs):
        out, code = await self.terminals[int(terminal_id)][1]
        return TerminalOutputResponse(output=out, truncated=False,
                                      exit_status=TerminalExitStatus(exit_code=code))

    async def release_terminal(self, session_id, terminal_id, **kwargs):
        return ReleaseTerminalResponse()

    def answer(self, *options):
        self.answers.extend(options)
        self._touch()

    def of(self, session_id, kind=None):
        return [u for s, u in self.updates if s == session_id and (kind is None or u.session_update == kind)]

    def text(self, session_id, kind="agent_message_chunk"):
        return "".join(u.content.text for u in self.of(session_id, kind))

    async def wait_until(self, what, done, timeout=20):
        async def loop():
            while not done():
                self.changed.clear()
                await self.changed.wait()
        try:
            await asyncio.wait_for(loop(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; updates: {self.updates}") from None


class Case:
    """A scratch project, a GYRE_HOME and a testkit for one test."""

    def __init__(self, work, turns):
        self.work = work
        self.project = os.path.realpath(os.path.join(work, "project"))
        self.home = os.path.join(work, "home")
        os.makedirs(self.project)
        os.makedirs(self.home)
        with open(os.path.join(self.home, "trusted-folders.json"), "w") as f:
            json.dump({"folders": [self.project]}, f)
        self.tk = Testkit(TESTKIT, {"turns": turns}, work)

    def env(self):
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": self.home,
            "GYRE_HOME": self.home,
            "ANTHROPIC_BASE_URL": self.tk.url,
            "ANTHROPIC_API_KEY": API_KEY,
        }

    def spawn(self, editor):
        if ADAPTER:
            env = {**self.env(), "CLAUDE_CODE_EXECUTABLE": GYRE}
            return spawn_agent_process(editor, "node", ADAPTER, env=env, cwd=self.project)
        return spawn_agent_process(editor, GYRE, "acp", env=self.env(), cwd=self.project)

    def write(self, name, text):
        path = os.path.join(self.project, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path


def text_turn(text, **kw):
    return {"content": [{"type": "text", "text": text}], **kw}


def tool_turn(name, tool_input, tool_id=None):
    block = {"type": "tool_use", "name": name, "input": tool_input}
    if tool_id:
        block["id"] = tool_id
    return {"content": [block]}


def bash(tool_id, command):
    return tool_turn("Bash", {"command": command, "description": "make a file"}, tool_id)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


async def start(conn, fs=None):
    caps = ClientCapabilities(fs=fs) if fs else ClientCapabilities()
    init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
    expect(init.protocol_version == 1, f"protocol 1: {init}")
    expect(init.agent_capabilities.load_session, f"loadSession: {init}")


def final_status(editor, session_id, call_id):
    status = None
    for u in editor.of(session_id, "tool_call_update"):
        if u.tool_call_id == call_id and u.status:
            status = u.status
    return status


async def case_allow_once_runs_the_call_and_streams_the_plan(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await start(conn)
        session = await conn.new_session(cwd=case.project, mcp_servers=[])
        modes = [m.id for m in session.modes.available_modes]
        expect({"default", "acceptEdits", "plan"} <= set(modes), f"modes: {modes}")
        sid = session.session_id
        editor.answer("allow_once")
        response = await conn.prompt(session_id=sid, prompt=[text_block("make the file")])
        expect(response.stop_reason == "end_turn", f"stop: {response}")
        expect(os.path.isfile(os.path.join(case.project, "made.txt")), "the command ran")
        expect(editor.text(sid) == "Made it.", f"answer: {editor.text(sid)!r}")
        plans = editor.of(sid, "plan")
        expect(plans and plans[0].entries[0].content == "Make the file", f"plan: {plans}")
        calls = editor.of(sid, "tool_call")
        expect([c.tool_call_id for c in calls] == ["toolu_make"], f"calls: {calls}")
        expect(calls[0].kind == "execute", f"kind: {calls[0]}")
        expect(final_status(editor, sid, "toolu_make") == "completed", "completed")
        _, tool_call, options = editor.asked[0]
        expect(tool_call.tool_call_id == "toolu_make", f"asked about: {tool_call}")
        kinds = [o.kind for o in options]
        # Zed's adapter lists "always" first; gyre lists them as the editor shows them.
        want = ["allow_once", "allow_always", "reject_once"]
        expect((sorted(kinds) == sorted(want)) if ADAPTER else kinds == want, f"options: {kinds}")


async def case_allow_always_then_reject(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await start(conn)
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        editor.answer("allow_always")
        response = await conn.prompt(session_id=sid, prompt=[text_block("twice")])
        expect(response.stop_reason == "end_turn", f"stop: {response}")
        expect(len(editor.asked) == 1, f"asked once: {editor.asked}")
        expect(final_status(editor, sid, "toolu_2") == "completed", "the second ran unasked")
        editor.answer("reject_once")
        await conn.prompt(session_id=sid, prompt=[text_block("another")])
        expect(len(editor.asked) == 2, "the other command was asked about")
        expect(not os.path.exists(os.path.join(case.project, "b.txt")), "the rejected command did not run")
        expect(final_status(editor, sid, "toolu_3") == "failed", "the rejected call failed")


async def case_cancel_mid_turn(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await start(conn)
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go on")]))
        await editor.wait_until("the first words", lambda: editor.text(sid) != "")
        await conn.cancel(session_id=sid)
        response = await asyncio.wait_for(running, 20)
        expect(response.stop_reason == "cancelled", f"stop: {response}")
        again = await conn.prompt(session_id=sid, prompt=[text_block("again")])
        expect(again.stop_reason == "end_turn", "the session goes on")


async def case_set_mode(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await start(conn)
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        try:
            await conn.set_session_mode(session_id=sid, mode_id="reckless")
            raise AssertionError("an unknown mode is an error")
        except RequestError as e:
            expect("reckless" in str(e.data), f"the error names the mode: {e.data}")
        await conn.set_session_mode(session_id=sid, mode_id="acceptEdits")
        await conn.prompt(session_id=sid, prompt=[text_block("write notes")])
        expect(not editor.asked, "acceptEdits writes without asking")
        with open(os.path.join(case.project, "notes.md")) as f:
            expect(f.read() == "# Notes\n", "written")
        call = editor.of(sid, "tool_call")[0]
        expect(call.kind == "edit", f"kind: {call}")
        expect(call.content[0].type == "diff" and call.content[0].new_text == "# Notes\n", f"diff: {call.content}")


async def remembered_session(case):
    """A session, closed with its process, whose one prompt the next cases look for."""
    async with case.spawn(Editor()) as (conn, _proc):
        await start(conn)
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("remember: the tree is an oak")])
    return sid


async def case_load_replays_history(case):
    sid = await remembered_session(case)
    later = Editor()
    async with case.spawn(later) as (conn, _proc):
        await start(conn)
        await conn.load_session(cwd=case.project, session_id=sid, mcp_servers=[])
        expect(later.text(sid, "user_message_chunk") == "remember: the tree is an oak", "the user's message replayed")
        expect(later.text(sid) == "Noted: the tree is an oak.", "the answer replayed")
        await conn.prompt(session_id=sid, prompt=[text_block("which tree?")])
        expect("the tree is an oak" in json.dumps(case.tk.requests()[-1]["messages"]), "the history went along")


async def case_two_sessions_at_once(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await start(conn)
        a = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        b = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        expect(a != b, "two ids")
        held = asyncio.create_task(conn.prompt(session_id=a, prompt=[text_block("make a")]))
        await editor.wait_until("A's question", lambda: editor.asked)
        done_b = await conn.prompt(session_id=b, prompt=[text_block("say done")])
        expect(done_b.stop_reason == "end_turn", "B ran while A waited")
        expect(not held.done(), "A still waits")
        expect(editor.text(b) == "B done." and not editor.of(b, "tool_call"), "B saw only its own turn")
        editor.answer("allow_once")
        done_a = await asyncio.wait_for(held, 20)
        expect(done_a.stop_reason == "end_turn", "A finished")
        expect(editor.text(a) == "A done.", f"A's answer: {editor.text(a)!r}")


async def case_editor_buffers_and_writes(case):
    path = case.write("src/lib.rs", "fn on_disk() {}\n")
    editor = Editor()
    editor.buffers[path] = "fn unsaved() {}\n"
    async with case.spawn(editor) as (conn, _proc):
        await start(conn, FileSystemCapabilities(read_text_file=True, write_text_file=True))
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        editor.answer("allow_once")
        await conn.prompt(session_id=sid, prompt=[text_block("rename it")])
        sent = json.dumps(case.tk.requests()[1]["messages"])
        expect("fn unsaved()" in sent and "fn on_disk()" not in sent, f"Read saw the buffer: {sent}")
        expect(editor.written == [(path, "fn edited() {}\n")], f"the edit went to the editor: {editor.written}")
        with open(path) as f:
            expect(f.read() == "fn on_disk() {}\n", "the disk is the editor's to write")


async def case_bash_in_the_editors_terminal(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await conn.initialize(protocol_version=PROTOCOL_VERSION,
                              client_capabilities=ClientCapabilities(terminal=True))
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        editor.answer("allow_once")
        await conn.prompt(session_id=sid, prompt=[text_block("run it")])
        commands = [c for c, _ in editor.terminals]
        expect(commands == ["bash -c echo in-the-editor; touch t.txt"], f"the editor ran it: {commands}")
        expect(os.path.isfile(os.path.join(case.project, "t.txt")), "in the project")
        expect("in-the-editor" in json.dumps(case.tk.requests()[1]["messages"]), "the model got its output")
        shown = [c for u in editor.of(sid, "tool_call_update") if u.tool_call_id == "toolu_t"
                 for c in (u.content or []) if c.type == "terminal"]
        expect(shown and shown[0].terminal_id == "0", f"the call showed the terminal: {shown}")


async def case_sessions_listed_resumed_forked_closed(case):
    sid = await remembered_session(case)
    later = Editor()
    async with case.spawn(later) as (conn, _proc):
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
        caps = init.agent_capabilities.session_capabilities
        expect(caps and None not in (caps.list, caps.fork, caps.resume, caps.close), f"capabilities: {caps}")
        listed = (await conn.list_sessions(cwd=case.project)).sessions
        expect([(s.session_id, s.cwd, s.title) for s in listed]
               == [(sid, case.project, "remember: the tree is an oak")], f"listed: {listed}")
        await conn.resume_session(session_id=sid, cwd=case.project, mcp_servers=[])
        expect(not later.of(sid, "user_message_chunk"), "resume replays nothing")
        await conn.prompt(session_id=sid, prompt=[text_block("which tree?")])
        expect("the tree is an oak" in json.dumps(case.tk.requests()[-1]["messages"]), "the history went along")
        fork = (await conn.fork_session(session_id=sid, cwd=case.project, mcp_servers=[])).session_id
        expect(fork != sid, "the fork is another session")
        await conn.prompt(session_id=fork, prompt=[text_block("and now?")])
        expect("which tree?" in json.dumps(case.tk.requests()[-1]["messages"]), "the fork has it all")
        expect(len((await conn.list_sessions(cwd=case.project)).sessions) == 2, "both listed")
        await conn.close_session(session_id=fork)
        try:
            await conn.prompt(session_id=fork, prompt=[text_block("hello?")])
            raise AssertionError("a closed session takes no prompt")
        except RequestError as e:
            expect("no session" in str(e.data), f"the error says so: {e.data}")


def call_text(update):
    return "".join(c.content.text for c in update.content or [] if c.type == "content")


async def case_bash_output_grows_while_it_runs(case):
    editor = Editor()
    async with case.spawn(editor) as (conn, _proc):
        await start(conn)
        sid = (await conn.new_session(cwd=case.project, mcp_servers=[])).session_id
        editor.answer("allow_once")
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("run it")]))

        def live():
            return [call_text(u) for u in editor.of(sid, "tool_call_update")
                    if u.tool_call_id == "toolu_slow" and u.status == "in_progress" and "first" in call_text(u)]
        await editor.wait_until("the first line, live", live)
        expect(not running.done() and "second" not in live()[0], f"seen while it ran: {live()}")
        response = await asyncio.wait_for(running, 20)
        expect(response.stop_reason == "end_turn", f"stop: {response}")
        expect(final_status(editor, sid, "toolu_slow") == "completed", "completed")


async def case_malformed_lines_get_errors(case):
    proc = await asyncio.create_subprocess_exec(
        GYRE, "acp", env=case.env(), cwd=case.project,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)

    async def exchange(line):
        proc.stdin.write((line + "\n").encode())
        await proc.stdin.drain()
        return json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))

    reply = await exchange("{not json")
    expect(reply["error"]["code"] == -32700 and reply["id"] is None, f"parse error: {reply}")
    reply = await exchange('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')
    expect(reply["result"]["protocolVersion"] == 1, f"initialize: {reply}")
    reply = await exchange('{"jsonrpc":"2.0","id":2,"method":"no/such","params":{}}')
    expect(reply["id"] == 2 and reply["error"]["code"] == -32601, f"unknown method: {reply}")
    reply = await exchange(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "session/new",
                                       "params": {"cwd": case.project, "mcpServers": []}}))
    expect(isinstance(reply["result"]["sessionId"], str), f"still serving: {reply}")
    proc.stdin.close()
    expect(await asyncio.wait_for(proc.wait(), 20) == 0, "exits when stdin closes")


CASES = {
    "allow_once_runs_the_call_and_streams_the_plan": (
        case_allow_once_runs_the_call_and_streams_the_plan,
        [
            tool_turn("TodoWrite", {"todos": [
                {"content": "Make the file", "status": "in_progress", "activeForm": "Making the file"}]}),
            bash("toolu_make", "touch made.txt"),
            text_turn("Made it."),
        ],
    ),
    "allow_always_then_reject": (
        case_allow_always_then_reject,
        [bash("toolu_1", "touch a.txt"), bash("toolu_2", "touch a.txt"), text_turn("Twice."),
         bash("toolu_3", "touch b.txt"), text_turn("Not made.")],
    ),
    "cancel_mid_turn": (
        case_cancel_mid_turn,
        [text_turn("Thinking about it at length", chunk_chars=4, stall={"after_events": 4, "ms": 60000}),
         text_turn("Back again.")],
    ),
    "set_mode": (
        case_set_mode,
        [None, text_turn("Written.")],
    ),
    "load_replays_history": (
        case_load_replays_history,
        [text_turn("Noted: the tree is an oak."), text_turn("An oak.")],
    ),
    "two_sessions_at_once": (
        case_two_sessions_at_once,
        [bash("toolu_a", "touch a.txt"), text_turn("B done."), text_turn("A done.")],
    ),
    "editor_buffers_and_writes": (
        case_editor_buffers_and_writes,
        [None, None, text_turn("Renamed.")],
    ),
    "bash_in_the_editors_terminal": (
        case_bash_in_the_editors_terminal,
        [bash("toolu_t", "echo in-the-editor; touch t.txt"), text_turn("Seen.")],
    ),
    "sessions_listed_resumed_forked_closed": (
        case_sessions_listed_resumed_forked_closed,
        [text_turn("Noted: the tree is an oak."), text_turn("An oak."), text_turn("Still an oak.")],
    ),
    "bash_output_grows_while_it_runs": (
        case_bash_output_grows_while_it_runs,
        [bash("toolu_slow", "echo first; sleep 2; echo second"), text_turn("Both.")],
    ),
    "malformed_lines_get_errors": (
        case_malformed_lines_get_errors,
        [text_turn("ok")],
    ),
}


def turns_for(name, turns, work):
    """Turns that name files in the case's project, filled in once it is known."""
    project = os.path.realpath(os.path.join(work, "project"))
    if name == "set_mode":
        turns[0] = tool_turn("Write", {"file_path": os.path.join(project, "notes.md"), "content": "# Notes\n"})
    if name == "editor_buffers_and_writes":
        path = os.path.join(project, "src", "lib.rs")
        turns[0] = tool_turn("Read", {"file_path": path})
        turns[1] = tool_turn("Edit", {"file_path": path, "old_string": "unsaved", "new_string": "edited"})
    return turns


def main():
    global GYRE, TESTKIT
    parser = argparse.ArgumentParser()
    parser.add_argument("--gyre", required=True)
    parser.add_argument("--testkit", required=True)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--adapter", default="")
    args = parser.parse_args()
    global ADAPTER
    GYRE, TESTKIT = os.path.abspath(args.gyre), os.path.abspath(args.testkit)
    ADAPTER = os.path.abspath(args.adapter) if args.adapter else ""
    passed = failed = 0
    for name, (test, turns) in CASES.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory() as work:
            case = None
            try:
                case = Case(work, turns_for(name, list(turns), work))
                asyncio.run(asyncio.wait_for(test(case), timeout=60))
                print(f"ok   {name}", flush=True)
                passed += 1
            except BaseException:  # noqa: BLE001 - report every failure, keep going
                print(f"FAIL {name}", flush=True)
                traceback.print_exc()
                failed += 1
            finally:
                if case:
                    case.tk.close()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
