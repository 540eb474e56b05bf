"""The in-memory model every command works on: Trajectory -> Step -> Part.

A trajectory is ``P, S_1, ..., S_T`` (METHOD.md, "Objects"): ``prompt`` holds P (system
prompt, tool definitions, task instruction, everything before the first assistant turn) and
each :class:`Step` is one assistant turn (one model call) with its reasoning, its actions and
the observations that came back before the next assistant turn, in causal order.

These are frozen value types. They know nothing of the file format they came from, except an
opaque ``ref`` per part that only the originating format adapter interprets when it writes an
edited trajectory back.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

PartKind = Literal["prompt", "reasoning", "action", "observation"]


class WriteBack(enum.Enum):
    """How an edited reasoning part may be written back (METHOD.md, "Provider rules").

    - ``IN_PLACE``: plain text (``reasoning_content``, ``reasoning``, ``<think>``, SWE-agent
      ``thought``): the new text replaces the old.
    - ``SIGNED``: Anthropic ``thinking`` with a ``signature``. Once edited the signature no
      longer matches, so the adapter removes it; nothing can replay the block as original.
    - ``OPAQUE``: a summary of an encrypted reasoning item (OpenAI Responses / Codex
      ``encrypted_content``). Editing makes the item unreplayable: the adapter drops the item
      (or leaves it untouched, by user choice).
    - ``READ_ONLY``: reasoning with no readable text (``redacted_thinking``): never scored,
      never edited, passed through byte for byte.
    """

    IN_PLACE = "in_place"
    SIGNED = "signed"
    OPAQUE = "opaque"
    READ_ONLY = "read_only"


@dataclass(frozen=True)
class Media:
    """A non-text payload of a part: an image, audio clip or document, as the source held it.

    Attributes:
        kind: ``image``, ``audio`` or ``document`` (anything else: ``file``).
        mime: the media type (``image/png``), where the source gives one.
        data: the payload as base64 (no ``data:`` prefix), for inline media.
        url: where the payload lives (``https://``, ``gs://``, a Files API URI), for
            media held by reference. Exactly one of ``data`` and ``url`` is set.
        detail: OpenAI's image ``detail`` (``low``, ``high``, ``auto``): the resolution the
            model saw the image at, so it is part of what was sent.

    Only ``iclr convert`` reads it (docs/FORMAT.md, "convert"): the scorer sees a media part
    as its label alone, and write-back never touches one.
    """

    kind: str
    mime: str | None = None
    data: str | None = None
    url: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Part:
    """One piece of a step or of the prompt, in causal order.

    Attributes:
        kind: ``prompt`` (part of P), ``reasoning`` (text the model generated as reasoning),
            ``action`` (visible text, tool calls with their arguments) or ``observation``
            (tool results, environment feedback, user messages after the first turn).
        text: the text as the model saw or wrote it. For reasoning, the exact string that is
            split into blocks and written back.
        label: short tag used when the part is rendered for the proxy model
            (``system``, ``user``, ``reasoning``, ``tool_call:bash``, ``tool_result``, ...).
        ref: adapter-private locator of the text in the source records; hashable and opaque
            to everything but the adapter that made it.
        write_back: for reasoning parts, how an edit may be written back.
        call_id: on a ``tool_call:NAME`` action, the call's id; on a ``tool_result``
            observation, the id of the call it answers (``tool_call_id`` / ``tool_use_id`` /
            ``toolCallId``). ``None`` where the format has no ids; there a format pairs a
            result with the calls of its step in order.
        media: the non-text payload of an image / audio / document part (its ``text`` is
            then ``""``); ``None`` for text.
    """

    kind: PartKind
    text: str
    label: str = ""
    ref: Hashable = None
    write_back: WriteBack = WriteBack.IN_PLACE
    call_id: str | None = None
    media: Media | None = None

    @property
    def is_scorable_reasoning(self) -> bool:
        """True for reasoning whose text can be split, scored and edited."""
        return self.kind == "reasoning" and self.write_back is not WriteBack.READ_ONLY


@dataclass(frozen=True)
class Step:
    """One assistant turn ``S_t = (R_t, A_t, O_{t+1})`` (paper section 3.1).

    ``index`` is the 0-based assistant-turn number within the trajectory. ``parts`` keeps the
    order in which things happened, so interleaved thinking between tool calls stays
    interleaved.
    """

    index: int
    parts: tuple[Part, ...]

    @property
    def reasoning(self) -> tuple[Part, ...]:
        """The scorable reasoning parts of this step, ``R_t``, in order."""
        return tuple(p for p in self.parts if p.is_scorable_reasoning)

    def with_reasoning(self, texts: Sequence[str]) -> Step:
        """Return a copy whose scorable reasoning parts carry ``texts`` (same order, same count).

        Raises:
            ValueError: when ``len(texts)`` differs from the number of reasoning parts.
        """
        parts = list(self.parts)
        slots = [i for i, p in enumerate(parts) if p.is_scorable_reasoning]
        if len(slots) != len(texts):
            raise ValueError(f"step {self.index}: {len(slots)} reasoning parts, {len(texts)} texts given")
        for i, text in zip(slots, texts):
            parts[i] = replace(parts[i], text=text)
        return replace(self, parts=tuple(parts))


@dataclass(frozen=True)
class Usage:
    """Token counts a provider reported for one model request, in the agent model's tokens.

    ``input_tokens`` counts every prompt token of the request, cached or not (OpenAI
    ``prompt_tokens``; Anthropic ``input_tokens + cache_creation_input_tokens +
    cache_read_input_tokens``); ``cache_read_tokens`` and ``cache_write_tokens`` are the part
    of it read from / written to the provider's prompt cache. ``None``: not reported (never 0
    for "missing"). ``source`` names the field it was read from (``message.usage``,
    ``token_count``, ...), for reports. Two parts that providers bill apart, where recorded:
    ``cache_write_1h_tokens``, the part of the cache writes kept for an hour (Anthropic bills
    them at 2x input, 5-minute writes at 1.25x; "Prompt caching: pricing"), and
    ``reasoning_tokens``, the part of ``output_tokens`` that was thinking (Anthropic
    ``output_tokens_details.thinking_tokens``, OpenAI ``reasoning_tokens``, Codex
    ``reasoning_output_tokens``).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    source: str = ""
    cache_write_1h_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class Request:
    """One model request a transcript records: ``step`` is the 0-based step its answer began
    (so its prompt held P and steps ``0..step-1``; ``step == len(steps)`` for a request whose
    answer the file does not hold), ``usage`` what the provider reported (``None``: nothing).
    ``model`` / ``provider``: the model and provider that served it, where the transcript
    names them per request (a session can switch models); ``None``: the trajectory's own
    (``meta["model"]``)."""

    step: int
    usage: Usage | None = None
    model: str | None = None
    provider: str | None = None


@dataclass(frozen=True)
class Trajectory:
    """A whole agent run: prompt ``P`` and steps ``S_1..S_T``.

    ``id`` is the format's own id where it has one, else ``FILE#INDEX``. ``meta`` holds
    adapter facts worth reporting (model name, format); it never holds raw records.
    ``requests`` lists the model requests the source records, in order, with their usage
    (``iclr savings``; docs/FORMAT.md, "Recorded usage"); empty when the format records
    none, and then each step stands for one request. It is metadata: two trajectories that
    differ only in it compare equal.
    """

    id: str
    prompt: tuple[Part, ...]
    steps: tuple[Step, ...]
    meta: Mapping[str, object] = field(default_factory=dict)
    requests: tuple[Request, ...] = field(default=(), compare=False)

    def with_steps(self, steps: Sequence[Step]) -> Trajectory:
        """Return a copy with ``steps`` replacing the current ones."""
        return replace(self, steps=tuple(steps))

    def reasoning_edits(self, edited: Trajectory) -> dict[Hashable, tuple[Part, str]]:
        """Map ``ref -> (original part, new text)`` for every reasoning part ``edited`` changed.

        ``edited`` must be this trajectory after compression (same steps, same parts).
        Used by format adapters to write back only what changed.
        """
        edits: dict[Hashable, tuple[Part, str]] = {}
        for old_step, new_step in zip(self.steps, edited.steps):
            for old, new in zip(old_step.reasoning, new_step.reasoning):
                if old.text != new.text:
                    edits[old.ref] = (old, new.text)
        return edits
