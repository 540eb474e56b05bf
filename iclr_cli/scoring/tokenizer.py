"""The proxy model's own tokenizer, read from its ``tokenizer.json`` with the ``tokenizers`` library.

Token counts and block membership must come from the tokenizer the scores refer to (STYLE.md).
The fast tokenizer behind a transformers ``AutoTokenizer`` is exactly a ``tokenizers.Tokenizer``;
loading that file directly costs ~0.1 s and no torch/transformers import, so commands that
only count tokens (``random-R``, reports) start fast.

Decision (this project's): text is tokenized with ``add_special_tokens=False`` and with special
tokens *split*: a literal ``<|im_start|>`` inside a tool output is data, never a control token.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator
from pathlib import Path

from iclr_cli.errors import IclrError


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def tokenizable(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate (``"\\ud83d"`` in a JSON string: a tool
    output cut inside an emoji; Python keeps it as one code point) replaced by U+FFFD.

    The ``tokenizers`` library takes only text that is valid Unicode and raises
    ``TypeError: TextInputSequence must be str`` otherwise. One code point becomes one code
    point, so character offsets stay those of ``text``; the text itself (and the file it is
    written back to) is never changed.
    """
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


class ProxyTokenizer:
    """Implements :class:`iclr_cli.scoring.base.Tokenizer` for a Hugging Face fast tokenizer.

    Attributes:
        name: the model name the token counts refer to.
        bos_id: id of the start token (``bos_token`` in ``tokenizer_config.json`` or
            ``bos_token_id`` in ``config.json``), or ``None`` when the model has none.
        vocab_size: size of the tokenizer's vocabulary, added tokens included.
    """

    def __init__(self, backend, name: str, bos_id: int | None):
        self._tk = backend
        # Literal special-token strings in trajectory text are encoded as plain text.
        self._tk.encode_special_tokens = True
        self.name = name
        self.bos_id = bos_id
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_folder(cls, folder: str | Path, name: str) -> ProxyTokenizer:
        """Read ``tokenizer.json`` (and the start token) from a Hugging Face model folder.

        Raises:
            IclrError: when the folder has no ``tokenizer.json`` (slow tokenizers are not
                supported: their offsets are not reliable).
        """
        import tokenizers

        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise IclrError(f"{folder}: no tokenizer.json (a fast tokenizer is required for token offsets)")
        backend = tokenizers.Tokenizer.from_file(str(path))
        return cls(backend, name, _bos_id(folder, backend))

    def encode(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids of ``text`` and the ``(start, end)`` character offsets of each (no specials)."""
        enc = self._tk.encode(tokenizable(text), add_special_tokens=False)
        return enc.ids, enc.offsets

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text`` only (no offsets: a long history segment needs none)."""
        return self._tk.encode(tokenizable(text), add_special_tokens=False).ids

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets of each token of ``text`` (no special tokens added)."""
        return self._tk.encode(tokenizable(text), add_special_tokens=False).offsets


def _bos_id(folder: Path, backend) -> int | None:
    """The start token id, looked up the way transformers does (tokenizer config first)."""
    for file, key in (("tokenizer_config.json", "bos_token"), ("config.json", "bos_token_id")):
        path = folder / file
        if not path.is_file():
            continue
        value = json.loads(path.read_text(encoding="utf-8")).get(key)
        if isinstance(value, dict):  # AddedToken serialised as a dict
            value = value.get("content")
        if isinstance(value, str):
            tid = backend.token_to_id(value)
            if tid is not None:
                return tid
        elif isinstance(value, int):
            return value
    return None


PIECE_CHARS = 1 << 20
"""Characters per piece when a long text is tokenized in pieces (:func:`encode_ids`)."""
_PROBE = 256


def _ids(tokenizer, text: str) -> list[int]:
    ids = getattr(tokenizer, "ids", None)
    return ids(text) if ids is not None else tokenizer.encode(text)[0]


def _boundary(tokenizer, text: str, cut: int) -> bool:
    """True when a token of ``text`` starts at ``cut``: tokenizing the text around it shows
    one there (pre-tokenizers resynchronise within a few characters)."""
    lo = max(0, cut - _PROBE)
    return any(start == cut - lo for start, _ in tokenizer.encode(text[lo : cut + _PROBE])[1])


def _cut(tokenizer, text: str, lo: int, hi: int) -> int | None:
    """A place in ``text[lo:hi]`` where a token starts: after a line break, else after a
    space, else any of the last 64 characters (minified JSON has no line break), latest first."""
    for sep in ("\n", " "):
        at, tries = hi, 0
        while tries < 16:
            at = text.rfind(sep, lo, at)
            if at < 0:
                break
            if _boundary(tokenizer, text, at + 1):
                return at + 1
            tries += 1
    return next((c for c in range(hi - 1, max(lo, hi - 64), -1) if _boundary(tokenizer, text, c)), None)


def pieces(tokenizer, text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, cut only where a token of the whole
    text starts (checked by tokenizing the text around the cut), so the pieces' tokens are the
    whole text's tokens; one piece when no such place is found."""
    start = 0
    while len(text) - start > size:
        cut = _cut(tokenizer, text, start + size // 2, start + size)
        if cut is None:
            break
        yield text[start:cut]
        start = cut
    yield text[start:]


def encode_ids(tokenizer, text: str) -> array:
    """All token ids of ``text`` as a compact ``array("i")``, tokenized piece by piece
    (:func:`pieces`): a 50 MB tool output never holds its whole token list, offsets and the
    tokenizer's own encoding at once."""
    out = array("i")
    for piece in pieces(tokenizer, text):
        out.extend(_ids(tokenizer, piece))
    return out


def count_ids(tokenizer, text: str) -> int:
    """The number of tokens of ``text``, tokenized piece by piece, keeping no ids."""
    return sum(len(_ids(tokenizer, piece)) for piece in pieces(tokenizer, text))
