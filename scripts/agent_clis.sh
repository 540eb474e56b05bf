#!/usr/bin/env bash
# Claude Code, Codex, OpenCode, Kilo, Qwen Code, Goose and the AI SDK through `iclr serve`, end to end
# (tests/test_serve_agents.py, tests/test_serve_agents_opencode_qwen.py, tests/test_serve_agents_goose_aisdk.py): installs them from npm
# into a scratch folder (default ~/.cache/iclr/agent-clis, or $1), then runs each CLI for three
# tool-calling steps against a scripted upstream on 127.0.0.1 with the proxy in between (about
# two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-$HOME/.cache/iclr/agent-clis}
bash scripts/install_agent_clis.sh "$DIR"
"$DIR/node_modules/.bin/claude" --version
"$DIR/node_modules/.bin/codex" --version
"$DIR/node_modules/.bin/opencode" --version
"$DIR/node_modules/.bin/kilo" --version
"$DIR/node_modules/.bin/node" "$DIR/node_modules/.bin/qwen" --version
"$DIR/node_modules/.bin/goose-binary-linux-x64" --version
ICLR_AGENT_CLIS="$DIR" "${PYTHON:-.venv/bin/python}" -m pytest tests/test_serve_agents.py tests/test_serve_agents_opencode_qwen.py \
  tests/test_serve_agents_goose_aisdk.py -m server -v
