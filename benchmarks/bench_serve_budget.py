"""The latency budget of ``iclr serve`` on a scripted Claude-Code-style session.

Run from the repository root::

    python benchmarks/bench_serve_budget.py                        # SmolLM2, tool time 2 s and 0 s, both late policies
    python benchmarks/bench_serve_budget.py --proxy-model fake:400 # a paced fake (no model; same shape of timing)
    python benchmarks/bench_serve_budget.py --second-session       # then a second session with the same P
    python benchmarks/bench_serve_budget.py --concurrent 4 --only-concurrent --pace provider --tool-s 0 \
        --late when-it-pays as-sent --busy 2                        # four at once, two CPU-bound processes beside
    python benchmarks/bench_serve_budget.py --repo /path/to/main   # the same session through another checkout's serve

The session: a scripted upstream on 127.0.0.1 speaking Anthropic Messages (streamed, plain
thinking blocks as a DeepSeek-style upstream returns them; ``--upstream-s`` per answer, half
of it before the first byte), and a client shaped like Claude Code (the Anthropic SDK, a
system prompt and tool definitions of about ``--p-tokens`` proxy tokens with a cache marker,
the marker on the last message moved every request, ``--steps`` tool steps whose results are
about 400 tokens, ``--tool-s`` seconds of tool time after each answer, then a final answer).

Each row runs that session straight to the upstream and through ``iclr serve`` (its own
process, the real proxy unless told otherwise, ``--max-wait`` and ``--late``), and reports the
wall time and its ratio to the direct run, the steps completed, compressed, sent late and
compressed later (``/stats``), the latency the proxy added and the part of it spent waiting
for scores (p50/p95), and what the upstream received priced by the prompt-cache rules of
:mod:`prompt_cache` (Anthropic: cache writes and reads; OpenAI: cached and uncached input;
both in input-token units) against the direct run's.

``--second-session`` runs another session with the same P through the same proxy once the
first one's scoring is done, and reports whether its first scored step ran a prefill of P (the
scorer's forward tokens during that session against the tokens of P). ``--concurrent N`` runs
N sessions at once straight to the upstream and through one proxy per ``--late`` policy, with
``--busy K`` CPU-bound processes beside it: steps compressed when first sent and later, late
steps by cause, prefix breaks (at most, per conversation) and the priced input against direct.

Wall times are wall clock on a shared machine: say the load with them (printed).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

import prompt_cache  # noqa: E402
from synthetic import PARAGRAPHS, _action, _fill  # noqa: E402

SENTENCES = [
    "Use the {tool} tool when the task needs it; never guess the contents of a file you have not read.",
    "Keep answers short: the user reads them in a terminal, so prefer a list of paths to a paragraph.",
    "Before editing {thing}, read it whole and check which tests cover it; run them after the change.",
    "If a command fails, read its error before trying again, and do not repeat the same command unchanged.",
    "Paths are relative to the working directory unless the user gives an absolute one.",
    "When the user asks for a commit, write a message that says why, not only what, in the imperative.",
]
TOOLS = ["Bash", "Read", "Edit", "Write", "Glob", "Grep", "Task", "TodoWrite", "WebFetch", "WebSearch", "NotebookEdit", "BashOutput", "KillShell", "ExitPlanMode", "SlashCommand", "MultiEdit"]


def _p(tokens: int, tokenizer) -> tuple[list[dict], list[dict]]:
    """(system blocks, tool definitions) of about ``tokens`` proxy tokens, deterministic."""
    rng = random.Random(7)
    things = ["the config loader", "a migration", "the CLI entry point", "a test fixture", "the cache layer"]

    def text(n_chars: int) -> str:
        out = []
        while sum(map(len, out)) < n_chars:
            out.append(rng.choice(SENTENCES).format(tool=rng.choice(TOOLS), thing=rng.choice(things)))
        return " ".join(out)

    scale = min(1.0, tokens / 20_000)  # 16 tools of about 7,600 tokens at 20K, fewer words for a smaller P
    tools = [{"name": name, "description": text(int(1200 * scale)), "input_schema": {"type": "object", "properties": {
        "command" if name == "Bash" else "path": {"type": "string", "description": text(int(300 * scale))},
        "timeout": {"type": "number", "description": text(int(200 * scale))}}, "required": ["command" if name == "Bash" else "path"]}}
        for name in TOOLS]
    system = [{"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks."}]
    body = ""
    while len(tokenizer.token_spans(json.dumps(system + [{"text": body}]) + json.dumps(tools))) < tokens:
        body += text(4000) + "\n\n"
    system.append({"type": "text", "text": body, "cache_control": {"type": "ephemeral"}})
    return system, tools


def _step(task: int, step: int) -> tuple[str, str, str]:
    """(reasoning, command, tool output) of step ``step`` of task ``task``."""
    rng = random.Random(task * 1000 + step)
    reasoning = "\n\n".join(_fill(rng, rng.choice(PARAGRAPHS)) for _ in range(rng.randint(3, 5)))
    call, output = _action(rng, step)
    output = "\n".join([output] * 6)  # coding tools answer with pages, not lines
    return reasoning, json.loads(call)["arguments"]["command"], output


# A provider's pace (public traces of real Claude Code and Codex steps, uw-syfi/TraceLab): time
# to the first token, output tokens a second, and the agent's tool time per step (median 0.3 s,
# p90 about 14 s: log-normal, capped so one session stays within minutes).
TTFT_S = (1.5, 3.0)
TOKENS_PER_S = 60.0
CHARS_PER_TOKEN = 4.0
TOOL_MEDIAN_S, TOOL_SIGMA, TOOL_CAP_S = 0.3, 3.0, 15.0


def tool_time(task: int, step: int, tool_s) -> float:
    """Seconds the agent's tool runs after step ``step``: ``tool_s`` itself, or for ``real`` a
    draw from the distribution above, the same for every run of the benchmark."""
    if tool_s != "real":
        return float(tool_s)
    rng = random.Random(task * 7919 + step)
    return min(TOOL_CAP_S, TOOL_MEDIAN_S * pow(2.718281828, rng.gauss(0.0, TOOL_SIGMA)))


class _Upstream(http.server.BaseHTTPRequestHandler):
    """Anthropic Messages, streamed; the answer depends only on the request (see module docstring).
    ``pace``: ``instant`` (``seconds`` per answer, half before the first byte) or ``provider``
    (a time to first token drawn from ``TTFT_S``, then each event after the time its text takes
    at ``TOKENS_PER_S``)."""

    protocol_version = "HTTP/1.1"
    bodies: list[dict] = []
    lock = threading.Lock()
    steps = 10
    seconds = 1.0
    pace = "instant"

    def setup(self) -> None:
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        from wire_fixtures import anthropic_events, anthropic_message, text, thinking, tool_use

        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        with self.lock:
            self.bodies.append(body)
        task = int(body["messages"][0]["content"][0]["text"].split()[-1])
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        if turn < self.steps:
            reasoning, command, _ = _step(task, turn)
            blocks = [thinking(reasoning), tool_use(f"toolu_{task}_{turn}", "Bash", {"command": command})]
        else:
            blocks = [text("The bug is fixed and the tests pass.")]
        provider = self.pace == "provider"
        message = anthropic_message(blocks, message_id=f"msg_{task}_{turn}")
        # a provider streams a few tokens an event
        events = anthropic_events(message, pieces=max(2, int(sum(len(json.dumps(b)) for b in blocks) / 12)) if provider else 2)
        ttft = random.Random(task * 31 + turn).uniform(*TTFT_S) if provider else self.seconds / 2
        time.sleep(ttft)  # time to first byte
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            data = json.dumps(event)
            self.wfile.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
            self.wfile.flush()
            if provider:
                delta = event.get("delta") or {}
                chars = sum(len(v) for k, v in delta.items() if k in ("thinking", "text", "partial_json") and isinstance(v, str))
                time.sleep(chars / CHARS_PER_TOKEN / TOKENS_PER_S)
            else:
                time.sleep(self.seconds / 2 / len(events))


def _start_upstream(steps: int, seconds: float, pace: str = "instant"):
    handler = type("Upstream", (_Upstream,), {"bodies": [], "steps": steps, "seconds": seconds, "pace": pace})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, handler, f"http://127.0.0.1:{httpd.server_address[1]}"


def session(base: str, task: int, system: list[dict], tools: list[dict], tool_s) -> float:
    """One Claude-Code-style session against ``base``; its wall time in seconds."""
    import anthropic

    sdk = anthropic.Anthropic(base_url=base, api_key="sk-ant-bench", max_retries=0, timeout=900)
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": f"Fix the failing test in task {task}"}]}]
    start = time.monotonic()
    while True:
        sent = [dict(m) for m in messages]
        last = sent[-1]
        last["content"] = [*last["content"][:-1], {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]
        with sdk.messages.stream(model="claude-bench", max_tokens=4096, system=system, tools=tools, messages=sent,
                                 thinking={"type": "enabled", "budget_tokens": 2048}) as stream:
            reply = stream.get_final_message()
        blocks = [b.model_dump(exclude_none=True) for b in reply.content]
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if not calls:
            return time.monotonic() - start
        turn = sum(m["role"] == "assistant" for m in messages)
        time.sleep(tool_time(task, turn, tool_s))  # the agent runs its tool
        _, _, output = _step(task, turn)
        messages += [{"role": "assistant", "content": blocks},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0]["id"], "content": output}]}]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(proc: subprocess.Popen, url: str, what: str, log, timeout_s: float = 600) -> None:
    """Until ``url`` answers 200; raises SystemExit with the tail of ``log`` (a path, or a
    callable giving the text) when ``proc`` exits first or ``timeout_s`` passes."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            text = log() if callable(log) else Path(log).read_text(errors="replace")
            raise SystemExit(f"{what} did not start:\n{text[-3000:]}")
        time.sleep(0.3)


def _proxy(upstream: str, args, late: str):
    import httpx

    port = _free_port()
    tree = args.repo or REPO
    budget = ["--max-wait", str(args.max_wait), "--late", late] if late != "before" else []  # another checkout's serve, as it is
    cmd = [sys.executable, "-m", "iclr_cli", "serve", "--upstream", upstream + "/v1", "--port", str(port), "--proxy-model", args.proxy_model,
           *budget, *(["--log-level", "debug"] if args.serve_log else ["--quiet"]), *args.serve_arg]
    env = {**os.environ, "PYTHONPATH": str(tree), **dict(kv.split("=", 1) for kv in args.env)}
    if args.cold_p:  # the first session on a machine: no P state kept from earlier runs
        env["ICLR_PROMPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="iclr-bench-p-")
    # the debug log goes to a file: a pipe nobody reads while the row runs would fill and stall serve
    log = open(args.serve_log, "a") if args.serve_log else subprocess.PIPE
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stderr=log, text=True)
    deadline = time.monotonic() + 600
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return proc, f"http://127.0.0.1:{port}"
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                why = Path(args.serve_log).read_text()[-4000:] if args.serve_log else proc.stderr.read()
                raise SystemExit(f"iclr serve did not start: {' '.join(cmd)}\n{why}")
            time.sleep(0.5)


def _stats(base: str) -> dict:
    import httpx

    return httpx.get(base + "/stats", timeout=60).json()


def _idle(base: str, limit: float) -> None:
    """Wait until the proxy's scorer has nothing queued or running (or ``limit`` seconds)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        queue = _stats(base)["scorer_queue"]
        if not queue or (queue["depth"] == 0 and queue["running_s"] is None):
            return
        time.sleep(1)


def _by_task(bodies: list[dict]) -> list[list[dict]]:
    out: dict[str, list[dict]] = {}
    for body in bodies:
        out.setdefault(body["messages"][0]["content"][0]["text"], []).append(body)
    return list(out.values())


def run_row(args, tool_s: float, late: str | None, tokenizer, p) -> dict:
    """One session direct (``late`` None) or through a fresh proxy."""
    system, tools = p
    httpd, handler, upstream = _start_upstream(args.steps, args.upstream_s, args.pace)
    proc = None
    try:
        base = upstream
        if late is not None:
            proc, base = _proxy(upstream, args, late)
        wall = session(base, 1, system, tools, tool_s)
        row = {"pace": args.pace, "tool_s": tool_s, "late": late or "direct", "wall_s": round(wall, 1)}
        if late is None and args.second_session:  # the second session's task straight to the upstream too
            row["second_wall_s"] = round(session(base, 2, system, tools, tool_s), 1)
        cost = prompt_cache.account(_by_task(handler.bodies), tokenizer)
        row.update(cost.to_record())
        if proc is not None:
            stats = _stats(base)
            total = stats["total"]
            row.update({k: total.get(k) for k in ("steps_completed", "steps_compressed", "steps_late", "steps_late_compressed",
                                                  "reasoning_tokens_generated", "reasoning_tokens_removed")})
            row["eager"] = stats.get("eager_scoring")
            row["scorer"] = stats.get("scorer_profile")
            row["added_ms"] = total["added_latency_ms"]
            row["scoring_wait_ms"] = total.get("scoring_wait_ms")
            if args.second_session and late == args.second_late and args.repo is None:
                row["second_session"] = second(args, base, handler, tokenizer, p, tool_s)
        return row
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(60)
        httpd.shutdown()


def second(args, base: str, handler, tokenizer, p, tool_s: float) -> dict:
    """A second session with the same P through the same proxy, once the first one's scoring
    is done: did its first scored step run a prefill of P?"""
    system, tools = p
    started = time.monotonic()
    _idle(base, args.settle_s)
    settled = time.monotonic() - started
    before = _stats(base)
    n_before = len(handler.bodies)
    wall = session(base, 2, system, tools, tool_s)
    during = _stats(base)
    _idle(base, args.settle_s)  # forward tokens are counted when a batch ends: let its scoring finish
    after = _stats(base)
    from iclr_cli.scoring.factory import load_tokenizer

    # in the proxy's own tokens, as its forward tokens are counted
    p_tokens = len(load_tokenizer(args.proxy_model).token_spans(prompt_cache.linear({"system": system, "tools": tools})))
    conv = [c for cid, c in during["conversations"].items() if cid not in before["conversations"]]
    forward = None
    if after.get("scorer_state") and before.get("scorer_state"):
        forward = after["scorer_state"]["forward_tokens"] - before["scorer_state"]["forward_tokens"]
    # A session whose scoring prefills P runs about all of P (the scorer's rendering of it
    # differs from this one by a few tokens); one that reuses P runs its steps only, well under
    # P here (12 steps of about 750 SmolLM2 tokens against 20K).
    return {"first_settled_s": round(settled, 1), "wall_s": round(wall, 1), "p_tokens": p_tokens, "forward_tokens": forward,
            "prefilled_p": None if forward is None else forward >= 0.9 * p_tokens,
            "steps_compressed": conv[0]["steps_compressed"] if conv else None, "steps_late": conv[0]["steps_late"] if conv else None,
            "steps_late_compressed": conv[0]["steps_late_compressed"] if conv else None, "requests": len(handler.bodies) - n_before}


def _busy(n: int) -> list[subprocess.Popen]:
    """``n`` CPU-bound processes beside the proxy (an agent's build, a test suite), each a
    busy loop that ends by itself after an hour at most."""
    loop = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: sum(i * i for i in range(10000))"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def _sessions(base: str, n: int, p, tool_s) -> list[float]:
    system, tools = p
    walls: list[float] = []
    threads = [threading.Thread(target=lambda k=k: walls.append(session(base, 10 + k, system, tools, tool_s))) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(round(w, 1) for w in walls)


def concurrent(args, tool_s: float, lates: list[str], p, n: int, tokenizer) -> list[dict]:
    """``n`` sessions at once straight to the upstream, then through one fresh proxy per late
    policy (``--busy`` CPU-bound processes beside it, for both): steps compressed when first
    sent and later, late steps by cause, prefix breaks, the slowest session's wall against the
    direct run's, and the input priced by the prompt-cache rules."""
    rows = []
    busy = _busy(args.busy)
    try:
        for late in (None, *lates):
            httpd, handler, upstream = _start_upstream(args.steps, args.upstream_s, args.pace)
            proc, base = (None, upstream) if late is None else _proxy(upstream, args, late)
            try:
                walls = _sessions(base, n, p, tool_s)
                row = {"sessions": n, "tool_s": tool_s, "busy": args.busy, "late": late or "direct", "walls_s": walls}
                row.update(prompt_cache.account(_by_task(handler.bodies), tokenizer).to_record())
                if proc is not None:
                    stats = _stats(base)
                    total = stats["total"]
                    row.update({k: total.get(k) for k in ("steps_completed", "steps_compressed", "steps_late", "steps_late_compressed",
                                                          "steps_late_by_cause", "prefix_breaks", "prefix_breaks_by_cause")})
                    row["compressed_when_sent"] = total["steps_compressed"] - total["steps_late_compressed"]
                    row["breaks_per_conversation"] = max((c.get("prefix_breaks", 0) for c in stats["conversations"].values()), default=0)
                    row["scoring_wait_ms"] = total.get("scoring_wait_ms")
                    row["scorer"] = stats.get("scorer_profile")
                    row["forward_tokens"] = (stats.get("scorer_state") or {}).get("forward_tokens")
                    row["scorer_work"] = (stats.get("scorer_queue") or {}).get("work")
                    row["eager"] = stats.get("eager_scoring")
                else:
                    direct = row
                if late is not None:
                    row["wall_ratio"] = round(max(walls) / max(direct["walls_s"]), 3)
                    row["anthropic_vs_direct"] = round(row["anthropic_units"] / direct["anthropic_units"], 4)
                    row["openai_vs_direct"] = round(row["openai_units"] / direct["openai_units"], 4)
                rows.append(row)
            finally:
                if proc is not None:
                    proc.terminate()
                    proc.wait(60)
                httpd.shutdown()
    finally:
        for b in busy:
            b.kill()
    return rows


def _cpu() -> str:
    """The CPU model and the flags that decide the native precision (BENCHMARKS.md names them)."""
    from iclr_cli.scoring.precision import cpu_flags

    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "unknown")
    return f"{model}; " + " ".join(sorted((cpu_flags() or frozenset()) & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-model", default="smollm2")
    parser.add_argument("--p-tokens", type=int, default=20_000, help="proxy tokens of system prompt + tool definitions")
    parser.add_argument("--steps", type=int, default=12, help="tool steps before the final answer")
    parser.add_argument("--tool-s", type=lambda v: v if v == "real" else float(v), nargs="+", default=[2.0, 0.0],
                        help="seconds of tool time after each answer, or 'real' (drawn: median 0.3 s, p90 ~14 s, capped at 15 s)")
    parser.add_argument("--pace", choices=("instant", "provider"), default="instant",
                        help="instant: --upstream-s per answer; provider: 1.5-3 s to the first token, then 60 tokens/s")
    parser.add_argument("--env", action="append", default=[], metavar="K=V", help="an environment variable of the serve process (repeat)")
    parser.add_argument("--cold-p", action="store_true", help="a fresh P cache folder for each proxy (the first session on a machine)")
    parser.add_argument("--upstream-s", type=float, default=1.0, help="seconds per upstream answer (half before the first byte)")
    parser.add_argument("--max-wait", type=float, default=0.5)
    parser.add_argument("--late", nargs="+", default=["when-it-pays", "as-sent", "compress-later"])
    parser.add_argument("--second-session", action="store_true")
    parser.add_argument("--second-late", default="compress-later")
    parser.add_argument("--settle-s", type=float, default=900, help="most seconds to wait for the first session's scoring before the second")
    parser.add_argument("--concurrent", type=int, default=0, help="N sessions at once through one proxy (rows per --late), after the single rows")
    parser.add_argument("--only-concurrent", action="store_true", help="skip the single-session rows")
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes running beside the proxy in the --concurrent rows")
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra iclr serve argument (repeat)")
    parser.add_argument("--serve-log", default=None,
                        help="append serve's debug log (a line a request and a scorer batch, timed) to this file")
    parser.add_argument("--repo", type=Path, default=None, help="run this checkout's iclr serve instead, with no budget options (rows 'before')")
    args = parser.parse_args()
    if args.repo is not None:
        args.late = ["before"]
    from iclr_cli.scoring.factory import load_tokenizer

    tokenizer = load_tokenizer("smollm2")
    p = _p(args.p_tokens, tokenizer)
    print(json.dumps({"load": os.getloadavg(), "p_tokens": len(tokenizer.token_spans(prompt_cache.linear({"system": p[0], "tools": p[1]}))),
                      "proxy_model": args.proxy_model, "max_wait": args.max_wait, "steps": args.steps, "upstream_s": args.upstream_s,
                      "pace": args.pace, "env": args.env, "cold_p": args.cold_p, "cpu": _cpu()}), flush=True)
    for tool_s in args.tool_s:
        if not args.only_concurrent:
            for late in (None, *args.late):
                print(json.dumps(run_row(args, tool_s, late, tokenizer, p)), flush=True)
        if args.concurrent:
            for row in concurrent(args, tool_s, args.late, p, args.concurrent, tokenizer):
                print(json.dumps(row), flush=True)
    print(json.dumps({"load_after": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    main()
