"""The deterministic text the proxy model scores (METHOD.md, "Context conditioning").

Every part is rendered as a label line, its text, and a blank line::

    [system]
    You are a coding agent...

    [reasoning]
    First I need to find where the config is loaded.

    [tool_call:bash]
    {"command": "grep -rn load_config ."}

    [tool_result]
    src/config.py:12: def load_config(path):

P is rendered part by part, then each earlier step as it stands (compressed), then the
completed step with its reasoning visible. The ``step-only`` variant renders the step's
reasoning parts alone, joined by a blank line, with no labels.

Elision (the default profile, docs/scoring.md "Speed"): with ``elide=E`` a part of P or an
observation longer than ``2E`` characters plus the marker is rendered as its first ``E``
characters, a line ``[... N characters elided ...]`` and its last ``E`` characters. Tool
outputs and tool schemas are most of the tokens of a coding session and every token costs a
forward pass; what the proxy needs to predict the reasoning that follows is mostly at an
output's head (the command's first lines) and tail (the error, the summary). Reasoning and
actions are never elided: the blocks scored and the calls they lead to stay whole. The cut
depends on the text alone, so the history's render stays stable from step to step (the
prefix cache relies on it), and ``--exact`` (``elide=None``) renders everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.blocks import Split
from iclr_cli.trajectory import Part, Step


ELIDED_KINDS = frozenset({"prompt", "observation"})
"""Part kinds whose long texts are elided (module docstring)."""


def elide_text(text: str, elide: int | None) -> str:
    """``text`` with all but its first and last ``elide`` characters replaced by a marker line
    naming how many characters went; unchanged when ``elide`` is ``None`` or the text is not
    longer than what the elided form would take."""
    if elide is None:
        return text
    gone = len(text) - 2 * elide
    marker = f"\n[... {gone} characters elided ...]\n"
    if gone <= len(marker):
        return text
    return text[:elide] + marker + text[len(text) - elide :]


def render_part(part: Part, elide: int | None = None) -> str:
    """``[label]\\ntext\\n\\n`` for one part (label defaults to the part kind); a prompt part
    or an observation is elided to ``elide`` characters at each end (module docstring)."""
    text = elide_text(part.text, elide) if part.kind in ELIDED_KINDS else part.text
    return f"[{part.label or part.kind}]\n{text}\n\n"


def render_prompt(prompt: Sequence[Part], elide: int | None = None) -> tuple[str, ...]:
    """One rendered segment per part of P."""
    return tuple(render_part(p, elide) for p in prompt)


def render_step(step: Step, elide: int | None = None) -> str:
    """A whole step (reasoning, actions, observations) as it appears in the history."""
    return "".join(render_part(p, elide) for p in step.parts)


@dataclass(frozen=True)
class RenderedStep:
    """A completed step rendered for scoring, cut after its last reasoning block.

    ``spans[i]`` locates block i (numbered across the step's reasoning parts, in order)
    inside ``text``.
    """

    text: str
    spans: tuple[tuple[int, int], ...]


def render_for_scoring(step: Step, splits: Sequence[Split], *, step_only: bool = False, elide: int | None = None) -> RenderedStep:
    """Render ``step`` with block offsets; ``splits`` holds one Split per reasoning part.

    Blocks listed are those of ``splits`` (callers drop ``[SKIP]`` blocks themselves by
    passing only the spans they want scored; here every block is located). A block's span
    starts at the spaces or tabs that indent its first line: the splitter leaves them to the
    separator, but BPE tokenizers fold a leading space into the next word (``" or"``), and
    METHOD.md assigns a token to the block its first character falls in.
    """
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    reasoning_seen = 0
    parts = step.reasoning if step_only else step.parts
    for part in parts:
        if part.is_scorable_reasoning:
            split = splits[reasoning_seen]
            reasoning_seen += 1
            head = "" if step_only else f"[{part.label or part.kind}]\n"
            body_start = pos + len(head)
            spans.extend((body_start + _with_indent(part.text, s), body_start + e) for s, e in split.spans)
            piece = head + part.text + "\n\n"
        else:
            piece = render_part(part, elide)
        pieces.append(piece)
        pos += len(piece)
    text = "".join(pieces)
    end = spans[-1][1] if spans else 0
    return RenderedStep(text[:end], tuple(spans))


def _with_indent(text: str, start: int) -> int:
    """``start`` moved back over the spaces and tabs directly before it (never over a newline)."""
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return start
