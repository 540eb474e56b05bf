// An agent loop on the Vercel AI SDK (ai 7, streamText with a tool and stopWhen), run by
// tests/test_serve_agents_goose_aisdk.py from the agent-CLI folder (its node_modules):
//   node aisdk_agent.mjs WIRE BASE_URL TOOL PROMPT
// WIRE: chat (@ai-sdk/openai-compatible, the provider OpenCode builds on), anthropic
// (@ai-sdk/anthropic with extended thinking) or responses (@ai-sdk/openai's Responses model,
// store: false with the encrypted reasoning included, as OpenAI documents for stateless use).
// TOOL: the one tool's name; it runs its `command` (or Codex's `cmd`) in a shell.
// Prints {"text", "steps"} on success; exits 1 with the error on a failed stream.
import { execSync } from "node:child_process";
import { jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";

const [wire, baseURL, name, prompt] = process.argv.slice(2);
const models = {
  chat: () => createOpenAICompatible({ name: "iclr", baseURL, apiKey: "sk-e2e" }).chatModel("deepseek-reasoner"),
  anthropic: () => createAnthropic({ baseURL, apiKey: "sk-e2e" })("claude-sonnet-4-5"),
  responses: () => createOpenAI({ baseURL, apiKey: "sk-e2e" }).responses("gpt-test"),
};
const shell = tool({
  description: "Run a shell command",
  inputSchema: jsonSchema({ type: "object", properties: { command: { type: "string" }, cmd: { type: "string" } } }),
  execute: async (input) => execSync(input.command ?? input.cmd, { encoding: "utf8" }),
});
const result = streamText({
  model: models[wire](),
  tools: { [name]: shell },
  stopWhen: stepCountIs(10),
  prompt,
  providerOptions: {
    anthropic: { thinking: { type: "enabled", budgetTokens: 2048 } },
    openai: { store: false, include: ["reasoning.encrypted_content"] },
  },
});
for await (const part of result.fullStream) {
  if (part.type === "error") {
    console.error(part.error);
    process.exit(1);
  }
}
console.log(JSON.stringify({ text: await result.text, steps: (await result.steps).length }));
