// Programs written for Claude Code's TypeScript Agent SDK (`@anthropic-ai/claude-agent-sdk`
// from npm), run with gyre as `pathToClaudeCodeExecutable` against gyre-testkit.
//
// Each case starts gyre-testkit with a script, runs the real SDK's query() with the
// options a program would pass, and checks what the program sees and what gyre sent to
// the API. Run with node, the SDK importable from NODE_PATH's parent (see ts_sdk.rs):
//
//     node ts_sdk_cases.mjs --sdk DIR --gyre PATH --testkit PATH [--only NAME]
//
// Prints one 'ok'/'FAIL' line per case and 'N passed, M failed'; exits 1 on a failure.

import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith("--")) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const sdkDir = join(args.sdk, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.mjs");
const { query, tool, createSdkMcpServer } = await import(pathToFileURL(sdkDir).href);
const { z } = await import(pathToFileURL(join(args.sdk, "node_modules", "zod", "index.js")).href);

const API_KEY = "sk-ant-ts-sdk-test-key";

function expect(cond, what) {
  if (!cond) throw new Error(what);
}

/** gyre-testkit on a free port with `turns`; `requests()` is what it received. */
async function testkit(turns, work) {
  const path = join(work, "script.json");
  writeFileSync(path, JSON.stringify({ turns }));
  const proc = spawn(args.testkit, ["--script", path], { stdio: ["ignore", "pipe", "inherit"] });
  const first = await new Promise((resolve) => {
    createInterface({ input: proc.stdout }).once("line", resolve);
  });
  expect(first.startsWith("PORT "), `gyre-testkit printed ${first}`);
  const url = `http://127.0.0.1:${first.split(" ")[1]}`;
  return {
    url,
    async requests() {
      const all = await (await fetch(`${url}/_testkit/requests`)).json();
      return all.filter((q) => q.path === "/v1/messages").map((q) => q.body);
    },
    close() {
      proc.kill();
    },
  };
}

/** A scratch project, a GYRE_HOME and a testkit for one case. */
async function scratch(turns) {
  const work = mkdtempSync(join(tmpdir(), "gyre-ts-sdk-"));
  const project = join(work, "project");
  const home = join(work, "home");
  mkdirSync(project);
  mkdirSync(home);
  const tk = await testkit(turns, work);
  const options = (more = {}) => ({
    pathToClaudeCodeExecutable: args.gyre,
    cwd: project,
    env: {
      ...process.env,
      HOME: home,
      GYRE_HOME: home,
      ANTHROPIC_BASE_URL: tk.url,
      ANTHROPIC_API_KEY: API_KEY,
    },
    stderr: (text) => stderr.push(text),
    ...more,
  });
  const stderr = [];
  return { work, project, home, tk, options, stderr };
}

const text = (t) => ({ content: [{ type: "text", text: t }] });
const toolUse = (name, input) => ({ content: [{ type: "tool_use", name, input }] });

async function collect(q, out = []) {
  for await (const m of q) out.push(m);
  return out;
}

async function* prompts(...texts) {
  for (const t of texts) {
    yield { type: "user", message: { role: "user", content: t }, parent_tool_use_id: null };
  }
}

const resultOf = (messages) => messages.find((m) => m.type === "result");

const cases = {
  async a_prompt_runs_and_the_result_and_init_are_what_the_program_reads() {
    const c = await scratch([text("Hello from gyre.")]);
    try {
      const messages = await collect(query({ prompt: "Say hello", options: c.options() }));
      const init = messages.find((m) => m.type === "system" && m.subtype === "init");
      expect(init, "an init message");
      expect(init.tools.includes("Bash") && init.tools.includes("Agent"), `tools ${init.tools}`);
      const result = resultOf(messages);
      expect(result && result.subtype === "success", `result ${JSON.stringify(result)}`);
      expect(result.result === "Hello from gyre.", `result text ${result.result}`);
      expect(typeof result.total_cost_usd === "number", "total_cost_usd");
      const [sent] = await c.tk.requests();
      expect(sent.messages[0].content[0].text === "Say hello", "the prompt reached the API");
    } finally {
      c.tk.close();
    }
  },

  async the_main_agent_effort_and_task_budget_shape_every_request() {
    const c = await scratch([text("ok")]);
    try {
      const agents = {
        terse: {
          description: "Answers in one word",
          prompt: "You answer in one word.",
          tools: ["Read", "Grep"],
          model: "haiku",
        },
      };
      const messages = await collect(
        query({
          prompt: "hi",
          options: c.options({ agent: "terse", agents, effort: "low", taskBudget: { total: 50000 } }),
        }),
      );
      expect(resultOf(messages)?.result === "ok", `result ${JSON.stringify(resultOf(messages))}`);
      const [sent] = await c.tk.requests();
      const system = JSON.stringify(sent.system ?? "");
      expect(system.includes("You answer in one word."), `system ${system}`);
      expect(sent.model === "claude-haiku-4-5", `model ${sent.model}`);
      const names = sent.tools.map((t) => t.name);
      expect(names.includes("Grep") && !names.includes("Bash"), `tools ${names}`);
      const config = JSON.stringify(sent.output_config);
      expect(sent.output_config?.effort === "low", `output_config ${config}`);
      expect(sent.output_config?.task_budget?.total === 50000, `output_config ${config}`);
      expect(!c.stderr.join("").includes("ignored"), `stderr ${c.stderr.join("")}`);
    } finally {
      c.tk.close();
    }
  },

  async system_prompt_and_append_travel_in_initialize_and_reach_the_api() {
    const c = await scratch([text("ok")]);
    try {
      const messages = await collect(
        query({
          prompt: "hi",
          options: c.options({ systemPrompt: "You are a terse bot." }),
        }),
      );
      expect(resultOf(messages).result === "ok", "result");
      const [sent] = await c.tk.requests();
      const system = JSON.stringify(sent.system ?? "");
      expect(system.includes("You are a terse bot."), `system ${system}`);
      const append = await scratch([text("ok")]);
      try {
        await collect(
          query({
            prompt: "hi",
            options: append.options({
              systemPrompt: { type: "preset", preset: "claude_code", append: "Always rhyme." },
            }),
          }),
        );
        const [appended] = await append.tk.requests();
        const text = JSON.stringify(appended.system);
        expect(text.includes("Always rhyme."), `appended system ${text.slice(0, 200)}`);
      } finally {
        append.tk.close();
      }
    } finally {
      c.tk.close();
    }
  },

  async can_use_tool_allows_with_changed_input_and_denies_with_a_message() {
    const c = await scratch([
      toolUse("Bash", { command: "echo one" }),
      toolUse("Bash", { command: "echo two" }),
      text("done"),
    ]);
    try {
      const asked = [];
      const canUseTool = async (name, input, { suggestions }) => {
        asked.push([name, input.command, suggestions?.[0]?.type]);
        if (input.command === "echo one") {
          return { behavior: "allow", updatedInput: { command: "echo changed" } };
        }
        return { behavior: "deny", message: "not two" };
      };
      const messages = await collect(
        query({ prompt: prompts("run both"), options: c.options({ canUseTool }) }),
      );
      expect(asked.length === 2, `asked ${JSON.stringify(asked)}`);
      expect(asked[0][0] === "Bash" && asked[0][2] === "addRules", `suggestion ${asked[0]}`);
      const results = messages
        .filter((m) => m.type === "user")
        .flatMap((m) => (Array.isArray(m.message.content) ? m.message.content : []))
        .filter((b) => b.type === "tool_result");
      const texts = results.map((b) => JSON.stringify(b.content));
      expect(texts[0].includes("changed"), `the changed input ran: ${texts[0]}`);
      expect(texts[1].includes("not two"), `the denial reached the model: ${texts[1]}`);
      const states = messages.filter((m) => m.subtype === "session_state_changed").map((m) => m.state);
      expect(states.includes("requires_action") && states.at(-1) === "idle", `states ${states}`);
    } finally {
      c.tk.close();
    }
  },

  async hooks_run_as_callbacks_and_a_pre_tool_use_deny_stops_the_call() {
    const c = await scratch([toolUse("Bash", { command: "rm -rf x" }), text("stopped")]);
    try {
      const seen = [];
      const hooks = {
        PreToolUse: [
          {
            matcher: "Bash",
            hooks: [
              async (input) => {
                seen.push(input.hook_event_name, input.tool_input.command);
                return {
                  hookSpecificOutput: {
                    hookEventName: "PreToolUse",
                    permissionDecision: "deny",
                    permissionDecisionReason: "no rm here",
                  },
                };
              },
            ],
          },
        ],
      };
      const messages = await collect(
        query({
          prompt: "clean",
          options: c.options({ hooks, permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true }),
        }),
      );
      expect(seen[0] === "PreToolUse" && seen[1] === "rm -rf x", `hook input ${seen}`);
      const sent = await c.tk.requests();
      expect(JSON.stringify(sent[1].messages).includes("no rm here"), "the hook's reason reached the model");
      expect(resultOf(messages).result === "stopped", "result");
    } finally {
      c.tk.close();
    }
  },

  async an_sdk_mcp_server_is_built_from_its_tools_and_called() {
    const c = await scratch([toolUse("mcp__calc__add", { a: 2, b: 3 }), text("It is 5.")]);
    try {
      const add = tool("add", "Adds two numbers.", { a: z.number(), b: z.number() }, async ({ a, b }) => ({
        content: [{ type: "text", text: `sum = ${a + b}` }],
      }));
      const calc = createSdkMcpServer({ name: "calc", version: "1.0.0", tools: [add] });
      const messages = await collect(
        query({
          prompt: "add 2 and 3",
          options: c.options({ mcpServers: { calc }, allowedTools: ["mcp__calc__add"] }),
        }),
      );
      const init = messages.find((m) => m.subtype === "init");
      expect(init.tools.includes("mcp__calc__add"), `tools ${init.tools}`);
      const sent = await c.tk.requests();
      expect(sent[0].tools.some((t) => t.name === "mcp__calc__add"), "the tool was offered");
      expect(JSON.stringify(sent[1].messages).includes("sum = 5"), "the tool ran in the program");
      expect(resultOf(messages).result === "It is 5.", "result");
    } finally {
      c.tk.close();
    }
  },

  async max_turns_ends_with_an_error_result_and_disallowed_tools_are_not_offered() {
    const c = await scratch([toolUse("Read", { file_path: "a.txt" }), text("never")]);
    try {
      writeFileSync(join(c.project, "a.txt"), "alpha\n");
      // The SDK hands the program the error result, then throws, as with Claude Code.
      const messages = [];
      const thrown = await collect(
        query({
          prompt: "read it",
          options: c.options({ maxTurns: 1, allowedTools: ["Read"], disallowedTools: ["WebFetch"] }),
        }),
        messages,
      ).then(
        () => null,
        (e) => String(e),
      );
      const result = resultOf(messages);
      expect(result && result.subtype === "error_max_turns", `result ${JSON.stringify(messages.at(-1))}`);
      expect(thrown?.includes("maximum number of turns (1)"), `thrown ${thrown}`);
      const [sent] = await c.tk.requests();
      expect(!sent.tools.some((t) => t.name === "WebFetch"), "WebFetch was not offered");
    } finally {
      c.tk.close();
    }
  },

  async the_program_switches_mode_and_model_between_turns_with_control_requests() {
    const c = await scratch([text("first"), text("second")]);
    try {
      let q;
      async function* turns() {
        yield { type: "user", message: { role: "user", content: "one" }, parent_tool_use_id: null };
        await waitFor(() => seenResults >= 1);
        await q.setPermissionMode("acceptEdits");
        await q.setModel("claude-haiku-4-5");
        yield { type: "user", message: { role: "user", content: "two" }, parent_tool_use_id: null };
      }
      let seenResults = 0;
      q = query({ prompt: turns(), options: c.options() });
      const messages = [];
      for await (const m of q) {
        messages.push(m);
        if (m.type === "result") seenResults += 1;
        if (seenResults === 2) break;
      }
      const sent = await c.tk.requests();
      expect(sent[1].model === "claude-haiku-4-5", `second request model ${sent[1].model}`);
      expect(seenResults === 2, "two results");
    } finally {
      c.tk.close();
    }
  },

  async plan_mode_instructions_replace_the_workflow_of_the_plan_reminder() {
    const c = await scratch([text("Here is the plan.")]);
    try {
      await collect(
        query({
          prompt: "plan the change",
          options: c.options({
            permissionMode: "plan",
            planModeInstructions: "List only the files you would touch, nothing else.",
          }),
        }),
      );
      const [sent] = await c.tk.requests();
      const first = JSON.stringify(sent.messages[0].content);
      expect(first.includes("plan the change"), `prompt ${first}`);
      expect(first.includes("Plan mode is active"), `reminder ${first}`);
      expect(first.includes("List only the files you would touch"), `workflow ${first}`);
      expect(first.includes("ExitPlanMode"), `footer ${first}`);
      expect(!first.includes("How to plan:"), `gyre's own workflow left out: ${first}`);
    } finally {
      c.tk.close();
    }
  },

  async append_subagent_system_prompt_reaches_every_sub_agent_and_only_them() {
    const c = await scratch([
      toolUse("Agent", { description: "look", prompt: "Look around.", subagent_type: "general-purpose" }),
      text("Nothing to see."),
      text("all done"),
    ]);
    try {
      const messages = await collect(
        query({
          prompt: "delegate",
          options: c.options({ appendSubagentSystemPrompt: "Answer the caller in French.", allowedTools: ["Agent"] }),
        }),
      );
      expect(resultOf(messages)?.result === "all done", `result ${JSON.stringify(resultOf(messages))}`);
      const sent = await c.tk.requests();
      const main = JSON.stringify(sent[0].system ?? "");
      const sub = JSON.stringify(sent[1].system ?? "");
      expect(sub.includes("Answer the caller in French."), `sub-agent system ${sub}`);
      expect(!main.includes("Answer the caller in French."), `main system ${main.slice(0, 300)}`);
    } finally {
      c.tk.close();
    }
  },

  async exclude_dynamic_sections_keeps_the_system_prompt_the_same_across_sessions() {
    const runs = [];
    for (const name of ["one", "two"]) {
      const c = await scratch([text("ok")]);
      try {
        await collect(
          query({
            prompt: `hi ${name}`,
            options: c.options({
              systemPrompt: { type: "preset", preset: "claude_code", excludeDynamicSections: true },
            }),
          }),
        );
        const [sent] = await c.tk.requests();
        runs.push({ project: c.project, sent });
      } finally {
        c.tk.close();
      }
    }
    const [a, b] = runs.map((r) => JSON.stringify(r.sent.system));
    expect(a === b, `the system prompts differ:\n${a}\n${b}`);
    expect(!a.includes(runs[0].project), `the working directory stayed in the system prompt: ${a}`);
    const first = JSON.stringify(runs[0].sent.messages[0].content);
    expect(first.includes(`Working directory: ${runs[0].project}`), `first message ${first}`);
    expect(first.includes("hi one"), `first message ${first}`);
  },

  async skills_select_the_skills_the_skill_tool_offers() {
    const c = await scratch([toolUse("Skill", { skill: "docx" }), text("done")]);
    try {
      for (const name of ["pdf", "docx"]) {
        const dir = join(c.home, ".claude", "skills", name);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, "SKILL.md"), `---\nname: ${name}\ndescription: Work with ${name} files\n---\nUse the ${name} tools.\n`);
      }
      await collect(query({ prompt: "convert it", options: c.options({ skills: ["pdf"] }) }));
      const sent = await c.tk.requests();
      const skill = sent[0].tools.find((t) => t.name === "Skill");
      expect(skill, `tools ${sent[0].tools.map((t) => t.name)}`);
      expect(skill.description.includes("pdf: Work with pdf files"), `description ${skill.description}`);
      expect(!skill.description.includes("docx"), `description ${skill.description}`);
      const refused = JSON.stringify(sent[1].messages.at(-1));
      expect(refused.includes("Unknown skill: docx"), `result ${refused}`);
    } finally {
      c.tk.close();
    }
  },

  async tool_aliases_run_the_mapped_tool_for_a_call_by_the_alias() {
    const c = await scratch([toolUse("Bash", { command: "echo hi" }), text("done")]);
    try {
      const bash = tool("bash", "Runs a command in the workspace.", { command: z.string() }, async ({ command }) => ({
        content: [{ type: "text", text: `workspace ran: ${command}` }],
      }));
      const ws = createSdkMcpServer({ name: "ws", version: "1.0.0", tools: [bash] });
      await collect(
        query({
          prompt: "run it",
          options: c.options({
            mcpServers: { ws },
            allowedTools: ["mcp__ws__bash"],
            toolAliases: { Bash: "mcp__ws__bash" },
          }),
        }),
      );
      const sent = await c.tk.requests();
      const result = JSON.stringify(sent[1].messages.at(-1));
      expect(result.includes("workspace ran: echo hi"), `result ${result}`);
    } finally {
      c.tk.close();
    }
  },

  async code_running_mcp_tools_go_to_auto_modes_judge_despite_an_allow_rule() {
    const verdict = (decision, reason) => text(JSON.stringify({ decision, reason }));
    const c = await scratch([
      toolUse("mcp__ws__run", { code: "rm -rf /" }),
      verdict("deny", "deletes everything"),
      text("refused"),
    ]);
    try {
      let ran = false;
      const run = tool("run", "Runs Python code.", { code: z.string() }, async () => {
        ran = true;
        return { content: [{ type: "text", text: "ran" }] };
      });
      const ws = createSdkMcpServer({ name: "ws", version: "1.0.0", tools: [run] });
      await collect(
        query({
          prompt: "clean up",
          options: c.options({
            mcpServers: { ws },
            allowedTools: ["mcp__ws__run"],
            permissionMode: "auto",
            codeRunningMcpTools: { ws: ["run"] },
          }),
        }),
      );
      expect(!ran, "the judge's refusal stopped the call");
      const sent = await c.tk.requests();
      expect(JSON.stringify(sent[1].messages).includes("rm -rf /"), `judge request ${JSON.stringify(sent[1])}`);
      const refusal = JSON.stringify(sent[2].messages.at(-1));
      expect(refusal.includes("deletes everything"), `refusal ${refusal}`);
    } finally {
      c.tk.close();
    }
  },

  async permission_prompts_none_denies_what_would_be_asked_without_calling_can_use_tool() {
    const c = await scratch([toolUse("Bash", { command: "touch made" }), text("done")]);
    try {
      const asked = [];
      const canUseTool = async (name) => {
        asked.push(name);
        return { behavior: "allow", updatedInput: {} };
      };
      await collect(
        query({ prompt: prompts("make it"), options: c.options({ canUseTool, permissionPrompts: "none" }) }),
      );
      expect(asked.length === 0, `canUseTool was called for ${asked}`);
      expect(!existsSync(join(c.project, "made")), "the command ran");
      const sent = await c.tk.requests();
      const result = sent[1].messages.at(-1).content[0];
      expect(result.is_error === true, `result ${JSON.stringify(result)}`);
    } finally {
      c.tk.close();
    }
  },

  async plugins_add_their_commands_by_flag_or_in_initialize() {
    for (const pluginDelivery of ["argv", "initialize"]) {
      const c = await scratch([text("ok")]);
      try {
        const dir = join(c.work, "plugin");
        mkdirSync(join(dir, "commands"), { recursive: true });
        writeFileSync(join(dir, "commands", "greet.md"), "---\ndescription: Greets\n---\nGreet $ARGUMENTS warmly.\n");
        await collect(
          query({
            prompt: "/greet Ann",
            options: c.options({ plugins: [{ type: "local", path: dir }], pluginDelivery }),
          }),
        );
        const [sent] = await c.tk.requests();
        const first = JSON.stringify(sent.messages[0].content);
        expect(first.includes("Greet Ann warmly."), `${pluginDelivery}: first message ${first}`);
      } finally {
        c.tk.close();
      }
    }
  },

  async a_session_store_gets_the_transcript_and_resumes_from_it() {
    const c = await scratch([text("first answer"), text("second answer")]);
    try {
      const stored = new Map();
      const sessionStore = {
        append: async (key, entries) => {
          const id = `${key.projectKey}/${key.sessionId}/${key.subpath ?? ""}`;
          stored.set(id, [...(stored.get(id) ?? []), ...entries]);
        },
        load: async (key) => stored.get(`${key.projectKey}/${key.sessionId}/${key.subpath ?? ""}`) ?? null,
      };
      const env = (home) => ({ ...c.options().env, GYRE_HOME: home, CLAUDE_CONFIG_DIR: join(c.home, ".claude") });
      const first = await collect(
        query({ prompt: "remember 42", options: c.options({ sessionStore, env: env(c.home) }) }),
      );
      const session = resultOf(first).session_id;
      const entries = [...stored.entries()].filter(([k]) => k.includes(session)).flatMap(([, e]) => e);
      expect(entries.some((e) => e.type === "assistant"), `stored ${JSON.stringify([...stored.keys()])}`);
      expect(JSON.stringify(entries).includes("remember 42"), `stored ${JSON.stringify(entries).slice(0, 400)}`);
      // A gyre with another home resumes the session from the store's copy.
      const other = join(c.work, "other-home");
      mkdirSync(other);
      const second = await collect(
        query({ prompt: "what was it?", options: c.options({ sessionStore, resume: session, env: env(other) }) }),
      );
      expect(resultOf(second)?.result === "second answer", `result ${JSON.stringify(resultOf(second))}`);
      const sent = await c.tk.requests();
      expect(JSON.stringify(sent[1].messages).includes("remember 42"), `resumed ${JSON.stringify(sent[1].messages)}`);
    } finally {
      c.tk.close();
    }
  },

  async with_code_running_tools_declared_a_permission_request_hook_cannot_change_the_mode() {
    const verdict = (decision, reason) => text(JSON.stringify({ decision, reason }));
    const c = await scratch([
      toolUse("mcp__ws__run", { code: "print(1)" }),
      text("I cannot tell."),
      toolUse("Write", { file_path: "out.txt", content: "x" }),
      verdict("deny", "no writes today"),
      text("done"),
    ]);
    try {
      let ran = false;
      const run = tool("run", "Runs Python code.", { code: z.string() }, async () => {
        ran = true;
        return { content: [{ type: "text", text: "1" }] };
      });
      const ws = createSdkMcpServer({ name: "ws", version: "1.0.0", tools: [run] });
      const hooks = {
        PermissionRequest: [
          {
            hooks: [
              async () => ({
                hookSpecificOutput: {
                  hookEventName: "PermissionRequest",
                  decision: {
                    behavior: "allow",
                    updatedPermissions: [{ type: "setMode", mode: "acceptEdits", destination: "session" }],
                  },
                },
              }),
            ],
          },
        ],
      };
      const messages = await collect(
        query({
          prompt: "go",
          options: c.options({ mcpServers: { ws }, hooks, permissionMode: "auto", codeRunningMcpTools: { ws: ["run"] } }),
        }),
      );
      expect(ran, "the hook's allow ran the call");
      expect(resultOf(messages)?.result === "done", `result ${JSON.stringify(resultOf(messages))}`);
      expect(!existsSync(join(c.project, "out.txt")), "the write went to the judge, still in auto mode");
    } finally {
      c.tk.close();
    }
  },

  async system_prompt_snapshot_sends_the_recorded_prompt_again_on_resume() {
    const c = await scratch([text("one"), text("two"), text("three")]);
    try {
      const prompt = (p, snapshot) => ({ type: "custom", prompt: p, snapshot });
      const first = await collect(
        query({ prompt: "hi", options: c.options({ systemPrompt: prompt("You are bot A.", true) }) }),
      );
      const resume = resultOf(first).session_id;
      await collect(
        query({ prompt: "again", options: c.options({ resume, systemPrompt: prompt("You are bot B.", true) }) }),
      );
      await collect(
        query({ prompt: "more", options: c.options({ resume, systemPrompt: prompt("You are bot C.", false) }) }),
      );
      const sent = (await c.tk.requests()).map((r) => JSON.stringify(r.system ?? ""));
      expect(sent[1].includes("You are bot A.") && !sent[1].includes("bot B"), `resumed with ${sent[1]}`);
      expect(sent[2].includes("You are bot C."), `rendered fresh: ${sent[2]}`);
    } finally {
      c.tk.close();
    }
  },
};

function waitFor(cond) {
  return new Promise((resolve) => {
    const tick = () => (cond() ? resolve() : setTimeout(tick, 20));
    tick();
  });
}

let passed = 0;
let failed = 0;
for (const [name, run] of Object.entries(cases)) {
  if (args.only && !name.includes(args.only)) continue;
  try {
    await Promise.race([
      run(),
      new Promise((_, reject) => setTimeout(() => reject(new Error("timed out after 60 s")), 60000)),
    ]);
    console.log(`ok   ${name}`);
    passed += 1;
  } catch (e) {
    console.log(`FAIL ${name}`);
    console.error(`${name}: ${e.stack ?? e}`);
    failed += 1;
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
