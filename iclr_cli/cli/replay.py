"""``iclr replay``: run a live agent on tasks with online compression, and account every token."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from iclr_cli.cli import options as opt
from iclr_cli.replay.provider import STYLES

ToolProtocol = opt.choices("ToolProtocol", ("native", "text"))
SendReasoning = opt.choices("SendReasoning", ("auto", *STYLES))


def replay(
    task: Annotated[Optional[list[str]], typer.Option("--task", "-t", metavar="NAME", help="Task name (repeatable); see --list-tasks.", show_default=False)] = None,
    suite: Annotated[Optional[str], typer.Option("--suite", help="'all' or a domain of the task source: code, office, security, web.")] = None,
    tasks_dir: Annotated[Optional[str], typer.Option("--tasks", help="Folder of your own tasks (see docs/TASKS.md) instead of the built-in suite.")] = None,
    list_tasks: Annotated[bool, typer.Option("--list-tasks", help="Print the available tasks (name, domain, description) and exit.")] = False,
    variant: Annotated[Optional[list[str]], typer.Option("--variant", "-v", metavar="VARIANT", help="none, iclr, iclr-ext, step-only, delete-all, random-R, sliding-window-K (repeatable). iclr-ext is this project's hypothesis from the paper's externalization finding, not the paper's method: BottomK as iclr, but a block whose derived state (identifiers, paths, numbers, quoted text, code it introduced) has not yet reached an action, a written file or a tool result is never removed.", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Agent model name sent to the API (e.g. deepseek-chat).")] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. https://api.deepseek.com or http://127.0.0.1:8080/v1.")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Environment variable holding the API key, e.g. DEEPSEEK_API_KEY (default: none; local servers need none).")] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Seeds per task and variant (0..N-1).")] = 1,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Agent turns per run before it stops unsubmitted.")] = 30,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Runs in parallel (threads).")] = 1,
    out: Annotated[Optional[str], typer.Option("--out", help="Output folder: results.jsonl, summary.json, runs/ (resumed when it exists).")] = None,
    proxy_model: Annotated[str, typer.Option("--proxy-model", help="Proxy scorer for iclr/step-only and the tokenizer counting reasoning: 'smollm2', 'fake', a folder, a .gguf, a HF id.")] = "smollm2",
    ratio: opt.Ratio = opt.DEFAULT_RATIO_VALUE,
    max_tokens: opt.MaxTokens = None,
    exact: opt.Exact = False,
    elide: opt.Elide = None,
    overflow: opt.Overflow = opt.WINDOW,
    dtype: opt.Dtype = opt.AUTO_DTYPE,
    device: opt.Device = None,
    block_split: opt.BlockSplit = opt.PARAGRAPH,
    tool_protocol: Annotated[ToolProtocol, typer.Option("--tool-protocol", help="'native' (OpenAI tools; text calls also accepted) or 'text' (no tools field, protocol in the prompt).")] = ToolProtocol("native"),
    send_reasoning: Annotated[SendReasoning, typer.Option("--send-reasoning", help="How reasoning goes back: auto (as the provider returned it), reasoning_content, reasoning, thinking, think, thought (text before a text tool call), omit.")] = SendReasoning("auto"),
    temperature: Annotated[Optional[float], typer.Option("--temperature", help="Sampling temperature (default: the provider's).")] = None,
    send_seed: Annotated[bool, typer.Option("--send-seed", help="Send the run's seed as the request 'seed' (OpenAI, vLLM, llama.cpp): variants of one seed sample alike until their histories differ.")] = False,
    max_output_tokens: Annotated[Optional[int], typer.Option("--max-output-tokens", min=1, help="max_tokens of each request (default: the provider's).")] = None,
    extra_body: Annotated[Optional[str], typer.Option("--extra-body", help='JSON object merged into every request body, e.g. \'{"thinking": {"type": "enabled"}}\'.')] = None,
    request_timeout: Annotated[float, typer.Option("--request-timeout", min=1, help="Seconds per HTTP attempt.")] = 300.0,
    max_retries: Annotated[int, typer.Option("--max-retries", min=0, help="Retries per request on 429, 5xx, timeouts and connection errors (exponential backoff).")] = 6,
    command_timeout: Annotated[float, typer.Option("--command-timeout", min=1, help="Seconds a bash tool call may run.")] = 30.0,
    output_cap: Annotated[int, typer.Option("--output-cap", min=200, help="Characters of tool output the agent sees (head and tail kept).")] = 10_000,
    retry_errors: Annotated[bool, typer.Option("--retry-errors", help="On resume, run again the cells whose record has status 'error'.")] = False,
    keep_workspaces: Annotated[bool, typer.Option("--keep-workspaces", help="Keep each run's temporary workspace (path recorded in results).")] = False,
    summary_only: Annotated[bool, typer.Option("--summary", help="Only print the summary of the results already in --out.")] = False,
    width: opt.Width = None,
    quiet: opt.Quiet = False,
) -> None:
    """Drive a live model through tasks; after every completed step the variant compresses that
    step's reasoning and the compressed history is what every later request sends.

    Writes --out/results.jsonl (one record per task, variant and seed), each trajectory in
    OpenAI chat JSON (readable by score, prune and diff), a per-request usage log, and a
    per-variant summary (reward, wins/ties/losses against none, tokens, deletion ratio,
    amplification). Units: input, output and cache read are API tokens (the provider's
    usage); deleted is reasoning tokens removed / generated in the proxy's tokenizer;
    amplification is the change in total API tokens against none per proxy token removed
    (mixed units). A failed run prints its reason; when every run failed the exit code is 1.
    Ctrl-C exits 130, saying how many finished runs are kept; the same command resumes
    (finished cells are skipped).
    """
    from pathlib import Path

    from iclr_cli.errors import UsageError
    from iclr_cli.render.output import Output
    from iclr_cli.replay.suite import BUILTIN_DIR, load_tasks, select_tasks

    output = Output(None, quiet=quiet, width=width)
    if list_tasks:
        pool = load_tasks(Path(tasks_dir) if tasks_dir else BUILTIN_DIR)
        width = max((len(t.name) for t in pool), default=0)
        output.write_bytes("".join(f"{t.name:<{width}}  {t.domain:<8}  {t.description}\n" for t in pool).encode())
        return
    if out is None:
        raise UsageError("--out DIR is required")
    if summary_only:
        _print_summary(output, Path(out))
        return
    missing = [name for name, value in (("--variant", variant), ("--model", model), ("--base-url", base_url)) if not value]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (or use --list-tasks / --summary)")
    if task and suite:
        raise UsageError("give --task or --suite, not both")
    from iclr_cli.replay.session import build_run

    tasks = select_tasks(task or [], suite, Path(tasks_dir) if tasks_dir else None)
    setup = build_run(
        output,
        tasks=tasks,
        variants=list(dict.fromkeys(variant or [])),
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        seeds=seeds,
        max_steps=max_steps,
        out=Path(out),
        proxy_model=proxy_model,
        scorer_options=dict(ratio=ratio, max_tokens=max_tokens, exact=exact, elide=elide, overflow=overflow.value, dtype=dtype.value, device=device, split=block_split.value),
        tool_protocol=tool_protocol.value,
        send_reasoning=send_reasoning.value,
        temperature=temperature,
        max_output_tokens=max_output_tokens,
        extra_body=extra_body,
        request_timeout=request_timeout,
        max_retries=max_retries,
        command_timeout=command_timeout,
        output_cap=output_cap,
        retry_errors=retry_errors,
        keep_workspaces=keep_workspaces,
        send_seed=send_seed,
    )
    setup.run(jobs)
    _print_summary(output, Path(out))
    failure = setup.all_failed()
    if failure:
        from iclr_cli.errors import IclrError

        raise IclrError(f"{failure} (records in {Path(out) / 'results.jsonl'})")


def _print_summary(output, out_dir) -> None:
    from iclr_cli.errors import InputError
    from iclr_cli.jsonio import write_output
    from iclr_cli.replay.runner import RESULTS, ResultsLog
    from iclr_cli.replay.summary import legend, summarize, table_rows, to_records

    import orjson

    path = out_dir / RESULTS
    if not path.is_file():
        raise InputError(str(path), "no such file (nothing has finished in this folder yet)")
    log = ResultsLog(path)
    log.close()
    rows = summarize(log.records)
    write_output(str(out_dir / "summary.json"), orjson.dumps(to_records(rows), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    columns, display = table_rows(rows)
    output.table(f"replay summary ({out_dir})", columns, display)
    output.info(legend(r.get("reasoning_tokenizer") for r in log.records))
