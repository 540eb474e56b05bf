"""Proxy-token counts of a compressed session, per step, and which reasoning is sealed.

Counts follow the one accounting of :mod:`iclr_cli.token_accounting` (deleted = generated -
kept, per reasoning part, the text as generated against the text the variant asked for), with
the proxy's tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iclr_cli.compress import CompressionResult
from iclr_cli.context import render_part
from iclr_cli.savings.estimate import StepTokens, Totals, estimate_session
from iclr_cli.token_accounting import CountTokens, account
from iclr_cli.trajectory import Part, WriteBack

SEALED_RULES: dict[str, str] = {
    "signed": (
        "Anthropic: a thinking block goes back with its signature, unmodified, or the request is "
        "rejected; earlier turns' thinking is dropped from the context by the API itself "
        "(docs.anthropic.com/en/docs/build-with-claude/extended-thinking, 'Preserving thinking blocks')"
    ),
    "encrypted": (
        "OpenAI: a reasoning item goes back whole as its encrypted_content; its summary text is not "
        "what the model reads, and an edited item cannot be replayed "
        "(platform.openai.com/docs/guides/reasoning, 'Encrypted reasoning items')"
    ),
}
"""Why sealed reasoning cannot be compressed on its provider, by the kind :func:`sealed_kind` names."""


def sealed_kind(part: Part) -> str | None:
    """``signed``, ``encrypted`` or ``None`` (reasoning written back in place): the provider rule
    that keeps ``part`` from being edited (:data:`SEALED_RULES`).

    Derived from the part's write-back kind (METHOD.md, "Provider rules"): ``SIGNED`` is
    Anthropic thinking with a signature, ``OPAQUE`` an OpenAI reasoning item with
    ``encrypted_content``. ``READ_ONLY`` reasoning (redacted) is never scored or counted, so it
    has no kind here. This is the one place to point at a per-provider rule table.
    """
    if part.write_back is WriteBack.SIGNED:
        return "signed"
    if part.write_back is WriteBack.OPAQUE:
        return "encrypted"
    return None


@dataclass(frozen=True)
class Measured:
    """One compressed session in proxy tokens: P, each step, and the sealed kinds it holds."""

    prompt: int
    steps: tuple[StepTokens, ...]
    sealed: tuple[str, ...]

    @property
    def reasoning(self) -> int:
        """Reasoning tokens as generated, over every step."""
        return sum(s.generated for s in self.steps)


def measure(result: CompressionResult, count: CountTokens) -> Measured:
    """Count ``result`` (a trajectory as recorded and as the variant compressed it)."""
    kinds: set[str] = set()
    steps = []
    for original, compressed in zip(result.original.steps, result.compressed.steps, strict=True):
        in_place: list[tuple[str, str]] = []
        sealed: list[tuple[str, str]] = []
        for before, after in zip(original.reasoning, compressed.reasoning, strict=True):
            kind = sealed_kind(before)
            (sealed if kind else in_place).append((before.text, after.text))
            if kind:
                kinds.add(kind)
        free, locked = account(count, in_place), account(count, sealed)
        steps.append(StepTokens(_rendered(original.parts, count), free.generated + locked.generated, free.deleted, locked.deleted))
    return Measured(_rendered(result.original.prompt, count), tuple(steps), tuple(sorted(kinds)))


def _rendered(parts: Sequence[Part], count: CountTokens) -> int:
    """Proxy tokens of ``parts`` rendered as the scorer renders them, each part counted alone
    (a whole-text count may differ by a token at a part's edge)."""
    return sum(count(render_part(p)) for p in parts)


def static_totals(results: Sequence[CompressionResult], count: CountTokens) -> Totals:
    """The static estimate of ``results`` summed over their sessions (``prune``'s summary row
    "input tokens re-sent, static"), each session with the requests its source recorded."""
    total = Totals()
    for result in results:
        measured = measure(result, count)
        total = total + Totals.of(estimate_session(measured.prompt, measured.steps, result.original.requests).requests)
    return total
