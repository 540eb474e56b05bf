"""Proxy-token counts of a compressed session, per step, and which reasoning is sealed.

Counts follow the one accounting of :mod:`iclr_cli.token_accounting` (deleted = generated -
kept, per reasoning part, the text as generated against the text the variant asked for), with
the proxy's tokenizer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from iclr_cli.compress import CompressionResult
from iclr_cli.context import render_part
from iclr_cli.formats.base import OpaqueEdits
from iclr_cli.formats.sealing import ENCRYPTED, SIGNED, Sealed, part_provider, record_provider
from iclr_cli.savings.compressed import Compressed
from iclr_cli.savings.estimate import StepTokens, Totals, estimate_session
from iclr_cli.token_accounting import CountTokens, account
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack

PLAIN_WIRE_FORMATS = frozenset({"openai", "litellm-spend"})
"""Formats whose reasoning went over the chat-completions wire, where every upstream that
returns signed or encrypted reasoning entries is plain in :data:`iclr_cli.providers.KINDS`
(OpenRouter's ``reasoning_details``: an edited text entry loses its signature and encrypted
entries of the old text are dropped; LiteLLM's ``thinking_blocks`` for open models) — unless
the record names the provider behind LiteLLM (``meta["provider"]``, :data:`SEALED_PROVIDERS`)."""

SEALED_PROVIDERS = {"anthropic": "anthropic", "bedrock": "anthropic", "vertex_ai": "anthropic", "openai": "openai", "azure": "openai"}
"""LiteLLM ``custom_llm_provider`` values whose own rule applies (the ``litellm`` row of
:data:`iclr_cli.providers.KINDS`: in front of Anthropic or OpenAI models the provider's rule)."""


def plain_upstream(meta: Mapping[str, object]) -> bool:
    """True when a trajectory with ``meta`` was served by a plain upstream (see
    :data:`PLAIN_WIRE_FORMATS`): there the write-back's edit of a signed or encrypted entry
    (signature dropped, encrypted siblings dropped) is a request the upstream accepts. A model
    whose provider checks signatures (``anthropic/claude-*`` through OpenRouter or LiteLLM) is
    not plain: the file rule of :mod:`iclr_cli.formats.sealing` seals its signed reasoning."""
    from iclr_cli.providers import for_model

    model = meta.get("model")
    kind = for_model(model) if isinstance(model, str) else None
    if kind is not None and kind.checks_signatures:
        return False
    return meta.get("format") in PLAIN_WIRE_FORMATS and meta.get("provider") not in SEALED_PROVIDERS


def sealed_kind(part: Part, plain: bool = False, opaque: OpaqueEdits = OpaqueEdits.DROP,
                meta: Mapping[str, object] | None = None) -> str | None:
    """The provider whose rule keeps ``part`` from being edited there (a sealed kind of
    :mod:`iclr_cli.providers`: ``anthropic`` or ``openai``), or ``None`` for reasoning the
    write-back edits and the upstream takes as edited.

    Read from the part's write-back kind (METHOD.md, "Provider rules"): ``SIGNED`` is thinking
    with an Anthropic signature, ``OPAQUE`` a reasoning item with OpenAI ``encrypted_content``.
    On a ``plain`` upstream (:func:`plain_upstream`) the estimate agrees with the write-back
    (:mod:`iclr_cli.formats.writeback`): a signed part is edited with its signature removed,
    so it is plain; an opaque part is edited only under ``opaque`` DROP with encrypted entries
    to drop, and stays sealed otherwise. ``READ_ONLY`` reasoning (redacted) is never scored or
    counted, so it has no kind here. With the trajectory's ``meta``, a signed part whose
    provider the file names as one that does not check signatures is not sealed
    (:func:`_plain_provider`).
    """
    if part.write_back is WriteBack.SIGNED:
        return None if plain or (meta is not None and _plain_provider(part, meta)) else "anthropic"
    if part.write_back is WriteBack.OPAQUE:
        edited = opaque is OpaqueEdits.DROP and bool(getattr(part.ref, "drop", ()))
        return None if plain and edited else "openai"
    return None


def sealed_rule(kind: str) -> str:
    """The rule of a sealed ``kind`` (:func:`sealed_kind`), from :data:`iclr_cli.providers.KINDS`:
    what the provider's docs say, where, and what they allow a client to leave out."""
    from iclr_cli.providers import get

    rule = get(kind)
    text = f"{rule.title}: {rule.rule}"
    if rule.docs:
        text += f" ({', '.join(rule.docs)})"
    if rule.legal_drop:
        text += f" What the docs allow to leave out instead: {rule.legal_drop}."
    return text


def seal_for_estimate(traj: Trajectory, opaque: OpaqueEdits = OpaqueEdits.DROP) -> Trajectory:
    """``traj`` with every reasoning part that :func:`sealed_kind` seals turned into a sealed
    part (``WriteBack.READ_ONLY`` with a :class:`~iclr_cli.formats.sealing.Sealed` ref), as
    the provider rule of :mod:`iclr_cli.formats.sealing` leaves it for ``prune``: no variant
    selects it, so it is never handed to the scorer, while the scorer still reads it as
    context of the later steps it scores (:func:`iclr_cli.compress.will_score`), and
    :func:`measure` counts it whole as sealed. Signed reasoning of a provider that does not
    check signatures (its own message's model, as ``prune`` reads it) stays editable. Parts
    already sealed stay as they are."""
    plain = plain_upstream(traj.meta)
    steps = []
    for step in traj.steps:
        parts = tuple(_sealed_part(p, plain, opaque, traj.meta) for p in step.parts)
        steps.append(step if all(a is b for a, b in zip(parts, step.parts)) else Step(step.index, parts))
    return traj.with_steps(steps)


def _plain_provider(part: Part, meta: Mapping[str, object]) -> bool:
    """True when the provider the file names for ``part`` does not check signatures, read as
    ``prune``'s :class:`~iclr_cli.formats.sealing.Sealer` reads it (its own message's model
    first): a Claude Code session run on DeepSeek's Anthropic endpoint is editable in both."""
    kind, _ = part_provider(part, record_provider(meta))
    return kind is not None and not kind.checks_signatures


def _sealed_part(part: Part, plain: bool, opaque: OpaqueEdits, meta: Mapping[str, object]) -> Part:
    kind = sealed_kind(part, plain, opaque, meta) if part.is_scorable_reasoning else None
    if kind is None:
        return part
    what = SIGNED if part.write_back is WriteBack.SIGNED else ENCRYPTED
    return replace(part, ref=Sealed(kind, what, part.write_back), write_back=WriteBack.READ_ONLY)


@dataclass(frozen=True)
class Measured:
    """One compressed session in proxy tokens: P, each step, and the sealed kinds it holds.

    ``sealed_reasoning``: proxy tokens of the reasoning the provider rule left sealed, by kind
    (each part counted once, as generated)."""

    prompt: int
    steps: tuple[StepTokens, ...]
    sealed: tuple[str, ...]
    sealed_reasoning: tuple[tuple[str, int], ...] = ()

    @property
    def reasoning(self) -> int:
        """Reasoning tokens as generated, over every step."""
        return sum(s.generated for s in self.steps)


def measure(result: CompressionResult, count: CountTokens, opaque: OpaqueEdits = OpaqueEdits.DROP, written: Trajectory | None = None) -> Measured:
    """Count ``result`` (a trajectory as recorded and as the variant compressed it).

    Reasoning an earlier write-back already compressed (a
    :class:`~iclr_cli.savings.compressed.Compressed` part) is generated, never deleted nor
    sealed. Reasoning the provider rule left sealed before the variant ran (a
    :class:`~iclr_cli.formats.sealing.Sealed` part: :func:`seal_for_estimate`, or ``prune``'s
    :class:`~iclr_cli.formats.sealing.Sealer`) is generated and sealed in whole: it is what
    write-back can never take off, whatever the variant. Reasoning still editable here that
    :func:`sealed_kind` says the provider keeps counts what the variant deleted from it as
    sealed, with the write-back's ``opaque`` mode.

    With ``written`` (the trajectory the write-back wrote, :func:`iclr_cli.pipeline.as_written`)
    the count is of what the output holds, as ``prune``'s summary counts it: a part whose
    written text differs from the generated one was edited (``--signed-thinking edit``) or
    dropped whole with its item (``--encrypted-reasoning drop``: the encrypted copy went with
    it, so its every token is off the input), and counts as deleted; a part the variant asked
    to edit but the write-back left as generated (``--encrypted-reasoning keep``) is counted
    apart as sealed, by :func:`sealed_kind`'s provider.
    """
    plain = plain_upstream(result.original.meta)
    kinds: set[str] = set()
    held: Counter = Counter()
    steps = []
    wrote_steps = written.steps if written is not None else (None,) * len(result.original.steps)
    for original, compressed, wrote in zip(result.original.steps, result.compressed.steps, wrote_steps, strict=True):
        in_place: list[tuple[str, str]] = []
        sealed: list[tuple[str, str]] = []
        whole = frozen = 0
        for before in original.parts:
            if before.kind == "reasoning" and isinstance(before.ref, Sealed):
                n = count(before.text) if before.text else 0
                whole += n
                held[before.ref.kind] += n
                kinds.add(before.ref.kind)
            elif before.kind == "reasoning" and isinstance(before.ref, Compressed):
                frozen += count(before.text) if before.text else 0  # re-sent as written; nothing more comes off
        outs = wrote.reasoning if wrote is not None else (None,) * len(original.reasoning)
        for before, after, out in zip(original.reasoning, compressed.reasoning, outs, strict=True):
            if out is not None and out.text != before.text:
                in_place.append((before.text, out.text))  # what the file now holds
                continue
            kind = sealed_kind(before, plain, opaque, result.original.meta)
            if out is not None and after.text == before.text:
                kind = None  # nothing asked, nothing to count apart
            (sealed if kind else in_place).append((before.text, after.text if kind or out is None else out.text))
            if kind:
                kinds.add(kind)
        free, locked = account(count, in_place), account(count, sealed)
        steps.append(StepTokens(_rendered(original.parts, count), free.generated + locked.generated + whole + frozen, free.deleted,
                                locked.deleted + whole))
    return Measured(_rendered(result.original.prompt, count), tuple(steps), tuple(sorted(kinds)), tuple(sorted(held.items())))


def _rendered(parts: Sequence[Part], count: CountTokens) -> int:
    """Proxy tokens of ``parts`` rendered as the scorer renders them, each part counted alone
    (a whole-text count may differ by a token at a part's edge)."""
    return sum(count(render_part(p)) for p in parts)


def static_totals(results: Sequence[CompressionResult], count: CountTokens, opaque: OpaqueEdits = OpaqueEdits.DROP,
                  written: Sequence[Trajectory] | None = None) -> Totals:
    """The static estimate of ``results`` summed over their sessions (``prune``'s summary row
    "input tokens re-sent, static"), each session with the requests its source recorded.
    ``written``: the trajectories as the write-back wrote them, one per result (see
    :func:`measure`); without it, as the variant asked (``iclr savings``)."""
    total = Totals()
    wrote = list(written) if written is not None else [None] * len(results)
    for result, traj in zip(results, wrote, strict=True):
        measured = measure(result, count, opaque, traj)
        total = total + Totals.of(estimate_session(measured.prompt, measured.steps, result.original.requests).requests)
    return total
