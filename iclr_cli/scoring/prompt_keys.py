"""Keys and snapshots of the shared P state (:mod:`iclr_cli.scoring.prefix` keeps them).

What a state is keyed by (:func:`model_fingerprint`, :func:`prompt_key`, :func:`text_key`),
which of P's segments are shared (:func:`shared_segments`: those before its first user turn),
the part of a request's input they cover (:func:`prompt_span`), the job that reads them alone
(:func:`prompt_job`) and the snapshot kept (:class:`PromptState`). The rules and why results do
not change are in :mod:`iclr_cli.scoring.prefix`.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from iclr_cli.scoring.kv import KVShape, KVStore
from iclr_cli.scoring.sliding import SlidingJob, SlidingState, SlidingWindow
from iclr_cli.scoring.streams import FreshJob, FreshState

PROMPT_DIR_ENV = "ICLR_PROMPT_CACHE_DIR"
MIN_PROMPT_TOKENS = 256
"""Shorter P is not shared: its prefill is cheap and each entry costs a disk file."""
FORMAT = 1
"""Bumped when what a file holds changes: a file of another format is ignored (removed)."""
USER_TURN = "[user]\n"
_PROBE_TEXT = "def parse(header):\n    return None  # <|im_start|> caf\u00e9 \u2713\n\n[tool_result]\nok"


def prompt_dir() -> Path:
    """``$ICLR_PROMPT_CACHE_DIR`` if set, else ``cache_root() / "prompts"``."""
    env = os.environ.get(PROMPT_DIR_ENV)
    if env:
        return Path(env)
    from iclr_cli.scoring.loading import cache_root

    return cache_root() / "prompts"


def _sample_bytes(t: torch.Tensor, n: int = 64) -> bytes:
    """``n`` values spread evenly over ``t`` and its last one, as float32 bytes."""
    flat = t.detach().reshape(-1)
    picked = torch.cat([flat[:: max(1, flat.numel() // n)][:n], flat[-1:]])
    return picked.to("cpu", torch.float32).numpy().tobytes()


def model_fingerprint(model, tokenizer, shape: KVShape) -> str:
    """A hex digest that differs between models whose keys and values could differ.

    Covers the model class, its dtype and configuration (without paths and versions), the key/value
    geometry, weight values (65 spread over every parameter tensor: another checkpoint of the
    same architecture differs in them) and the tokenizer (its vocabulary size, start token and
    the ids of a probe text). Costs milliseconds (SmolLM2: 272 tensors, 26 ms), not a pass over the
    weights.
    """
    h = hashlib.sha256(f"iclr-prompt-cache/{FORMAT}|{type(model).__name__}|{shape.dtype}|{shape.layers}x{shape.kv_heads}x{shape.head_dim}".encode())
    config = {k: v for k, v in model.config.to_dict().items() if not k.startswith("_") and k not in ("transformers_version", "torch_dtype", "dtype")}
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    with torch.inference_mode():
        for name, t in model.named_parameters():
            h.update(name.encode())
            h.update(_sample_bytes(t))
    h.update(f"|{getattr(tokenizer, 'vocab_size', None)}|{getattr(tokenizer, 'bos_id', None)}|".encode())
    h.update(array("q", tokenizer.encode(_PROBE_TEXT)[0]).tobytes())
    return h.hexdigest()


def prompt_key(fingerprint: str, kind: str, params: Sequence[int], ids: Sequence[int]) -> str:
    """The cache key of a state: sha256 of the fingerprint, its kind (:func:`prompt_span`), the
    window parameters and the token ids."""
    h = hashlib.sha256(f"{fingerprint}|{kind}|{','.join(map(str, params))}|{len(ids)}|".encode())
    h.update(array("q", ids).tobytes())
    return h.hexdigest()


def text_key(fingerprint: str, kind: str, params: Sequence[int], texts: Sequence[str]) -> str:
    """A key of the shared part's segments: with the model (tokenizer included) they fix its
    ids, so it stands for one :func:`prompt_key` of the same kind and parameters."""
    h = hashlib.sha256(f"{fingerprint}|{kind}|{','.join(map(str, params))}|{len(texts)}".encode())
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        h.update(f"|{len(data)}|".encode())
        h.update(data)
    return h.hexdigest()


def shared_segments(prompt: Sequence[str]) -> int:
    """How many of P's leading segments are shared across sessions: those before its first user
    turn (all of them when it has none). :func:`iclr_cli.context.render_part` renders a user
    turn as ``[user]`` and a line break, then its text."""
    for i, seg in enumerate(prompt):
        if seg.startswith(USER_TURN):
            return i
    return len(prompt)


def sliding_params(limit: int) -> tuple[int, int, int]:
    """The window of every P longer than ``limit`` (:meth:`SlidingWindow.for_prompt`: the sink
    is then ``limit // 2``)."""
    w = SlidingWindow.for_prompt(limit + 1, limit)
    return w.limit, w.sink, w.step


def prompt_span(request, layout, mode: str, limit: int, ids) -> tuple[str, tuple[int, ...], Sequence[int], tuple[str, ...]] | None:
    """``(kind, window parameters, ids, segments)`` of the shared part of the request's P
    (:func:`shared_segments`) when it is at least ``MIN_PROMPT_TOKENS`` tokens, the request's
    input (``layout``, :class:`~iclr_cli.scoring.window.Layout`) starts with it and goes on
    after it; else ``None``. ``ids`` maps a P segment to the ids the layout took for it;
    ``limit`` is the scorer's ``max_tokens``.

    ``fresh`` puts all of P first unless P was cut to fit (``plan.prompt_cut``); ``sliding``
    (:func:`~iclr_cli.scoring.window.lay_out_whole`) always does. The kind says what the
    state is:

    - ``plain`` (no parameters): the part fits the limit, and its keys and values are those of
      one causal forward pass at positions ``0 ..``: in ``fresh``, and in ``sliding`` too,
      where every token before index ``limit`` is read in the window's first plain run
      whatever the sink (:mod:`iclr_cli.scoring.sliding`). One state serves both modes.
    - ``sliding``: a part longer than the limit, read through the window of any P that long
      (:func:`sliding_params`).
    """
    m = shared_segments(request.prompt)
    if m == 0 or (mode == "fresh" and layout.plan.prompt_cut):
        return None
    n = sum(len(ids(seg)) for seg in request.prompt[:m])
    if n < MIN_PROMPT_TOKENS or n >= len(layout.ids):
        return None
    if n <= limit:
        return "plain", (), layout.ids[:n], tuple(request.prompt[:m])
    return "sliding", sliding_params(limit), layout.ids[:n], tuple(request.prompt[:m])


def prompt_job(kind: str, params: Sequence[int], ids: Sequence[int], shape: KVShape, rotary, common):
    """A job that reads the shared part alone and keeps its state: one plain forward
    (``FreshJob``) or the sliding window ``params`` (``SlidingJob``), without wanted rows.
    Sliding: a request resumes at ``len(ids) - 1`` at the earliest (its first wanted row, when
    P is all shared), so every token that position attends to stays stored (``keep_from``)."""
    if kind == "plain":
        return FreshJob(None, ids, [], shape, common, keep=True, most=len(ids))
    return SlidingJob(None, ids, [], SlidingWindow(*params), len(ids) - 1, shape, rotary, common)


@dataclass
class PromptState:
    """A stream's state after P alone (see the module docstring); never handed to a job itself.

    ``kv``: ``[layers, 2, kv_heads, len(ids) - lo, head_dim]``, keys rotated for window start
    ``rot``; ``lo`` and ``rot`` are 0 in ``fresh``.
    """

    ids: tuple[int, ...]
    kv: torch.Tensor
    lo: int = 0
    rot: int = 0

    @property
    def tokens(self) -> int:
        return self.kv.shape[3]

    @classmethod
    def of(cls, state) -> PromptState:
        """A snapshot of a job's state (its valid keys and values copied)."""
        kv = state.store.view(0, state.store.length).clone()
        if isinstance(state, SlidingState):
            return cls(tuple(state.ids), kv, state.lo, state.rot)
        return cls(tuple(state.ids), kv)

    def _store(self, shape: KVShape, capacity: int, most: int | None) -> KVStore:
        store = KVStore(shape, max(capacity, self.tokens), most)
        store.data[:, :, :, : self.tokens] = self.kv
        store.length = self.tokens
        return store

    def fresh_state(self, shape: KVShape, capacity: int, most: int | None) -> FreshState:
        """A new :class:`FreshState` holding a copy (room for ``capacity`` tokens)."""
        return FreshState(list(self.ids), self._store(shape, capacity, most))

    def sliding_state(self, window: SlidingWindow, shape: KVShape, capacity: int, most: int | None) -> SlidingState:
        """A new :class:`SlidingState` for ``window`` holding a copy."""
        return SlidingState(window, list(self.ids), self._store(shape, capacity, most), self.lo, self.rot)
