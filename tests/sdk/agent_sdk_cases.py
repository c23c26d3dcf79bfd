#!/usr/bin/env python3
"""Programs written for Claude Code's Agent SDK (`claude-agent-sdk`), run with gyre as
`cli_path` against gyre-testkit.

Each case starts gyre-testkit with a script, runs the real SDK (query() or
ClaudeSDKClient) with `cli_path=<gyre>` and checks what the program sees and what gyre
sent to the API. Run with the venv's python:

    agent_sdk_cases.py --gyre PATH --testkit PATH [--only NAME]

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
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookEventMessage,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultError,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

API_KEY = "sk-ant-agent-sdk-test-key"
GYRE = ""
TESTKIT = ""


class Case:
    """A scratch project, a GYRE_HOME and a testkit for one test."""

    def __init__(self, work, turns, **script):
        self.work = work
        self.project = os.path.join(work, "project")
        self.home = os.path.join(work, "home")
        os.makedirs(self.project)
        os.makedirs(self.home)
        self.tk = Testkit(TESTKIT, {"turns": turns, **script}, work)

    def options(self, **kw):
        env = {
            "HOME": self.home,
            "GYRE_HOME": self.home,
            "ANTHROPIC_BASE_URL": self.tk.url,
            "ANTHROPIC_API_KEY": API_KEY,
        }
        return ClaudeAgentOptions(cli_path=GYRE, cwd=self.project, env=env, **kw)

    def write(self, name, text):
        path = os.path.join(self.project, name)
        with open(path, "w") as f:
            f.write(text)
        return path


def text_turn(text, **kw):
    return {"content": [{"type": "text", "text": text}], **kw}


def tool_turn(name, tool_input, text=None, tool_id=None):
    block = {"type": "tool_use", "name": name, "input": tool_input}
    if tool_id:
        block["id"] = tool_id
    return {"content": ([{"type": "text", "text": text}] if text else []) + [block]}


async def collect(aiter):
    return [m async for m in aiter]


async def one_prompt(text):
    """query() needs a stream prompt when can_use_tool is set."""
    yield {"type": "user", "message": {"role": "user", "content": text}}


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def result_of(messages):
    results = [m for m in messages if isinstance(m, ResultMessage)]
    expect(len(results) == 1, f"one result, got {messages}")
    return results[0]


def tool_results(messages):
    return [b for m in messages if isinstance(m, UserMessage) and isinstance(m.content, list)
            for b in m.content if isinstance(b, ToolResultBlock)]


def last_tool_result_sent(case):
    """The content of the last tool_result block gyre sent to the API."""
    for body in reversed(case.tk.requests()):
        for msg in reversed(body["messages"]):
            for block in msg["content"] if isinstance(msg["content"], list) else []:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    if isinstance(content, list):
                        content = "".join(p.get("text", "") for p in content)
                    return content, block.get("is_error", False)
    raise AssertionError("no tool_result was sent")


# --- query() ---------------------------------------------------------------------------

async def test_text(case):
    messages = await collect(query(prompt="Say hi", options=case.options()))
    init = messages[0]
    expect(isinstance(init, SystemMessage) and init.subtype == "init", f"first is init: {init}")
    expect(init.data["claude_code_version"], "init carries claude_code_version")
    assistant = [m for m in messages if isinstance(m, AssistantMessage)]
    expect(assistant[0].content == [TextBlock(text="Hi there.")], f"text {assistant}")
    result = result_of(messages)
    expect(result.subtype == "success" and not result.is_error, f"success: {result}")
    expect(result.result == "Hi there.", result.result)
    expect(result.stop_reason == "end_turn", f"stop_reason {result.stop_reason}")
    expect(result.model_usage and "claude-sonnet-4-5" in result.model_usage, f"modelUsage {result.model_usage}")
    body = case.tk.requests()[0]
    expect(body["messages"][0]["content"][-1]["text"] == "Say hi", body["messages"])
    # The SDK passes --system-prompt "" by default: no empty text block may be sent.
    for block in body.get("system", []):
        expect(block.get("text"), f"no empty system block: {body.get('system')}")


async def test_tool_round_trip(case):
    path = case.write("hello.txt", "hello from the agent sdk\n")
    messages = await collect(query(prompt="Read hello.txt", options=case.options(allowed_tools=["Read"])))
    uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolUseBlock)]
    expect(len(uses) == 1 and uses[0].name == "Read", f"one Read: {uses}")
    results = tool_results(messages)
    expect(results and results[0].tool_use_id == uses[0].id, "result answers the call")
    expect("hello from the agent sdk" in str(results[0].content), f"content {results[0].content}")
    users = [m for m in messages if isinstance(m, UserMessage)]
    expect(users[0].tool_use_result is not None, "user line carries tool_use_result")
    result = result_of(messages)
    expect(result.result == "It says hello." and result.num_turns == 2, f"{result}")


async def test_max_turns(case):
    messages = []
    try:
        async for m in query(prompt="Loop", options=case.options(max_turns=1, allowed_tools=["Glob"])):
            messages.append(m)
        raise AssertionError("an error result ends the run with ResultError")
    except ResultError as e:
        expect(e.data["subtype"] == "error_max_turns", f"error data {e.data}")
    result = result_of(messages)
    expect(result.subtype == "error_max_turns" and result.is_error, f"{result}")


async def test_accept_edits(case):
    path = os.path.join(case.project, "notes.txt")
    messages = await collect(query(prompt="Rewrite notes", options=case.options(permission_mode="acceptEdits")))
    expect(open(path).read() == "new\n", "the Write ran without a prompt")
    expect(result_of(messages).subtype == "success", "success")


async def test_can_use_tool_allow(case):
    path = os.path.join(case.project, "a.txt")
    seen = []

    async def allow(tool_name, tool_input, context):
        seen.append((tool_name, tool_input.get("file_path")))
        return PermissionResultAllow()

    messages = await collect(query(prompt=one_prompt("Write a.txt"), options=case.options(can_use_tool=allow)))
    expect(seen == [("Write", path)], f"asked about the Write: {seen}")
    expect(open(path).read() == "written\n", "the Write ran")
    expect(result_of(messages).subtype == "success", "success")


async def test_can_use_tool_allow_always(case):
    asked = []

    async def allow_always(tool_name, tool_input, context):
        asked.append((tool_name, [s.to_dict() for s in context.suggestions]))
        return PermissionResultAllow(updated_permissions=context.suggestions)

    messages = await collect(query(prompt=one_prompt("Write twice"), options=case.options(can_use_tool=allow_always)))
    expect(len(asked) == 1, f"asked once, the suggestion covered the second: {asked}")
    # As narrow as the question: the project's directory, never a bare Write that would
    # allow writes anywhere on disk.
    project = os.path.realpath(case.project)
    expect(asked[0][1][0]["rules"] == [{"toolName": "Write", "ruleContent": f"/{project}/**"}],
           f"suggestion {asked[0][1]}")
    for name in ("a.txt", "b.txt"):
        expect(os.path.exists(os.path.join(case.project, name)), f"{name} written")
    expect(result_of(messages).subtype == "success", "success")


async def test_can_use_tool_updated_input(case):
    path = os.path.join(case.project, "a.txt")

    async def rewrite(tool_name, tool_input, context):
        return PermissionResultAllow(updated_input={**tool_input, "content": "changed by the sdk\n"})

    messages = await collect(query(prompt=one_prompt("Write a.txt"), options=case.options(can_use_tool=rewrite)))
    expect(open(path).read() == "changed by the sdk\n", "the Write ran with the updated input")
    expect(result_of(messages).subtype == "success", "success")


async def test_pre_tool_use_hook_updated_input(case):
    async def rewrite(hook_input, tool_use_id, context):
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                       "updatedInput": {"command": "echo rewritten > by-hook"}}}

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[rewrite])]}
    messages = await collect(query(prompt="Run it", options=case.options(hooks=hooks)))
    expect(open(os.path.join(case.project, "by-hook")).read() == "rewritten\n", "the rewritten command ran")
    expect(not os.path.exists(os.path.join(case.project, "made-by-bash")), "the original did not")
    expect(result_of(messages).subtype == "success", "success")


async def test_can_use_tool_deny(case):
    path = case.write("a.txt", "a\n")

    async def deny(tool_name, tool_input, context):
        return PermissionResultDeny(message="not today")

    messages = await collect(query(prompt=one_prompt("Write a.txt"), options=case.options(can_use_tool=deny)))
    expect(open(path).read() == "a\n", "file unchanged")
    content, is_error = last_tool_result_sent(case)
    expect(is_error and "not today" in content, f"denial reaches the model: {content}")
    result = result_of(messages)
    expect(result.permission_denials and result.permission_denials[0]["tool_name"] == "Write",
           f"denial recorded: {result.permission_denials}")


async def test_pre_tool_use_hook_deny(case):
    calls = []

    async def guard(hook_input, tool_use_id, context):
        calls.append((hook_input["hook_event_name"], hook_input["tool_name"], tool_use_id))
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": "deny",
                                       "permissionDecisionReason": "no bash in tests"}}

    hooks = {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}
    messages = await collect(query(prompt="Run it", options=case.options(
        hooks=hooks, permission_mode="bypassPermissions", include_hook_events=True)))
    expect(len(calls) == 1 and calls[0][:2] == ("PreToolUse", "Bash"), f"hook called: {calls}")
    events = [(m.subtype, m.hook_event_name) for m in messages if isinstance(m, HookEventMessage)]
    expect(events == [("hook_started", "PreToolUse"), ("hook_response", "PreToolUse")], f"hook events {events}")
    content, is_error = last_tool_result_sent(case)
    expect(is_error and "no bash in tests" in content, f"hook reason reaches the model: {content}")
    expect(not os.path.exists(os.path.join(case.project, "made-by-bash")), "the command did not run")
    expect(result_of(messages).subtype == "success", "success")


async def test_stop_hook(case):
    stops = []

    async def on_stop(hook_input, tool_use_id, context):
        stops.append(hook_input)
        if not hook_input["stop_hook_active"]:
            return {"decision": "block", "reason": "say goodbye first"}
        return {}

    hooks = {"Stop": [HookMatcher(hooks=[on_stop])]}
    messages = await collect(query(prompt="Hello", options=case.options(hooks=hooks)))
    expect(len(stops) == 2 and stops[1]["stop_hook_active"], f"stop hook ran twice: {stops}")
    second = case.tk.requests()[1]["messages"]
    expect("say goodbye first" in json.dumps(second[-1]), f"the block reason went to the model: {second[-1]}")
    expect(result_of(messages).result == "Goodbye.", "the turn went on")


async def test_structured_output(case):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    messages = await collect(query(prompt="What is 6*7?",
                                   options=case.options(output_format={"type": "json_schema", "schema": schema})))
    body = case.tk.requests()[0]
    expect(any(t["name"] == "StructuredOutput" for t in body["tools"]), "StructuredOutput tool offered")
    result = result_of(messages)
    expect(result.structured_output == {"answer": 42}, f"structured_output {result.structured_output}")
    first_result, is_error = None, None
    for msg in case.tk.requests()[1]["messages"]:
        for block in msg["content"] if isinstance(msg["content"], list) else []:
            if block.get("type") == "tool_result" and first_result is None:
                first_result, is_error = block, block.get("is_error", False)
    expect(is_error, f"the schema mismatch was an error result: {first_result}")


async def test_partial_messages(case):
    messages = await collect(query(prompt="Say hi", options=case.options(include_partial_messages=True)))
    events = [m for m in messages if type(m).__name__ == "StreamEvent"]
    expect(any(e.event.get("type") == "content_block_delta" for e in events), f"deltas: {events[:3]}")
    expect(result_of(messages).result == "Hi there.", "result")


async def test_resume(case):
    first = await collect(query(prompt="Remember 7", options=case.options()))
    session = result_of(first).session_id
    second = await collect(query(prompt="What number?", options=case.options(resume=session)))
    expect(result_of(second).result == "You said 7.", "second answer")
    history = case.tk.requests()[1]["messages"]
    expect(json.dumps(history).count("Remember 7") == 1 and len(history) == 3,
           f"the resumed request carries the first exchange: {history}")


# --- ClaudeSDKClient ------------------------------------------------------------------

async def test_client_two_queries(case):
    async with ClaudeSDKClient(options=case.options()) as client:
        await client.query("Remember 7")
        first = await collect(client.receive_response())
        await client.query("What number?")
        second = await collect(client.receive_response())
    expect(result_of(first).result == "Noted.", "first")
    expect(result_of(second).result == "You said 7.", "second")
    expect(result_of(first).session_id == result_of(second).session_id, "one session")
    expect(len(case.tk.requests()[1]["messages"]) == 3, "the second request carries the first exchange")


async def test_client_interrupt(case):
    async with ClaudeSDKClient(options=case.options(include_partial_messages=True)) as client:
        await client.query("Tell a long story")
        got_text = False
        async for message in client.receive_messages():
            if type(message).__name__ == "StreamEvent" and not got_text:
                got_text = True
                await client.interrupt()
            if isinstance(message, ResultMessage):
                interrupted = message
                break
        await client.query("Short then")
        after = await collect(client.receive_response())
    expect(got_text, "the stream started")
    expect(interrupted.terminal_reason == "aborted_streaming", f"aborted: {interrupted}")
    expect(result_of(after).result == "Short.", "the process took the next query")


async def test_client_set_permission_mode(case):
    path = os.path.join(case.project, "notes.txt")
    async with ClaudeSDKClient(options=case.options()) as client:
        await client.query("Write notes")
        first = await collect(client.receive_response())
        expect(not os.path.exists(path), "default mode refused the Write")
        await client.set_permission_mode("acceptEdits")
        await client.query("Again")
        await collect(client.receive_response())
    expect(result_of(first).permission_denials, "first was denied")
    expect(open(path).read() == "new\n", "acceptEdits allowed the Write")


async def test_client_set_model(case):
    async with ClaudeSDKClient(options=case.options()) as client:
        await client.query("One")
        await collect(client.receive_response())
        await client.set_model("claude-haiku-4-5")
        await client.query("Two")
        await collect(client.receive_response())
    models = [b["model"] for b in case.tk.requests()]
    expect(models == ["claude-sonnet-4-5", "claude-haiku-4-5"], f"models {models}")


async def test_client_context_usage_and_mcp_status(case):
    async with ClaudeSDKClient(options=case.options()) as client:
        status = await client.get_mcp_status()
        expect(status.get("mcpServers") == [], f"no servers: {status}")
        await client.query("One")
        await collect(client.receive_response())
        usage = await client.get_context_usage()
    expect(usage["model"] == "claude-sonnet-4-5" and usage["maxTokens"] == 200000, f"usage {usage}")
    expect(isinstance(usage["totalTokens"], int) and usage["totalTokens"] > 0, f"tokens {usage}")
    # What /context shows, by category, after the turn: the conversation is in it.
    categories = {c["name"]: c["tokens"] for c in usage["categories"]}
    expect(categories.get("Messages", 0) > 0, f"categories {usage['categories']}")
    expect(sum(categories.values()) == usage["maxTokens"], f"categories {usage['categories']}")


async def test_client_sdk_mcp_tool(case):
    calls = []

    @tool("add", "Adds two numbers.", {"a": float, "b": float})
    async def add(args):
        calls.append(args)
        return {"content": [{"type": "text", "text": f"sum = {args['a'] + args['b']}"}]}

    calc = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    options = case.options(mcp_servers={"calc": calc}, allowed_tools=["mcp__calc__add"])
    async with ClaudeSDKClient(options=options) as client:
        status = await client.get_mcp_status()
        await client.query("Add 2 and 3")
        messages = await collect(client.receive_response())
    servers = status.get("mcpServers")
    expect(len(servers) == 1 and servers[0]["name"] == "calc" and servers[0]["status"] == "connected",
           f"mcp_status: {status}")
    expect({"name": "mcp__calc__add"} in servers[0]["tools"], f"tools: {servers[0]}")
    expect(calls == [{"a": 2, "b": 3}], f"the python tool ran once: {calls}")
    content, is_error = last_tool_result_sent(case)
    expect(not is_error and "sum = 5" in content, f"the tool's result reached the model: {content}")
    expect(result_of(messages).result == "It is 5.", "the turn finished")


async def test_sdk_mcp_server_in_init(case):
    @tool("add", "Adds two numbers.", {"a": float, "b": float})
    async def add(args):
        return {"content": [{"type": "text", "text": f"sum = {args['a'] + args['b']}"}]}

    calc = create_sdk_mcp_server(name="calc", version="1.0.0", tools=[add])
    messages = await collect(query(prompt="Add 2 and 3", options=case.options(
        mcp_servers={"calc": calc}, allowed_tools=["mcp__calc"])))
    init = messages[0]
    expect(init.data["mcp_servers"] == [{"name": "calc", "status": "connected"}], f"init: {init.data}")
    expect("mcp__calc__add" in init.data["tools"], f"tools: {init.data['tools']}")
    content, is_error = last_tool_result_sent(case)
    expect(not is_error and "sum = 5" in content, f"the tool's result reached the model: {content}")
    expect(result_of(messages).result == "It is 5.", "the turn finished")


async def test_post_tool_use_hook_context(case):
    seen = []

    async def review(hook_input, tool_use_id, context):
        seen.append((hook_input["hook_event_name"], hook_input["tool_name"], tool_use_id))
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                       "additionalContext": "remember to run the tests"}}

    async def object(hook_input, tool_use_id, context):
        return {"decision": "block", "reason": "that file is generated"}

    case.write("hello.txt", "hello\n")
    hooks = {"PostToolUse": [HookMatcher(matcher="Read", hooks=[review, object])]}
    messages = await collect(query(prompt="Read hello.txt", options=case.options(
        hooks=hooks, allowed_tools=["Read"])))
    expect(len(seen) == 1 and seen[0][:2] == ("PostToolUse", "Read"), f"hook called: {seen}")
    sent = case.tk.requests()[1]["messages"][-1]["content"]
    expect(sent[0]["type"] == "tool_result", f"the result comes first: {sent}")
    texts = [b.get("text", "") for b in sent[1:]]
    expect(any("additional context: remember to run the tests" in t for t in texts),
           f"the context follows the result: {texts}")
    expect(any("blocking error: that file is generated" in t for t in texts),
           f"the block's reason follows the result: {texts}")
    expect(result_of(messages).result == "It says hello.", "the turn went on")


async def test_client_pre_compact_hook(case):
    calls = []

    async def before_compact(hook_input, tool_use_id, context):
        calls.append(hook_input)
        return {}

    hooks = {"PreCompact": [HookMatcher(hooks=[before_compact])]}
    async with ClaudeSDKClient(options=case.options(hooks=hooks)) as client:
        for prompt in ["hi", "word " * 12000, "one more thing"]:
            await client.query(prompt)
            await collect(client.receive_response())
        await client.query("/compact keep the plan")
        compacted = await collect(client.receive_response())
    expect(len(calls) == 1, f"the hook ran once: {calls}")
    expect(calls[0]["hook_event_name"] == "PreCompact" and calls[0]["trigger"] == "manual"
           and calls[0]["custom_instructions"] == "keep the plan", f"hook input {calls[0]}")
    boundary = [m for m in compacted if isinstance(m, SystemMessage) and m.subtype == "compact_boundary"]
    expect(boundary, f"a compact_boundary: {compacted}")
    expect(result_of(compacted).result == "Compacted.", "compacted")
    summary = case.tk.requests()[3]
    expect("keep the plan" in json.dumps(summary["messages"]), "the instructions reached the summary")


def prompt_uuids(messages):
    """The uuids of the prompts `--replay-user-messages` echoed (not tool results)."""
    return [m.uuid for m in messages if isinstance(m, UserMessage)
            and not (isinstance(m.content, list)
                     and any(isinstance(b, ToolResultBlock) for b in m.content))]


async def test_rewind_files(case):
    a = case.write("a.txt", "one\n")
    keep = case.write("keep.txt", "mine\n")
    options = case.options(permission_mode="acceptEdits", allowed_tools=["Bash"],
                           enable_file_checkpointing=True,
                           extra_args={"replay-user-messages": None})
    async with ClaudeSDKClient(options=options) as client:
        await client.query("Change a.txt, add b.txt")
        first = await collect(client.receive_response())
        await client.query("Change a.txt again")
        second = await collect(client.receive_response())
        prompts = prompt_uuids(first) + prompt_uuids(second)
        expect(len(prompts) == 2, f"two prompts replayed: {first + second}")
        expect(open(a).read() == "three\n", "the edits ran")
        expect(open(keep).read() == "bash\n", "Bash ran")
        await client.rewind_files(prompts[1])
        expect(open(a).read() == "two\n", "a.txt as the second prompt found it")
        expect(os.path.exists(os.path.join(case.project, "b.txt")), "b.txt was there then")
        await client.rewind_files(prompts[0])
        expect(open(a).read() == "one\n", "a.txt as the first prompt found it")
        expect(not os.path.exists(os.path.join(case.project, "b.txt")), "b.txt is gone")
        expect(open(keep).read() == "bash\n", "what Bash did is not undone")
        # The session goes on after a rewind of its files.
        await client.query("Still there?")
        third = await collect(client.receive_response())
    expect(result_of(third).result == "Yes.", f"{third}")


async def test_rewind_files_needs_checkpointing(case):
    b = os.path.join(case.project, "b.txt")
    options = case.options(permission_mode="acceptEdits",
                           extra_args={"replay-user-messages": None})
    async with ClaudeSDKClient(options=options) as client:
        await client.query("Add b.txt")
        first = await collect(client.receive_response())
        expect(os.path.exists(b), "the Write ran")
        await client.rewind_files(prompt_uuids(first)[0])
    expect(os.path.exists(b), "without enable_file_checkpointing nothing was kept to rewind")


async def test_hook_events_as_callbacks(case):
    seen = []

    async def record(hook_input, tool_use_id, context):
        name = hook_input["hook_event_name"]
        seen.append((name, hook_input.get("tool_name") or hook_input.get("agent_type")))
        if name == "PermissionRequest":
            return {"hookSpecificOutput": {"hookEventName": name,
                                           "decision": {"behavior": "allow"}}}
        if name == "SubagentStart":
            return {"hookSpecificOutput": {"hookEventName": name,
                                           "additionalContext": "Be brief."}}
        return {}

    events = ["PostToolUseFailure", "PermissionRequest", "SubagentStart", "SubagentStop"]
    hooks = {event: [HookMatcher(hooks=[record])] for event in events}
    messages = await collect(query(prompt="Go", options=case.options(hooks=hooks)))
    expect(result_of(messages).result == "Done.", f"{messages}")
    expect(seen == [("PostToolUseFailure", "Read"), ("PermissionRequest", "Write"),
                    ("SubagentStart", "general-purpose"), ("SubagentStop", "general-purpose")],
           f"callbacks: {seen}")
    expect(open(os.path.join(case.project, "a.txt")).read() == "a\n",
           "the PermissionRequest callback allowed the Write")
    expect("Be brief." in json.dumps(case.tk.requests()[3]["messages"]),
           "the sub-agent got SubagentStart's context")


async def test_skills_select(case):
    for name in ("pdf", "docx"):
        folder = os.path.join(case.home, ".claude", "skills", name)
        os.makedirs(folder)
        with open(os.path.join(folder, "SKILL.md"), "w") as f:
            f.write(f"---\nname: {name}\ndescription: Work with {name} files\n---\nUse the {name} tools.\n")
    await collect(query(prompt="Convert it", options=case.options(skills=["pdf"])))
    sent = case.tk.requests()
    skill = next((t for t in sent[0]["tools"] if t["name"] == "Skill"), None)
    expect(skill is not None, f"tools: {[t['name'] for t in sent[0]['tools']]}")
    expect("pdf: Work with pdf files" in skill["description"] and "docx" not in skill["description"],
           skill["description"])
    expect("Unknown skill: docx" in json.dumps(sent[1]["messages"][-1]), json.dumps(sent[1]["messages"][-1]))


async def test_resume_session_at(case):
    first = await collect(query(prompt="Remember 7", options=case.options()))
    session = result_of(first).session_id
    kept = next(m.uuid for m in first if isinstance(m, AssistantMessage))
    await collect(query(prompt="And 8", options=case.options(resume=session)))
    third = await collect(query(prompt="What number?",
                                options=case.options(resume=session, resume_session_at=kept)))
    expect(result_of(third).result == "You said 7.", f"third answer {result_of(third)}")
    history = json.dumps(case.tk.requests()[2]["messages"])
    expect("Remember 7" in history and "And 8" not in history, history)


CASES = {
    "text": (test_text, [text_turn("Hi there.")]),
    "tool_round_trip": (test_tool_round_trip, [
        tool_turn("Read", {"file_path": "hello.txt"}, text="Reading."),
        text_turn("It says hello.")]),
    "max_turns": (test_max_turns, [tool_turn("Glob", {"pattern": "*"})], {"when_exhausted": "repeat_last"}),
    "accept_edits": (test_accept_edits, [
        tool_turn("Write", {"file_path": "notes.txt", "content": "new\n"}), text_turn("Done.")]),
    "can_use_tool_allow": (test_can_use_tool_allow, [
        tool_turn("Write", {"file_path": "a.txt", "content": "written\n"}), text_turn("Done.")]),
    "can_use_tool_allow_always": (test_can_use_tool_allow_always, [
        tool_turn("Write", {"file_path": "a.txt", "content": "a\n"}),
        tool_turn("Write", {"file_path": "b.txt", "content": "b\n"}), text_turn("Done.")]),
    "can_use_tool_updated_input": (test_can_use_tool_updated_input, [
        tool_turn("Write", {"file_path": "a.txt", "content": "written\n"}), text_turn("Done.")]),
    "pre_tool_use_hook_updated_input": (test_pre_tool_use_hook_updated_input, [
        tool_turn("Bash", {"command": "touch made-by-bash"}), text_turn("Done.")]),
    "can_use_tool_deny": (test_can_use_tool_deny, [
        tool_turn("Write", {"file_path": "a.txt", "content": "written\n"}), text_turn("Denied.")]),
    "pre_tool_use_hook_deny": (test_pre_tool_use_hook_deny, [
        tool_turn("Bash", {"command": "touch made-by-bash"}), text_turn("Blocked.")]),
    "stop_hook": (test_stop_hook, [text_turn("Hello."), text_turn("Goodbye.")]),
    "structured_output": (test_structured_output, [
        tool_turn("StructuredOutput", {"answer": "forty-two"}),
        tool_turn("StructuredOutput", {"answer": 42}),
        text_turn("Done.")]),
    "partial_messages": (test_partial_messages, [text_turn("Hi there.")]),
    "resume": (test_resume, [text_turn("Noted."), text_turn("You said 7.")]),
    "client_two_queries": (test_client_two_queries, [text_turn("Noted."), text_turn("You said 7.")]),
    "client_interrupt": (test_client_interrupt, [
        {"content": [{"type": "text", "text": "Once upon a time " * 40}], "chunk_chars": 8,
         "stall": {"after_events": 4}},
        text_turn("Short.")]),
    "client_set_permission_mode": (test_client_set_permission_mode, [
        tool_turn("Write", {"file_path": "notes.txt", "content": "new\n"}), text_turn("Denied."),
        tool_turn("Write", {"file_path": "notes.txt", "content": "new\n"}), text_turn("Done.")]),
    "client_set_model": (test_client_set_model, [text_turn("One."), text_turn("Two.")]),
    "client_context_usage_and_mcp_status": (test_client_context_usage_and_mcp_status, [
        text_turn("One.", usage={"input_tokens": 1200, "output_tokens": 30})]),
    "post_tool_use_hook_context": (test_post_tool_use_hook_context, [
        tool_turn("Read", {"file_path": "hello.txt"}), text_turn("It says hello.")]),
    "client_pre_compact_hook": (test_client_pre_compact_hook, [
        text_turn("Hello."), text_turn("Noted."), text_turn("Sure."),
        text_turn("<summary>The user pasted a long text.</summary>")]),
    "client_sdk_mcp_tool": (test_client_sdk_mcp_tool, [
        tool_turn("mcp__calc__add", {"a": 2, "b": 3}), text_turn("It is 5.")]),
    "rewind_files": (test_rewind_files, [
        tool_turn("Read", {"file_path": "a.txt"}),
        tool_turn("Edit", {"file_path": "a.txt", "old_string": "one", "new_string": "two"}),
        tool_turn("Write", {"file_path": "b.txt", "content": "new\n"}),
        tool_turn("Bash", {"command": "echo bash > keep.txt"}),
        text_turn("Done."),
        tool_turn("Edit", {"file_path": "a.txt", "old_string": "two", "new_string": "three"}),
        text_turn("Again."),
        text_turn("Yes.")]),
    "rewind_files_needs_checkpointing": (test_rewind_files_needs_checkpointing, [
        tool_turn("Write", {"file_path": "b.txt", "content": "new\n"}), text_turn("Done.")]),
    "hook_events_as_callbacks": (test_hook_events_as_callbacks, [
        tool_turn("Read", {"file_path": "missing.txt"}),
        tool_turn("Write", {"file_path": "a.txt", "content": "a\n"}),
        tool_turn("Agent", {"description": "look", "prompt": "Look around.",
                            "subagent_type": "general-purpose"}),
        text_turn("Found nothing."),
        text_turn("Done.")]),
    "skills_select": (test_skills_select, [
        tool_turn("Skill", {"skill": "docx"}), text_turn("Done.")]),
    "resume_session_at": (test_resume_session_at, [
        text_turn("Noted."), text_turn("Also noted."), text_turn("You said 7.")]),
    "sdk_mcp_server_in_init": (test_sdk_mcp_server_in_init, [
        tool_turn("mcp__calc__add", {"a": 2, "b": 3}), text_turn("It is 5.")]),
}


def main(cases=None):
    """Runs `cases` (name -> (test, turns[, script])), CASES by default."""
    global GYRE, TESTKIT
    cases = CASES if cases is None else cases
    parser = argparse.ArgumentParser()
    parser.add_argument("--gyre", required=True)
    parser.add_argument("--testkit", required=True)
    parser.add_argument("--only", action="append", default=[])
    args = parser.parse_args()
    GYRE, TESTKIT = os.path.abspath(args.gyre), os.path.abspath(args.testkit)
    passed = failed = 0
    for name, (test, turns, *extra) in cases.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory() as work:
            case = Case(work, turns, **(extra[0] if extra else {}))
            try:
                asyncio.run(asyncio.wait_for(test(case), timeout=60))
                print(f"ok   {name}", flush=True)
                passed += 1
            except BaseException:  # noqa: BLE001 - report every failure, keep going
                print(f"FAIL {name}", flush=True)
                traceback.print_exc()
                failed += 1
            finally:
                case.tk.close()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
