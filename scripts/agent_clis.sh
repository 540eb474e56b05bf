#!/usr/bin/env bash
# Claude Code and Codex through `iclr serve`, end to end (tests/test_serve_agents.py):
# installs @anthropic-ai/claude-code and @openai/codex from npm into a scratch folder
# (default ~/.cache/iclr/agent-clis, or $1), then runs each CLI for three tool-calling steps
# against a scripted upstream on 127.0.0.1 with the proxy in between (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-$HOME/.cache/iclr/agent-clis}
mkdir -p "$DIR"
if [ ! -x "$DIR/node_modules/.bin/claude" ] || [ ! -x "$DIR/node_modules/.bin/codex" ]; then
  npm install --prefix "$DIR" @anthropic-ai/claude-code @openai/codex
fi
"$DIR/node_modules/.bin/claude" --version
"$DIR/node_modules/.bin/codex" --version
ICLR_AGENT_CLIS="$DIR" "${PYTHON:-.venv/bin/python}" -m pytest tests/test_serve_agents.py -m server -v
