"""Boundary labels: did the later trajectory need the reasoning again? (paper section 3.3).

The paper's target records "whether the later trajectory contains rederivation, additional
reasoning, or explicit replanning". A label belongs to the boundary after step ``t`` (the
completed step whose reasoning the boundary compresses; ``step`` as in ``iclr score``) and is
1 (the reasoning was needed again) or 0. Boundaries after a step without reasoning, and after
the last step (nothing later to look at), get no label.

Sources:

- a file the user wrote (:func:`read_labels`): JSONL, ``{"trajectory", "step", "label"}``;
- the heuristic (:func:`heuristic_labels`), this project's documented rules, applied to the
  ``horizon`` steps after ``t`` (default 5). The label is 1 when any rule fires, and each
  label keeps the names of the rules that fired:

  1. ``rederivation``: a later reasoning block (a paragraph) re-derives step ``t``'s
     reasoning: at least ``min_shared`` (3) of its word 4-grams occur in step ``t``'s
     reasoning and they are at least ``overlap`` (25%) of its 4-grams;
  2. ``more_reasoning``: a later step's reasoning has at least ``grow`` (2) times the median
     word count of the reasoning steps up to ``t``, and at least ``min_words`` (50) words;
  3. ``replanning``: later reasoning says it changes course (:data:`REPLANNING`: "let me
     reconsider", "on second thought", "a different approach", "that didn't work", ...);
  4. ``repeated_action``: a later action repeats a command of step ``t`` or earlier, or reads
     a file read at or before ``t`` (``cat``/``head``/``tail``/``sed -n``/``open``/``view``, or
     a tool whose name says it reads, with its path argument);

- an OpenAI-compatible judge (:mod:`iclr_cli.analysis.judge`).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import orjson

from iclr_cli.blocks import split_blocks
from iclr_cli.errors import InputError
from iclr_cli.trajectory import Step, Trajectory

RULES = ("rederivation", "more_reasoning", "replanning", "repeated_action")
REPLANNING = re.compile(
    r"\b(?:let me (?:re-?consider|re-?think|step back|start over|try (?:a |another |something )?(?:different|else|again))"
    r"|on second thought|a different (?:approach|strategy|plan)|change (?:of |my |the )?(?:plan|approach|strategy)"
    r"|new plan|re-?plan|start over|back to the drawing board|that (?:didn't|did not|doesn't|does not) work"
    r"|(?:i|we) was wrong|my (?:earlier|previous) (?:assumption|plan|approach) was"
    r"|scratch that|instead,? (?:i|let me|we) (?:will|should|need)|go back to)",
    re.I,
)
_WORD = re.compile(r"\w+")
_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "open", "view", "sed", "bat"})
_NOT_A_PATH = re.compile(r"^(?:-.*|\d+|\d+(?:,\d+)?p|\$.*)$")
_PATH_KEYS = ("path", "file_path", "filename", "file", "filepath")
_COMMAND_KEYS = ("command", "cmd", "code", "script", "input")


@dataclass(frozen=True)
class Rules:
    """The heuristic's parameters (module docstring)."""

    horizon: int = 5
    ngram: int = 4
    min_shared: int = 3
    overlap: float = 0.25
    grow: float = 2.0
    min_words: int = 50


@dataclass(frozen=True)
class Label:
    """One boundary's label (0 or 1) and why (the rules that fired, or the source's note)."""

    value: int
    reasons: tuple[str, ...] = ()


Labels = dict[tuple[str, int], Label]


def reasoning_text(step: Step) -> str:
    """The step's reasoning texts joined by a blank line."""
    return "\n\n".join(p.text for p in step.reasoning if p.text.strip())


def labelled_steps(trajectory: Trajectory) -> list[int]:
    """Steps whose boundary can carry a label: with reasoning, and with a later step."""
    return [s.index for s in trajectory.steps[:-1] if reasoning_text(s).strip()]


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def action_keys(step: Step) -> set[tuple[str, str]]:
    """``("cmd", command)`` and ``("read", path)`` for every action of ``step`` (whitespace
    collapsed; commands from a tool call's ``command``-like argument or a fenced block)."""
    keys: set[tuple[str, str]] = set()
    for part in step.parts:
        if part.kind != "action":
            continue
        commands: list[str] = []
        label = part.label or ""
        if label.startswith("tool_call"):
            try:
                args = orjson.loads(part.text)
            except orjson.JSONDecodeError:
                args = None
            if isinstance(args, dict):
                for key in _COMMAND_KEYS:
                    value = args.get(key)
                    if isinstance(value, list):
                        value = " ".join(str(v) for v in value)
                    if isinstance(value, str) and value.strip():
                        commands.append(value)
                if re.search(r"read|view|open|cat", label, re.I):
                    for key in _PATH_KEYS:
                        if isinstance(args.get(key), str):
                            keys.add(("read", _path(args[key])))
            elif part.text.strip():
                commands.append(part.text)
        else:
            commands.extend(m.group(1) for m in _FENCED.finditer(part.text))
        for command in commands:
            command = " ".join(command.split())
            if command:
                keys.add(("cmd", command))
            keys.update(("read", path) for path in _reads(command))
    return keys


def _reads(command: str) -> list[str]:
    """Paths a shell command reads with a pager-like tool: the arguments after ``cat``,
    ``head``, ``sed -n ...`` and the like that are not options, counts or sed ranges."""
    out = []
    for piece in re.split(r"[;&|()]+", command):
        words = [w.strip("'\"") for w in piece.split()]
        if not words or words[0] not in _READERS:
            continue
        out.extend(_path(w) for w in words[1:] if w and not _NOT_A_PATH.match(w) and not w.startswith((">", "<")))
    return out


def _path(text: str) -> str:
    text = text.strip().strip("'\"")
    while text.startswith("./"):
        text = text[2:]
    return text.replace("/./", "/")


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _rederives(theirs: set, mine: set, rules: Rules) -> bool:
    shared = len(theirs & mine)
    return bool(theirs) and shared >= rules.min_shared and shared / len(theirs) >= rules.overlap


def heuristic_labels(trajectories: Iterable[Trajectory], rules: Rules = Rules()) -> Labels:
    """Labels by the documented rules (module docstring), for every labellable boundary."""
    out: Labels = {}
    for traj in trajectories:
        steps = traj.steps
        texts = [reasoning_text(s) for s in steps]
        actions = [action_keys(s) for s in steps]
        for t in labelled_steps(traj):
            fired: list[str] = []
            later = range(t + 1, min(len(steps), t + 1 + rules.horizon))
            mine = _ngrams(texts[t], rules.ngram)
            blocks = (b for s in later for p in steps[s].reasoning for b in split_blocks(p.text).blocks)
            if any(_rederives(_ngrams(b, rules.ngram), mine, rules) for b in blocks):
                fired.append("rederivation")
            sizes = [_words(texts[s]) for s in range(t + 1) if texts[s].strip()]
            bar = max(rules.min_words, rules.grow * statistics.median(sizes))
            if any(_words(texts[s]) >= bar for s in later):
                fired.append("more_reasoning")
            if any(REPLANNING.search(texts[s]) for s in later):
                fired.append("replanning")
            before = set().union(*actions[: t + 1])
            if any(actions[s] & before for s in later):
                fired.append("repeated_action")
            out[(traj.id, t)] = Label(int(bool(fired)), tuple(fired))
    return out


def read_labels(path: str, trajectories: Sequence[Trajectory]) -> Labels:
    """Labels from a JSONL file: one ``{"trajectory": ID, "step": T, "label": 0|1|true|false}``
    per line (blank lines allowed; other fields are ignored).

    Raises:
        InputError: naming the file, line and field of a line that is not such an object,
            a label for a trajectory that was not read, or a boundary labelled twice.
    """
    from iclr_cli.jsonio import read_input

    known = {t.id: len(t.steps) for t in trajectories}
    out: Labels = {}
    for number, line in enumerate(read_input(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {exc}", line=number) from None
        if not isinstance(record, dict):
            raise InputError(path, "expected an object with trajectory, step and label", line=number)
        traj, step, label = record.get("trajectory"), record.get("step"), record.get("label")
        if not isinstance(traj, str):
            raise InputError(path, "missing or not a string", line=number, field="trajectory")
        if traj not in known:
            raise InputError(path, f"no trajectory {traj!r} among the inputs (ids: {', '.join(sorted(known)[:5])}...)", line=number, field="trajectory")
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < known[traj]:
            raise InputError(path, f"must be a step number 0..{known[traj] - 1}", line=number, field="step")
        if label not in (0, 1) or (isinstance(label, float)):
            raise InputError(path, "must be 0, 1, true or false", line=number, field="label")
        if (traj, step) in out:
            raise InputError(path, f"step {step} of {traj!r} is labelled twice", line=number, field="step")
        out[(traj, step)] = Label(int(label), ("file",))
    return out
