"""gzip (``.jsonl.gz``, ``.json.gz``) and zstd (``.zst``) logs are read wherever a file is read
(``score``, ``prune``, ``savings``, ``diff``), found by their magic bytes, and ``prune`` writes
its output compressed the same way (docs/FORMAT.md, "Compressed files")."""

import gzip
import io
import json
import shutil
from pathlib import Path

import pytest
import zstandard

from format_helpers import run_cli
from iclr_cli.compression import GZIP, ZSTD, decompress, writer

SAMPLES = Path(__file__).resolve().parent.parent / "sample_trajectories"


def gz(data: bytes) -> bytes:
    return gzip.compress(data)


def zst(data: bytes) -> bytes:
    # a frame written in streaming mode, without a content size, as `zstd` writes from a pipe
    buf = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buf, closefd=False) as w:
        w.write(data)
    return buf.getvalue()


COMPRESS = {"gzip": (gz, gzip.decompress, ".gz"), "zstd": (zst, lambda d: zstandard.ZstdDecompressor().decompressobj().decompress(d), ".zst")}


@pytest.fixture(params=["openai_chat.json", "codex_rollout.jsonl"])
def sample(request):
    return SAMPLES / request.param


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_prune_writes_a_compressed_input_back_compressed_with_the_plain_runs_content(tmp_path, capsys, sample, kind):
    pack, unpack, suffix = COMPRESS[kind]
    packed = tmp_path / (sample.name + suffix)
    packed.write_bytes(pack(sample.read_bytes()))
    plain_out, packed_out = tmp_path / ("out_" + sample.name), tmp_path / ("out_" + packed.name)
    assert run_cli(capsys, "prune", str(sample), "--model", "fake", "-q", "-o", str(plain_out))[0] == 0
    code, _, err = run_cli(capsys, "prune", str(packed), "--model", "fake", "-q", "-o", str(packed_out))
    assert code == 0, err
    written = packed_out.read_bytes()
    assert written.startswith(GZIP.magic if kind == "gzip" else ZSTD.magic)
    assert unpack(written) == plain_out.read_bytes() != sample.read_bytes()  # pruned, then compressed
    # the same input gives the same bytes (gzip: no name, mtime 0 in the header)
    again = tmp_path / ("again_" + packed.name)
    assert run_cli(capsys, "prune", str(packed), "--model", "fake", "-q", "-o", str(again))[0] == 0
    assert again.read_bytes() == written


def test_delete_all_of_a_gzip_file_round_trips_unedited_lines_byte_for_byte(tmp_path, capsys):
    packed = tmp_path / "chat.json.gz"
    packed.write_bytes(gz((SAMPLES / "openai_chat.json").read_bytes()))
    out = tmp_path / "none.json.gz"
    assert run_cli(capsys, "prune", str(packed), "--variant", "none", "--model", "fake", "-q", "-o", str(out))[0] == 0
    assert gzip.decompress(out.read_bytes()) == (SAMPLES / "openai_chat.json").read_bytes()


def test_a_utf16_file_inside_gzip_is_written_back_utf16_inside_gzip(tmp_path, capsys):
    text = (SAMPLES / "openai_chat.json").read_text(encoding="utf-8")
    packed = tmp_path / "chat.json.gz"
    packed.write_bytes(gz(text.encode("utf-16")))  # with its byte order mark, as PowerShell writes it
    out = tmp_path / "out.json.gz"
    assert run_cli(capsys, "prune", str(packed), "--model", "fake", "-q", "-o", str(out))[0] == 0
    plain = tmp_path / "plain.json"
    assert run_cli(capsys, "prune", str(SAMPLES / "openai_chat.json"), "--model", "fake", "-q", "-o", str(plain))[0] == 0
    inner = gzip.decompress(out.read_bytes())
    assert inner.startswith(b"\xff\xfe") and inner.decode("utf-16") == plain.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_score_reads_a_compressed_file_as_the_plain_one(tmp_path, capsys, sample, kind):
    pack, _, suffix = COMPRESS[kind]
    packed = tmp_path / (sample.name + suffix)
    packed.write_bytes(pack(sample.read_bytes()))
    plain_copy = tmp_path / sample.name
    shutil.copy(sample, plain_copy)
    code, plain, _ = run_cli(capsys, "score", str(plain_copy), "--model", "fake", "-q")
    assert code == 0
    code, read, err = run_cli(capsys, "score", str(packed), "--model", "fake", "-q")
    assert code == 0, err
    plain_records, packed_records = [json.loads(x) for x in plain.splitlines()], [json.loads(x) for x in read.splitlines()]
    assert packed_records and {r["source"] for r in packed_records} == {str(packed)}
    # the records differ only in the file they name (and the trajectory id made from its name)
    drop = lambda r: {k: v for k, v in r.items() if k not in ("source", "trajectory")}  # noqa: E731
    assert [drop(r) for r in packed_records] == [drop(r) for r in plain_records]


def test_savings_reads_gzip_and_zstd_sessions_as_the_plain_ones(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ICLR_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "logs"
    folder.mkdir()
    data = (SAMPLES / "pi_session.jsonl").read_bytes()
    (folder / "a.jsonl").write_bytes(data)
    (folder / "b.jsonl.gz").write_bytes(gz(data))
    (folder / "c.jsonl.zst").write_bytes(zst(data))
    code, out, err = run_cli(capsys, "savings", str(folder), "--model", "fake", "--variant", "delete-all", "--json")
    assert code == 0, err
    sessions = sorted(json.loads(out)["data"], key=lambda s: s["file"])  # the table orders sessions by date
    assert [Path(s["file"]).name for s in sessions] == ["a.jsonl", "b.jsonl.gz", "c.jsonl.zst"]
    keys = ("requests", "input_tokens", "input_tokens_with_writeback", "reasoning_tokens_resent", "sealed_tokens", "last_activity")
    assert [tuple(s[k] for k in keys) for s in sessions[1:]] == [tuple(sessions[0][k] for k in keys)] * 2
    assert sessions[0]["requests"] == 5 and sessions[0]["input_tokens_with_writeback"] < sessions[0]["input_tokens"]


def test_diff_reads_compressed_originals_and_pruned_copies(tmp_path, capsys):
    sample = SAMPLES / "openai_chat.json"
    pruned = tmp_path / "pruned.json"
    assert run_cli(capsys, "prune", str(sample), "--model", "fake", "-q", "-o", str(pruned))[0] == 0
    (tmp_path / "orig.json.gz").write_bytes(gz(sample.read_bytes()))
    (tmp_path / "pruned.json.zst").write_bytes(zst(pruned.read_bytes()))
    code, plain, _ = run_cli(capsys, "diff", str(sample), str(pruned), "--json")
    assert code == 0
    code, packed, err = run_cli(capsys, "diff", str(tmp_path / "orig.json.gz"), str(tmp_path / "pruned.json.zst"), "--json")
    assert code == 0, err
    summary = json.loads(packed)["summary"]
    assert summary == json.loads(plain)["summary"] and (summary["blocks"], summary["removed"]) == (8, 5)


def test_prune_of_a_folder_keeps_each_compressed_file_compressed_under_its_name(tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.json.gz").write_bytes(gz((SAMPLES / "openai_chat.json").read_bytes()))
    (folder / "b.jsonl.zst").write_bytes(zst((SAMPLES / "codex_rollout.jsonl").read_bytes()))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "prune", str(folder), "-o", str(out), "--model", "fake", "-q")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["a.json.gz", "b.jsonl.zst"]
    alone = tmp_path / "a_alone.json.gz"
    assert run_cli(capsys, "prune", str(folder / "a.json.gz"), "--model", "fake", "-q", "-o", str(alone))[0] == 0
    assert (out / "a.json.gz").read_bytes() == alone.read_bytes()
    assert (out / "b.jsonl.zst").read_bytes().startswith(ZSTD.magic)


def test_several_gzip_members_are_one_stream_as_gunzip_reads_them(tmp_path, capsys):
    lines = (SAMPLES / "codex_rollout.jsonl").read_bytes().splitlines(keepends=True)
    half = len(lines) // 2
    packed = tmp_path / "rollout.jsonl.gz"
    packed.write_bytes(gz(b"".join(lines[:half])) + gz(b"".join(lines[half:])))  # `cat a.gz b.gz`
    assert decompress(packed.read_bytes(), "f")[0] == b"".join(lines)
    code, out, err = run_cli(capsys, "score", str(packed), "--model", "fake", "-q")
    assert code == 0 and len(out.splitlines()) == 2, err


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_a_cut_compressed_file_is_an_input_error_naming_the_file(tmp_path, capsys, kind):
    pack, _, suffix = COMPRESS[kind]
    data = pack((SAMPLES / "codex_rollout.jsonl").read_bytes())
    path = tmp_path / ("cut.jsonl" + suffix)
    path.write_bytes(data[: len(data) // 2])
    code, _, err = run_cli(capsys, "score", str(path), "--model", "fake")
    assert code == 2
    assert err.startswith(f"iclr: error: {path}: {kind}-compressed, but the compressed data is cut or corrupt (")


@pytest.mark.parametrize("magic, name, tool", [(b"\xfd7zXZ\x00\x00\x04", "xz", "unxz"), (b"BZh91AY&SY", "bzip2", "bunzip2"),
                                               (b"PK\x03\x04\x14\x00", "zip", "unzip")])
def test_other_compressions_are_named_not_called_binary_data(tmp_path, capsys, magic, name, tool):
    path = tmp_path / "session.jsonl.x"
    path.write_bytes(magic + b"\x00" * 40)
    code, _, err = run_cli(capsys, "prune", str(path), "--model", "fake")
    assert code == 2
    assert err.strip() == (f"iclr: error: {path}: compressed with {name}, which iclr does not read (it reads gzip .gz and zstd .zst); "
                           f"decompress it first ({tool})")


def test_the_writer_finishes_the_stream_and_leaves_the_file_open():
    buf = io.BytesIO()
    with writer(buf, ZSTD) as w:
        w.write(b'{"a": 1}\n')
    assert not buf.closed and decompress(buf.getvalue(), "f") == (b'{"a": 1}\n', ZSTD)
    with writer(buf, None) as w:
        assert w is buf


def test_the_output_is_compressed_as_its_name_says(tmp_path, capsys):
    """A gzip input pruned to a plain name (or to stdout) is plain: the agent that reads
    ``pruned.traj`` cannot read gzip; ``--in-place`` keeps the file as it was stored."""
    src = SAMPLES / "openai_chat.json"
    packed = tmp_path / "chat.json.gz"
    packed.write_bytes(gz(src.read_bytes()))
    plain = tmp_path / "plain.json"
    assert run_cli(capsys, "prune", str(src), "--model", "fake", "-q", "-o", str(plain))[0] == 0
    named = tmp_path / "named.json"
    assert run_cli(capsys, "prune", str(packed), "--model", "fake", "-q", "-o", str(named))[0] == 0
    assert named.read_bytes() == plain.read_bytes()  # plain JSON, the plain run's bytes
    code, out, _ = run_cli(capsys, "prune", str(packed), "--model", "fake", "-q")
    assert code == 0 and json.loads(out) == json.loads(plain.read_bytes())  # stdout: plain
    zs = tmp_path / "named.json.zst"
    assert run_cli(capsys, "prune", str(packed), "--model", "fake", "-q", "-o", str(zs))[0] == 0
    assert zs.read_bytes().startswith(ZSTD.magic) and decompress(zs.read_bytes(), "x")[0] == plain.read_bytes()
    renamed = tmp_path / "renamed.json"  # gzip under a plain name, rewritten in place: still gzip
    renamed.write_bytes(packed.read_bytes())
    assert run_cli(capsys, "prune", str(renamed), "--model", "fake", "-q", "--in-place")[0] == 0
    assert renamed.read_bytes().startswith(GZIP.magic) and gzip.decompress(renamed.read_bytes()) == plain.read_bytes()
