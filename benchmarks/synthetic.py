"""Deterministic, realistic-looking agent trajectories for the scoring benchmark.

A coding agent hunting a bug: each step has 3-5 paragraphs of reasoning (hypotheses, plans,
second thoughts), one tool call (grep, sed, pytest, an edit) and its observation (matches,
code, test output). About 250 SmolLM2 tokens per step. Seeded: the same arguments always
give the same trajectory.
"""

from __future__ import annotations

import json
import random

from iclr_cli.trajectory import Part, Step, Trajectory

FILES = ["src/pkg/config.py", "src/pkg/loader.py", "src/pkg/paths.py", "src/pkg/cli.py", "src/pkg/cache.py"]
TESTS = ["tests/test_loader.py", "tests/test_paths.py", "tests/test_cli.py"]
FUNCS = ["load_config", "resolve_path", "read_header", "parse_entry", "build_index", "merge_defaults", "open_cache"]
EXCS = [("TypeError", "expected str, bytes or os.PathLike object, not NoneType"),
        ("KeyError", "'encoding'"), ("AssertionError", "assert 3 == 4"), ("FileNotFoundError", "[Errno 2] No such file")]
THINGS = ["path", "header", "mapping", "list of entries", "encoding name"]

PARAGRAPHS = [
    ("Looking at the traceback, the error is raised in `{func}` in {file} at line {line}. The call passes "
    "`{thing}` straight through without checking whether it is None, which would explain the {exc} we see."),
    ("Let me think about why {test} fails only on Windows. One possibility is that {file} builds the path with "
    "string concatenation instead of os.path.join, so the separator differs and the lookup misses."),
    ("Before changing anything I want to confirm the hypothesis. I will grep for every caller of `{func}` and "
    "check which of them can pass an empty {thing}."),
    ("The previous command showed {n} matches. Only {m} of them are in library code; the rest are tests. The one "
    "in {file} looks suspicious because it catches the exception and silently returns a default."),
    ("Hmm, wait. If I change the default here, `{func2}` will also change behaviour, and {test} relies on the old "
    "value. I need a narrower fix that only touches the code path used by the failing test."),
    ("Plan: first add a guard in `{func}` that raises a clear error, then add a regression test in {test}, and "
    "finally run the whole suite for the package to make sure nothing else depended on the old behaviour."),
    ("That did not work: the test still fails with `{exc}: {msg}`. So the bad value is not coming from `{func}` "
    "after all; it must be set earlier, probably in `{func2}` when the defaults are merged."),
    ("Reading the code again, `{func2}` copies the dictionary but not the nested {thing}, so two callers end up "
    "sharing one object. That is a plausible cause of the flaky ordering too."),
    ("I am fairly confident now. The minimal change is two lines in {file}; everything else can stay as it is. "
    "Let me make the edit and rerun only {test} first because the full run takes a while."),
]


def _fill(rng: random.Random, template: str) -> str:
    exc, msg = rng.choice(EXCS)
    n = rng.randint(3, 14)
    return template.format(
        func=rng.choice(FUNCS), func2=rng.choice(FUNCS), file=rng.choice(FILES), test=rng.choice(TESTS),
        line=rng.randint(12, 480), thing=rng.choice(THINGS), exc=exc, msg=msg, n=n, m=rng.randint(1, n),
    )


def _action(rng: random.Random, step: int) -> tuple[str, str]:
    file, func = rng.choice(FILES), rng.choice(FUNCS)
    kind = rng.choice(["grep", "sed", "pytest", "edit"])
    if kind == "grep":
        cmd = f'grep -rn "{func}" src/ tests/'
        lines = [f"{rng.choice(FILES + TESTS)}:{rng.randint(5, 400)}:    result = {func}({rng.choice(THINGS).split()[0]})"
                 for _ in range(rng.randint(3, 7))]
    elif kind == "sed":
        start = rng.randint(1, 300)
        cmd = f"sed -n {start},{start + 12}p {file}"
        lines = [f"def {func}(path, *, encoding=None):", '    """Read the file and return its entries."""',
                 "    if path is None:", "        return {}", "    with open(path, encoding=encoding or 'utf-8') as fh:",
                 "        header = fh.readline().strip()", f"        return {rng.choice(FUNCS)}(header, fh)"]
    elif kind == "pytest":
        test = rng.choice(TESTS)
        exc, msg = rng.choice(EXCS)
        cmd = f"python -m pytest {test} -x -q"
        lines = [f"F....{'.' * rng.randint(0, 6)}", f"_____ test_{func} _____", f"E   {exc}: {msg}",
                 f"{file}:{rng.randint(12, 480)}: {exc}", f"1 failed, {rng.randint(3, 40)} passed in 0.{rng.randint(10, 99)}s"]
    else:
        cmd = f"apply_patch {file}"
        lines = [f"Patched {file}: 2 lines changed (+{rng.randint(1, 4)} -{rng.randint(0, 2)})"]
    call = json.dumps({"name": "bash", "arguments": {"command": cmd}})
    return call, "\n".join(lines) + f"\n[exit code {0 if kind != 'pytest' else 1}, step {step}]"


def trajectory(n_steps: int, *, seed: int = 0, traj_id: str | None = None) -> Trajectory:
    """A synthetic coding-agent trajectory of ``n_steps`` steps (see module docstring)."""
    rng = random.Random(seed)
    prompt = (
        Part("prompt", "You are a careful software engineer. Use the bash tool to inspect and edit the repository. "
             "Think before every command and explain what you expect to see.", label="system"),
        Part("prompt", json.dumps({"name": "bash", "description": "Run a shell command in the repository root.",
                                   "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}),
             label="tools"),
        Part("prompt", "tests/test_loader.py::test_windows_paths fails with a TypeError since the last release. "
             "Find the cause and fix it without breaking the other tests.", label="user"),
    )
    steps = []
    for i in range(n_steps):
        k = rng.randint(3, 5)
        reasoning = "\n\n".join(_fill(rng, rng.choice(PARAGRAPHS)) for _ in range(k))
        call, observation = _action(rng, i)
        steps.append(Step(i, (
            Part("reasoning", reasoning, label="reasoning", ref=i),
            Part("action", call, label="tool_call:bash"),
            Part("observation", observation, label="tool_result"),
        )))
    return Trajectory(traj_id or f"synthetic-{n_steps}", prompt, tuple(steps))
