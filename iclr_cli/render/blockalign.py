"""Which block of a pruned reasoning text is which block of the original (``iclr diff``).

Both texts are split with :func:`iclr_cli.blocks.split_blocks` (METHOD.md, "Blocks") and
aligned at minimum cost, so every writer's output reads sensibly: ``iclr``/``step-only``
pruning pairs blocks one to one with ``[SKIP]`` in place of removed ones, ``delete-all``
leaves an empty text, ``random-R`` changes text inside blocks (and may merge two blocks by
deleting the blank line between them), and a writer may fold a run of ``[SKIP]`` markers
into one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from iclr_cli.blocks import is_skip, split_blocks

BlockStatus = Literal["kept", "removed", "changed", "added"]


def align_blocks(original: str, pruned: str, splitter: str = "paragraph") -> list[tuple[BlockStatus, int | None, str | None]]:
    """Align the blocks of one reasoning text with its pruned version.

    Returns ``(status, original block index or None, new text or None)`` in text order.
    Minimum-cost alignment: equal blocks are kept (cost 0); a ``[SKIP]`` stands for one
    removed block (0) or, when a writer merged markers, for a run of them (0.1 each extra);
    a block missing without a marker is removed (1), a pruned block with no original is added
    (1), and a pair that differs is changed (1.5, cheaper than remove + add).
    """
    a = split_blocks(original, splitter).blocks
    b = split_blocks(pruned, splitter).blocks if pruned.strip() else ()
    if a == b:
        return [("kept", i, None) for i in range(len(a))]
    n, m = len(a), len(b)
    inf = float("inf")
    # cost[i][j]: cheapest alignment of a[i:] with b[j:]; solved backwards so ties prefer
    # the earlier, one-to-one reading.
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    move: list[list[str]] = [[""] * (m + 1) for _ in range(n + 1)]
    cost[n][m] = 0.0
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                continue
            options: list[tuple[float, str]] = []
            if i < n and j < m:
                if a[i] == b[j]:
                    options.append((cost[i + 1][j + 1], "keep"))
                elif is_skip(b[j]):
                    options.append((cost[i + 1][j + 1], "skip"))
                else:
                    options.append((1.5 + cost[i + 1][j + 1], "change"))
                if is_skip(b[j]) and not is_skip(a[i]):
                    options.append((0.1 + cost[i + 1][j], "skip-more"))
            if i < n:
                options.append((1.0 + cost[i + 1][j], "remove"))
            if j < m:
                options.append((1.0 + cost[i][j + 1], "add"))
            cost[i][j], move[i][j] = min(options, key=lambda o: o[0])
    out: list[tuple[BlockStatus, int | None, str | None]] = []
    i = j = 0
    while i < n or j < m:
        op = move[i][j]
        if op == "keep":
            out.append(("kept", i, None))
            i, j = i + 1, j + 1
        elif op == "skip":
            out.append(("removed", i, None))
            i, j = i + 1, j + 1
        elif op == "change":
            out.append(("changed", i, b[j]))
            i, j = i + 1, j + 1
        elif op in ("skip-more", "remove"):
            out.append(("removed", i, None))
            i += 1
        else:
            out.append(("added", None, b[j]))
            j += 1
    return out


def pair_parts(old: Sequence[str], new: Sequence[str], splitter: str) -> list[str | None]:
    """For each original reasoning part, the pruned text it became (``None``: the writer
    dropped the part, as for edited Codex items with encrypted content)."""
    if len(old) == len(new):
        return list(new)
    paired: list[str | None] = [None] * len(old)
    k = 0
    for j, text in enumerate(new):
        # The pruned part belongs to the first remaining original it shares a block with;
        # the parts skipped on the way were dropped by the writer.
        for i in range(k, len(old)):
            if any(s == "kept" for s, _, _ in align_blocks(old[i], text, splitter)) or len(old) - i == len(new) - j:
                paired[i] = text
                k = i + 1
                break
    return paired
