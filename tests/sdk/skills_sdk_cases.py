#!/usr/bin/env python3
"""Skills and custom commands as an Agent SDK program sees them (`claude-agent-sdk`, gyre
as `cli_path`): `setting_sources` decides whether the user's and the project's load,
`initialize`'s commands list them (get_server_info), and a prompt `/name args` runs one.
Runs in the harness of agent_sdk_cases.py. Run with the venv's python:

    skills_sdk_cases.py --gyre PATH --testkit PATH [--only NAME]
"""

import os

import agent_sdk_cases as harness
from agent_sdk_cases import Case, ClaudeSDKClient, collect, expect, query, result_of, text_turn


def write_skills_and_commands(case):
    user_skill = os.path.join(case.home, ".claude", "skills", "pdf")
    os.makedirs(user_skill)
    with open(os.path.join(user_skill, "SKILL.md"), "w") as f:
        f.write("---\nname: pdf\ndescription: Work with PDF files\n---\nUse pdftotext on $ARGUMENTS.\n")
    os.makedirs(os.path.join(case.project, ".claude", "commands"))
    case.write(".claude/commands/review.md",
               "---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $ARGUMENTS closely.\n")
    # The project is the user's own: trusted, as `gyre trust` records it.
    with open(os.path.join(case.home, "trusted-folders.json"), "w") as f:
        f.write('{"folders": ["%s"]}' % os.path.realpath(case.project))


def tool_names(body):
    return [t["name"] for t in body.get("tools", [])]


def last_user_text(body):
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content)


async def test_setting_sources_load_skills_and_commands(case):
    write_skills_and_commands(case)
    options = case.options(setting_sources=["user", "project"])
    async with ClaudeSDKClient(options=options) as client:
        info = await client.get_server_info()
        names = [c["name"] for c in info["commands"]]
        expect(names == ["compact", "review", "pdf"], f"commands {info['commands']}")
        review = info["commands"][1]
        expect(review["description"] == "Review a file" and review["argumentHint"] == "<file>", review)
        await client.query("/review lib.rs")
        messages = await collect(client.receive_response())
    expect(result_of(messages).result == "reviewed", messages)
    body = case.tk.requests()[0]
    expect("Review lib.rs closely." in last_user_text(body), body["messages"])
    expect("Skill" in tool_names(body), tool_names(body))
    # A skill invoked by name.
    messages = await collect(query(prompt="/pdf a.pdf", options=options))
    expect(result_of(messages).result == "pdf read", messages)
    expect("Use pdftotext on a.pdf." in last_user_text(case.tk.requests()[1]), case.tk.requests()[1])


async def test_without_setting_sources_nothing_loads(case):
    write_skills_and_commands(case)
    options = case.options(setting_sources=[])
    messages = await collect(query(prompt="/review lib.rs", options=options))
    expect(result_of(messages).subtype == "success", messages)
    body = case.tk.requests()[0]
    expect(last_user_text(body) == "/review lib.rs", body["messages"])
    expect("Skill" not in tool_names(body), tool_names(body))


CASES = {
    "setting_sources_load_skills_and_commands": (
        test_setting_sources_load_skills_and_commands, [text_turn("reviewed"), text_turn("pdf read")]),
    "without_setting_sources_nothing_loads": (
        test_without_setting_sources_nothing_loads, [text_turn("as typed")]),
}


if __name__ == "__main__":
    harness.main(CASES)
