"""P once per machine: the scorer state after P's shared part, shared by all streams.

METHOD.md, "Score" ("Context conditioning"): the scorer input of every step is ``P``, then the
history, then the step, so P is the same prefix for every step of a trajectory. An agent also
starts every session with the same instructions, its system prompt and tool definitions
(Claude Code's are some 20,000 proxy tokens: minutes of prefill on a CPU); only P's first user
message, the task, changes. A stream's own cache (:mod:`iclr_cli.scoring.streams`,
:mod:`iclr_cli.scoring.sliding`) saves that work from its second request on; this module
saves it for every new stream whose instructions were read before, in this process (memory)
or an earlier one (disk).

What is shared: P's segments before its first user turn (:func:`shared_segments`; all of P
when it has none), when they are at least ``MIN_PROMPT_TOKENS`` tokens. What is cached: the
state a job leaves after reading those tokens and nothing else (a
:class:`~iclr_cli.scoring.streams.FreshState` or :class:`~iclr_cli.scoring.sliding.SlidingState`):
their ids, the keys and values the state keeps (``[layers, 2, kv_heads, n, head_dim]`` in the
model's dtype: float32 stays float32) and, for the sliding window, the first kept stream index
``lo`` and the rotation ``rot`` of the kept keys. A new stream's job starts from a *copy*
(:meth:`PromptState.fresh_state`, :meth:`PromptState.sliding_state`): jobs truncate, drop and
rotate their stores in place. It then reads the rest of P, the history and the step.

Why results do not change: a token's keys and values depend only on the model, the tokens
before it and the positions and mask it was computed with. The shared part is a prefix of the
request's input: in ``fresh`` when P is not cut to fit (``prompt_cut == 0``), in ``sliding``
always, where the window (``limit``, ``sink = min(|P|, limit // 2)``, ``step``; fixed by the
whole P's length) is part of the key and the window rule depends on the token index alone.
So the cached state is the one the request's own job would reach after those tokens; only the
float rounding of other chunk boundaries differs (the tests allow 1e-3 bits, as for every
cache here).

Keyed by (:func:`prompt_key`): the context mode, its window parameters (``fresh``: the
scorer's ``max_tokens``; ``sliding``: ``limit``, ``sink``, ``step``), the model fingerprint
(:func:`model_fingerprint`: the model name is not enough, two random test models share it)
and the shared part's token ids. A key of its *text* (:func:`text_key`) lets
:meth:`PromptCache.holds` answer from another thread without tokenizing.

Where and how big: in memory, least recently used first out, at most ``max_entries`` states and
``max_tokens`` kept tokens (the scorer gives it a quarter of its ``cache_tokens``, on top of
the stream caches); on disk in ``$ICLR_PROMPT_CACHE_DIR`` or ``<cache>/prompts``
(:func:`iclr_cli.scoring.loading.cache_root`), one file per key, written under a temporary
name and renamed into place, read with ``torch.load(weights_only=True)``, the least recently
used removed beyond ``disk_bytes`` (2 GiB by default; a sliding state of SmolLM2 in float32
after a P longer than its 8,192-token window holds up to about 9,200 tokens, some 400 MB). A file
that cannot be read, or does not hold what its name says, is removed and counts as a miss.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import torch

from iclr_cli.scoring.kv import KVShape

from iclr_cli.scoring.prompt_keys import (  # noqa: F401  (the names callers import from here)
    FORMAT,
    MIN_PROMPT_TOKENS,
    PROMPT_DIR_ENV,
    PromptState,
    model_fingerprint,
    prompt_dir,
    prompt_job,
    prompt_key,
    prompt_span,
    shared_segments,
    sliding_params,
    text_key,
)

MAX_ENTRIES = 4
MAX_ALIASES = 1024
DISK_BYTES = 2 << 30
_STALE_TMP_S = 3600


class PromptCache:
    """States of P's shared part, in memory and on disk (see the module docstring).

    Args:
        shape: the model's key/value geometry (files whose tensors do not match are ignored).
        folder: the disk folder (``None``: memory only).
        fingerprint: :func:`model_fingerprint` of the scorer's model.
        limit: the scorer's ``max_tokens`` (the window of a shared part longer than it).
        max_entries, max_tokens: memory bounds (states, kept tokens).
        disk_bytes: most bytes of files in ``folder``.

    ``holds`` may be called from another thread while the scoring thread uses the rest: it only
    reads a dict, an ordered dict and a set (each read is atomic under the GIL).
    """

    def __init__(self, shape: KVShape, folder: Path | None, fingerprint: str, limit: int, *, max_entries: int = MAX_ENTRIES,
                 max_tokens: int, disk_bytes: int = DISK_BYTES):
        self.shape, self.folder, self.fingerprint, self.limit = shape, folder, fingerprint, limit
        self.max_entries, self.max_tokens, self.disk_bytes = max_entries, max_tokens, disk_bytes
        self._memory: OrderedDict[str, PromptState] = OrderedDict()
        self._held = 0
        self._aliases: dict[str, str] = {}  # text key -> prompt key
        self._on_disk: set[str] = set()
        self.disk_errors = 0  # files that could not be read or written
        self._scan()

    # -- bookkeeping ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._memory)

    @property
    def held(self) -> int:
        """Tokens of keys and values held in memory."""
        return self._held

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.pt"

    def _scan(self) -> None:
        """Learn which keys (and text aliases) the folder holds: names only, nothing read."""
        if self.folder is None:
            return
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        for name in names:
            if name.endswith(".pt") and not name.startswith("."):
                self._on_disk.add(name[:-3])
        for name in names:
            parts = name.split(".")
            if len(parts) == 3 and parts[2] == "alias" and parts[1] in self._on_disk:
                self._aliases[parts[0]] = parts[1]

    def alias(self, tkey: str, key: str) -> None:
        """Remember that P's text key ``tkey`` stands for ``key`` (in memory and, when the
        state is on disk, as an empty ``<tkey>.<key>.alias`` file for later processes)."""
        self._aliases.pop(tkey, None)
        if len(self._aliases) >= MAX_ALIASES:
            self._aliases.pop(next(iter(self._aliases)), None)
        self._aliases[tkey] = key
        if self.folder is not None and key in self._on_disk:
            path = self.folder / f"{tkey}.{key}.alias"
            try:
                if not path.exists():
                    path.touch()
            except OSError:
                self.disk_errors += 1

    def holds(self, mode: str, prompt: Sequence[str]) -> bool:
        """Whether the state of the shared part of P (segments ``prompt``, scored in context
        ``mode``) is in memory or known on disk. Lock-free; an estimate: a file another
        process wrote since this cache started is not known. Costs a sha256 of the part's text."""
        m = shared_segments(prompt)
        if m == 0:
            return False
        kinds = [("plain", ())] + ([("sliding", sliding_params(self.limit))] if mode == "sliding" else [])
        for kind, params in kinds:
            key = self._aliases.get(text_key(self.fingerprint, kind, params, prompt[:m]))
            if key is not None and (key in self._memory or key in self._on_disk):
                return True
        return False

    def clear(self) -> None:
        """Forget the states held in memory (files stay)."""
        self._memory.clear()
        self._held = 0

    # -- lookup and store -------------------------------------------------------------------

    def starts(self, wanted, rotary, common, run, stats) -> dict[int, tuple[PromptState, int]]:
        """States of P's shared part for requests of streams without state.

        Args:
            wanted: ``(index, prompt_span(...))`` pairs.
            rotary, common: what a :class:`SlidingJob` needs (key re-rotation, common prefix).
            run: runs jobs in batched lock step (the scorer's ``_run``).
            stats: :class:`~iclr_cli.scoring.engine.ScorerStats`, counted here.

        Returns ``{index: (state, computed)}``: ``computed`` is P's length for the one request a
        missing state was computed for (those tokens were forwarded for it, not reused), else 0.
        Missing states are computed in one run of P-only jobs (:func:`prompt_job`) and stored.
        """
        found: dict[int, tuple[str, str]] = {}
        entries: dict[str, PromptState | None] = {}
        todo: dict[str, object] = {}
        for i, (kind, params, ids, texts) in wanted:
            key = prompt_key(self.fingerprint, kind, params, ids)
            if key not in entries:
                entry, where = self.get(key)
                if entry is not None and entry.ids != tuple(ids):  # never seen: a hash collision
                    entry = None
                if entry is not None and where == "disk":
                    stats.prompt_disk_hits += 1
                entries[key] = entry
                if entry is None:
                    todo[key] = prompt_job(kind, params, ids, self.shape, rotary, common)
            found[i] = key, text_key(self.fingerprint, kind, params, texts)
        if todo:
            run(list(todo.values()))
            for key, job in todo.items():
                entries[key] = PromptState.of(job.state)
                self.put(key, entries[key])
                stats.prompt_misses += 1
        out: dict[int, tuple[PromptState, int]] = {}
        for i, (key, tkey) in found.items():
            self.alias(tkey, key)
            entry = entries[key]
            if todo.pop(key, None) is not None:
                out[i] = entry, len(entry.ids)
            else:
                out[i] = entry, 0
                stats.prompt_hits += 1
        return out

    def get(self, key: str) -> tuple[PromptState | None, str | None]:
        """``(state, where)``: ``where`` is ``"memory"`` or ``"disk"``, ``(None, None)`` on a miss.
        A state read from disk is kept in memory when it fits."""
        entry = self._memory.get(key)
        if entry is not None:
            self._memory.move_to_end(key)
            return entry, "memory"
        entry = self._read(key)
        if entry is None:
            return None, None
        self._remember(key, entry)
        self._used(key)
        return entry, "disk"

    def put(self, key: str, entry: PromptState) -> None:
        """Keep ``entry`` in memory (when it fits) and write it to disk."""
        self._remember(key, entry)
        self._write(key, entry)
        self._used(key)

    # -- warm start -------------------------------------------------------------------------

    def _recent_path(self) -> Path | None:
        return self.folder / f"recent-{self.fingerprint[:16]}.json" if self.folder is not None else None

    def _used(self, key: str) -> None:
        """Put ``key`` first in this model's list of recently used states (a small JSON file
        beside them), which :meth:`preload` reads in the next process."""
        path = self._recent_path()
        if path is None or key not in self._on_disk:
            return
        keys = [key, *(k for k in self._recent() if k != key)][: self.max_entries]
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w") as fh:
                json.dump(keys, fh)
            os.replace(tmp, path)
        except OSError:
            self.disk_errors += 1

    def _recent(self) -> list[str]:
        path = self._recent_path()
        try:
            keys = json.loads(path.read_text()) if path is not None else []
        except (OSError, ValueError):
            return []
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def preload(self) -> int:
        """Read into memory the states this model used most recently (at most ``max_entries``,
        newest last so it is the last evicted): ``iclr serve``'s readiness (P warm) waits for
        it. Returns how many were loaded; a missing or broken file loads none."""
        loaded = 0
        for key in reversed(self._recent()):
            if key in self._memory:
                continue
            entry = self._read(key)
            if entry is not None:
                self._remember(key, entry)
                loaded += 1
        return loaded

    def _remember(self, key: str, entry: PromptState) -> None:
        old = self._memory.pop(key, None)
        if old is not None:
            self._held -= old.tokens
        if entry.tokens > self.max_tokens:
            return
        while self._memory and (self._held + entry.tokens > self.max_tokens or len(self._memory) >= self.max_entries):
            _, dropped = self._memory.popitem(last=False)
            self._held -= dropped.tokens
        self._memory[key] = entry
        self._held += entry.tokens

    # -- disk -------------------------------------------------------------------------------

    def _forget_file(self, key: str) -> None:
        self._on_disk.discard(key)
        try:
            self._path(key).unlink(missing_ok=True)
        except OSError:
            pass

    def _read(self, key: str) -> PromptState | None:
        if self.folder is None:
            return None
        path = self._path(key)
        if not path.is_file():
            self._on_disk.discard(key)
            return None
        try:
            data = torch.load(path, map_location=self.shape.device, weights_only=True)
            entry = self._check(key, data)
        except Exception:  # a truncated, corrupt or foreign file: not worth a crash
            entry = None
        if entry is None:
            self.disk_errors += 1
            self._forget_file(key)
            return None
        self._on_disk.add(key)
        try:
            os.utime(path)  # last use, for the eviction order
        except OSError:
            pass
        return entry

    def _check(self, key: str, data) -> PromptState | None:
        """The state in a loaded file, or ``None`` when it is not what ``key`` names."""
        s = self.shape
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
            return None
        ids, kv, lo, rot = data.get("ids"), data.get("kv"), data.get("lo"), data.get("rot")
        if not (isinstance(ids, torch.Tensor) and isinstance(kv, torch.Tensor) and isinstance(lo, int) and isinstance(rot, int)):
            return None
        if ids.dim() != 1 or kv.dtype != s.dtype or kv.dim() != 5 or not 0 <= lo <= ids.numel() or rot < 0:
            return None
        if tuple(kv.shape[:3]) != (s.layers, 2, s.kv_heads) or kv.shape[4] != s.head_dim or kv.shape[3] != ids.numel() - lo:
            return None
        return PromptState(tuple(ids.tolist()), kv, lo, rot)

    def _write(self, key: str, entry: PromptState) -> None:
        if self.folder is None or entry.kv.numel() * entry.kv.element_size() > self.disk_bytes:
            return
        tmp = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            payload = {"format": FORMAT, "key": key, "ids": torch.tensor(entry.ids, dtype=torch.int64),
                       "kv": entry.kv.to("cpu"), "lo": entry.lo, "rot": entry.rot}
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".pt")
            with os.fdopen(fd, "wb") as fh:
                torch.save(payload, fh)
            os.replace(tmp, self._path(key))
            tmp = None
            self._on_disk.add(key)
        except (OSError, RuntimeError):
            self.disk_errors += 1
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
        self._trim(keep=key)

    def _trim(self, keep: str) -> None:
        """Remove the least recently used files beyond ``disk_bytes`` (never ``keep``), their
        aliases, and temporary files an interrupted write left behind."""
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return
        files, aliases, now = [], [], time.time()
        for e in entries:
            try:
                st = e.stat()
            except OSError:
                continue
            if e.name.startswith(".tmp-"):
                if now - st.st_mtime > _STALE_TMP_S:
                    Path(e.path).unlink(missing_ok=True)
            elif e.name.endswith(".pt"):
                files.append((st.st_mtime, st.st_size, e.name[:-3]))
            elif e.name.endswith(".alias"):
                aliases.append(e.name)
        total = sum(size for _, size, _ in files)
        gone = set()
        for _, size, name in sorted(files):
            if total <= self.disk_bytes:
                break
            if name != keep:
                self._forget_file(name)
                gone.add(name)
                total -= size
        kept = {name for _, _, name in files} - gone
        for name in aliases:
            parts = name.split(".")
            if len(parts) != 3 or parts[1] not in kept:
                try:
                    (self.folder / name).unlink(missing_ok=True)
                except OSError:
                    pass
