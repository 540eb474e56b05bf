"""Paint a :class:`~iclr_cli.render.diffdata.Diff` with rich: the only place ``iclr diff``
output is styled.

Every block is one row: a marker (``-`` removed, ``~`` changed, ``+`` added, blank kept), its
entropy tag in bits (when scores are known) coloured on a heat scale from the lowest (blue,
the proxy found it predictable: first to go) to the highest entropy in the diff (red), and the
text. Removed blocks are struck through. Actions (``>``) and observations (``<``) are folded
to one line. The markers carry the meaning on their own, so plain text (stdout not a
terminal, or ``NO_COLOR``) reads the same without styles.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from rich.cells import cell_len
from rich.console import Console, Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from iclr_cli.render.diffdata import BlockDiff, Diff, Folded, Gap, StepDiff, TrajectoryDiff
from iclr_cli.token_accounting import WHOLE_ITEM_WHY, blocks_cell, blocks_removed_cell, summary_rows

# Sequential cold-to-hot scale (ColorBrewer RdYlBu, reversed): low entropy = blue.
HEAT = ("#4575b4", "#74add1", "#abd9e9", "#e0f3f8", "#fee090", "#fdae61", "#f46d43", "#d73027")
_MARK = {"kept": " ", "removed": "-", "changed": "~", "added": "+"}
_TAG_WIDTH = 11  # "[12.34 bits]" minus one; entropies stay under 100 bits


def make_console(*, file=None, width: int | None = None, force_terminal: bool | None = None, color_system: str | None = "auto") -> Console:
    """A console on stdout (or ``file``). Colours follow rich's detection, which honours
    ``NO_COLOR`` and ``FORCE_COLOR``; without a terminal the output is plain text."""
    return Console(file=file, width=width, force_terminal=force_terminal, color_system=color_system, highlight=False, emoji=False)


def heat_colour(entropy: float, lo: float | None, hi: float | None) -> str:
    """The heat colour of ``entropy`` (bits) on the scale ``lo..hi`` (bits)."""
    if lo is None or hi is None or hi <= lo:
        return HEAT[len(HEAT) // 2]
    x = (entropy - lo) / (hi - lo)
    return HEAT[min(len(HEAT) - 1, max(0, int(x * len(HEAT))))]


def _fold(text: str) -> str:
    return " ".join(text.split())


def _tag(block: BlockDiff, diff: Diff) -> Text:
    if diff.scores is None:
        return Text("")
    if block.entropy_bits is None:
        return Text("[   -     ]", style="dim")
    colour = heat_colour(block.entropy_bits, diff.summary.entropy_min, diff.summary.entropy_max)
    # Background colour so the scale reads on light and dark terminals alike.
    ink = "white" if colour in HEAT[:2] + HEAT[-2:] else "black"
    return Text.assemble((f"[{block.entropy_bits:5.2f} bits]", f"{ink} on {colour}"))


def _styled(text: str, style: str = "") -> Text:
    # Style the span, not the Text: table padding of a struck-through block stays unstruck.
    return Text.assemble((text, style))


def _block_rows(block: BlockDiff, diff: Diff) -> list[tuple[Text, Text, Text]]:
    mark = _MARK[block.status]
    if block.sealed:  # as generated, never a candidate: read as context only
        return [(Text(mark), _tag(block, diff), _styled(block.text, "dim"))]
    if block.status == "kept":
        return [(Text(mark), _tag(block, diff), _styled(block.text))]
    if block.status == "removed":
        return [(_styled(mark, "red"), _tag(block, diff), _styled(block.text, "strike dim"))]
    if block.status == "added":
        return [(_styled("+", "green"), _tag(block, diff), _styled(block.new_text or "", "green"))]
    return [
        (_styled("~", "yellow"), _tag(block, diff), _styled(block.text, "strike dim")),
        (_styled("+", "green"), Text(""), _styled(block.new_text or "", "green")),
    ]


def _folded_rows(item: Folded) -> list[tuple[Text, Text, Text]]:
    mark = ">" if item.kind == "action" else "<"
    body = _styled(f"{item.label}: ", "bold cyan" if item.kind == "action" else "bold magenta")
    body.append(_fold(item.text) or "(empty)", style="dim" if item.kind == "observation" else "")
    rows = [(Text(mark), Text(""), body)]
    if item.new_text is not None:
        new = _styled(f"{item.label} in pruned: ", "bold yellow")
        new.append(_fold(item.new_text))
        rows.append((_styled("!", "yellow"), Text(""), new))
    return rows


def step_title(step: StepDiff) -> str:
    """One-line heading of a step: blocks removed, reasoning tokens before -> after."""
    blocks = step.blocks
    removed = sum(b.status == "removed" for b in blocks)
    changed = sum(b.status == "changed" for b in blocks)
    parts = [f"step {step.step}"]
    sealed = len(step.sealed_blocks)
    if blocks or sealed:
        head = f"{removed}/{sum(b.status != 'added' for b in blocks)} blocks removed" + (f", {changed} changed" if changed else "")
        if step.whole:
            head += f" ({'item' if step.whole == 1 else f'{step.whole} items'} dropped whole: {WHOLE_ITEM_WHY})"
        if sealed:
            head += f" (+{sealed} sealed by the provider rule, not candidates)"
        parts.append(head)
        t = step.tokens
        marks = f" incl. {t.markers} [SKIP]" if t.markers else ""
        parts.append(f"reasoning {t.generated} -> {t.written} tokens{marks}, {t.deleted} deleted")
    else:
        parts.append("no reasoning")
    return " · ".join(parts)


def render_step(step: StepDiff, diff: Diff, *, heading: bool = True) -> Group:
    """A step heading (left out with ``heading=False``) and one grid row per block / folded
    action or observation."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=1, no_wrap=True)
    grid.add_column(width=_TAG_WIDTH + 1 if diff.scores is not None else 0, no_wrap=True)
    grid.add_column(ratio=1, overflow="fold")
    for item in step.items:
        rows = _block_rows(item, diff) if isinstance(item, BlockDiff) else _folded_rows(item)
        for mark, tag, body in rows:
            if isinstance(item, Folded):
                body.no_wrap = True
                body.overflow = "ellipsis"
            grid.add_row(mark, tag, body)
    head: list = [Rule(Text(step_title(step), style="bold"), align="left", style="dim")] if heading else []
    if step.skipped:
        head.append(Text(f"  not scored: {step.skipped}", style="yellow"))
    return Group(*head, grid)


def print_step(console: Console, step: StepDiff, diff: Diff) -> None:
    """Print one step. Off a terminal (a pipe, a file) a heading wider than the console is
    printed whole on one line: rich's rule would cut it with an ellipsis at 80 columns and
    lose the token counts at its end."""
    title = step_title(step)
    # a left-aligned rule keeps its title whole up to the width less 2 (" " and one rule char)
    if console.is_terminal or cell_len(title) <= console.width - 2:
        console.print(render_step(step, diff))
        return
    console.print(Text.assemble((title, "bold"), " ", ("\u2500", "dim")), soft_wrap=True)
    console.print(render_step(step, diff, heading=False))


def render_gap(gap: Gap) -> Text:
    n = gap.last - gap.first + 1
    span = f"step {gap.first}" if n == 1 else f"steps {gap.first}-{gap.last}"
    return Text(f"  ... {span} unchanged ({n} step{'s' if n != 1 else ''}) ...", style="dim")


def render_summary(diff: Diff) -> Group:
    """The closing summary: what was compared, then steps, blocks, removed, reasoning tokens
    before/after. The file names go on their own line (a table title would wrap them)."""
    s = diff.summary
    table = Table(show_header=False)
    table.add_column("")
    table.add_column("", justify="right")
    rows = [
        ("trajectories", str(s.trajectories)),
        ("steps", str(s.steps)),
        ("steps changed", str(s.steps_changed)),
        ("reasoning blocks", blocks_cell(s.blocks, s.sealed_blocks)),
        ("blocks kept", str(s.kept)),
        ("blocks removed", blocks_removed_cell(s.removed, s.dropped_whole, s.dropped_whole_blocks)),
    ]
    if s.changed or s.added:
        rows += [("blocks changed", str(s.changed)), ("blocks added", str(s.added))]
    rows += [(name, str(value)) for name, value in summary_rows(s.tokens, diff.tokenizer)]
    if diff.scores is not None:
        rows.append(("entropies from", diff.scores))
        if diff.precision is not None:
            rows.append(("proxy precision", diff.precision))
        if s.entropy_min is not None:
            rows.append(("entropy range (bits)", f"{s.entropy_min:.2f} - {s.entropy_max:.2f}"))
    for name, value in rows:
        table.add_row(name, value)
    return Group(Text(f"{diff.original} -> {diff.pruned}", style="italic"), table)


def paint(console: Console, diff: Diff, views: Sequence[tuple[TrajectoryDiff, Sequence[StepDiff | Gap]]]) -> None:
    """Print the shown steps of every trajectory, then the summary."""
    many = len(views) > 1
    for traj, shown in views:
        if many:
            console.print(Text(f"trajectory {traj.id}", style="bold underline"))
        for item in shown:
            if isinstance(item, Gap):
                console.print(render_gap(item))
            else:
                print_step(console, item, diff)
        if not shown:
            console.print(Text("  (no step matches)", style="dim"))
    if diff.scores is not None and diff.summary.entropy_min is not None:
        console.print(heat_legend(diff))
    console.print(render_summary(diff))


def heat_legend(diff: Diff) -> Text:
    """``entropy: 0.52 ████████ 3.90 bits`` with the scale's colours."""
    s = diff.summary
    legend = Text("heat: ")
    legend.append(f"{s.entropy_min:.2f} ")
    for colour in HEAT:
        legend.append("\u2588", style=colour)
    legend.append(f" {s.entropy_max:.2f} bits (low entropy: removed first)")
    return legend


def emit(console: Console, draw: Callable[[Console], None], *, pager: bool = True) -> None:
    """Run ``draw`` (which prints to the console it is given) and send the result out.

    On a terminal, output taller than the screen goes through rich's pager when ``pager`` is
    on (``LESS`` defaults to ``FRX``: colours, quit when it fits). Plain text (no terminal)
    loses the trailing blanks rich pads table cells with.
    """
    with console.capture() as cap:
        draw(console)
    text = cap.get()
    if not console.is_terminal:
        console.file.write("\n".join(line.rstrip() for line in text.split("\n")))
        console.file.flush()
        return
    if pager and text.count("\n") > console.height:
        os.environ.setdefault("LESS", "FRX")
        with console.pager(styles=True):
            draw(console)
        return
    console.file.write(text)
    console.file.flush()


def show(console: Console, diff: Diff, views, *, pager: bool = True) -> None:
    """Paint the diff (see :func:`paint`) through :func:`emit`."""
    emit(console, lambda c: paint(c, diff, views), pager=pager)
