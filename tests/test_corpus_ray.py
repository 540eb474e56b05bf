"""``--engine ray``: the dataset built from the real OpenAI-chat trajectories scored and pruned
on a local Ray cluster with two scorer actors gives the local engine's results."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

ray = pytest.importorskip("ray")

# A local Ray cluster and its worker processes: tens of seconds per test on a busy machine
# (206 s measured for one). The fast subset (-m "... and not slow") leaves them out; CI runs them.
pytestmark = pytest.mark.slow

from corpus_data import real_rows, records, tiny_model, write_jsonl, write_parquet  # noqa: E402,F401 (fixture)
from iclr_cli.cli.app import main  # noqa: E402
from iclr_cli.corpus.ray_engine import RayOptions, connect  # noqa: E402

TOL = 1e-6
ROOT = Path(__file__).resolve().parents[1]


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def cluster(tiny_model):
    """One local cluster for the module (started after tiny_model set ICLR_CACHE_DIR, which
    the workers inherit); each run joins it instead of starting its own."""
    started = connect(RayOptions())
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def pq_dir(tmp_path_factory):
    return write_parquet(tmp_path_factory.mktemp("ds") / "pq", real_rows())


def load_rows(folder):
    return datasets.load_dataset(str(folder), split="train").data.table.to_pylist()


def assert_same_records(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) and len(a) > 30  # enough records to compare (36 with titles joined to their paragraphs)
    for x, y in zip(a, b):
        assert {k: v for k, v in x.items() if k != "entropy_bits"} == {k: v for k, v in y.items() if k != "entropy_bits"}
        assert (x.get("entropy_bits") is None) == (y.get("entropy_bits") is None)
        if x.get("entropy_bits") is not None:
            assert math.isclose(x["entropy_bits"], y["entropy_bits"], abs_tol=TOL)


def test_two_workers_score_and_prune_like_the_local_engine(tmp_path, pq_dir, tiny_model, cluster, capsys):
    common = ["--dataset", str(pq_dir), "--model", tiny_model, "--shard-rows", "2", "-q"]
    ray_args = ["--engine", "ray", "--workers", "2"]
    for engine_args, name in (([], "local"), (ray_args, "ray")):
        assert run_cli(["score", *common, *engine_args, "-o", str(tmp_path / f"{name}.jsonl")], capsys)[0] == 0
        assert run_cli(["prune", *common, *engine_args, "-o", str(tmp_path / f"{name}-pruned")], capsys)[0] == 0
    local, distributed = records((tmp_path / "local.jsonl").read_bytes()), records((tmp_path / "ray.jsonl").read_bytes())
    assert_same_records(local, distributed)
    assert sorted({r["row"] for r in distributed}) == list(range(7))
    # The tiny Llama's 512 positions leave the long DeepSeek steps unscored ("skipped").
    assert sum(r.get("entropy_bits") is not None for r in distributed) >= 30 and any(r.get("skipped") for r in distributed)
    pruned_local, pruned_ray = load_rows(tmp_path / "local-pruned"), load_rows(tmp_path / "ray-pruned")
    assert [r["id"] for r in pruned_ray] == [r["id"] for r in real_rows()]
    assert pruned_ray == pruned_local
    assert sum("[SKIP]" in (m["reasoning_content"] or "") for r in pruned_ray for m in r["messages"]) >= 5  # tau-bench steps whose titles joined their paragraph hold one block: nothing to remove


def test_one_worker_fake_scorer_is_byte_identical_on_jsonl(tmp_path, cluster, capsys):
    # The fake numbers tokens in the order one scorer first sees them, so the local run gets a
    # fresh process, as the Ray actor is.
    src = write_jsonl(tmp_path / "jl", real_rows())
    args = ["score", "--dataset", str(src), "--model", "fake", "--shard-rows", "3", "-q"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    local = subprocess.run([sys.executable, "-m", "iclr_cli", *args], capture_output=True, env=env, check=True)
    code, out, err = run_cli([*args, "--engine", "ray"], capsys)
    assert code == 0 and err == "" and local.stderr == b""
    assert out.encode() == local.stdout and len(records(out)) == 292


def test_ray_resumes_a_local_run(tmp_path, pq_dir, tiny_model, cluster, capsys, monkeypatch):
    from test_corpus import interrupted

    reference = tmp_path / "ref.jsonl"
    run_cli(["score", "--dataset", str(pq_dir), "--model", tiny_model, "--shard-rows", "2", "-q", "-o", str(reference)], capsys)
    out = tmp_path / "scores.jsonl"
    assert interrupted("score", pq_dir, out, 1, monkeypatch, tiny_model) == [0]
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", tiny_model, "--shard-rows", "2", "--engine", "ray", "--workers", "2", "-o", str(out)], capsys)
    assert code == 0 and "resuming: 1 shard(s), 2 row(s) already done" in err
    assert_same_records(records(reference.read_bytes()), records(out.read_bytes()))


def test_errors_come_back_as_on_the_local_engine(tmp_path, pq_dir, cluster, capsys):
    rows = real_rows()[:3]
    rows[1]["messages"][0]["content"] = None
    rows[1]["messages"][0]["role"] = None
    bad = write_parquet(tmp_path / "bad", rows)
    messages = []
    for engine_args in ([], ["--engine", "ray", "--workers", "2"]):
        code, _, err = run_cli(["score", "--dataset", str(bad), "--model", "fake", "--shard-rows", "1", *engine_args], capsys)
        assert code == 2
        messages.append(err.strip().splitlines()[-1])
    assert messages[0] == messages[1] == f"iclr: error: {bad} [train] row 1: field 'messages[0].role': message has no string 'role'"
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", str(tmp_path / "no-model"), "--engine", "ray"], capsys)
    assert code == 2 and "no-model" in err.strip().splitlines()[-1] and "Traceback" not in err


@pytest.mark.model
def test_real_proxy_two_workers_equal_local(tmp_path, cluster, capsys):
    """The embedded SmolLM2 proxy on the two short real exchanges (title generation, with
    reasoning_content and with inline <think>): Ray with two actors = local within 1e-6 bits."""
    rows = [r for r in real_rows() if r["id"] in ("reasoning-0", "inline-0")]
    src = write_parquet(tmp_path / "pq", rows)
    outs = []
    for engine_args in ([], ["--engine", "ray", "--workers", "2"]):
        code, out, _ = run_cli(["score", "--dataset", str(src), "--shard-rows", "1", "-q", *engine_args], capsys)
        assert code == 0
        outs.append(records(out))
    assert len(outs[0]) == len(outs[1]) > 0 and {r["trajectory"] for r in outs[1]} == {"reasoning-0", "inline-0"}
    for x, y in zip(*outs):
        assert {k: v for k, v in x.items() if k != "entropy_bits"} == {k: v for k, v in y.items() if k != "entropy_bits"}
        assert math.isclose(x["entropy_bits"], y["entropy_bits"], abs_tol=TOL)


def test_default_shards_give_every_worker_a_shard_and_progress_counts_inside_them(tmp_path, pq_dir, cluster, capsys, monkeypatch):
    from test_output_progress import trackers

    seen = trackers(monkeypatch)
    # 7 rows, 2 workers, no --shard-rows: shards of 4 rows (not one of 64), one per worker
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--engine", "ray", "--workers", "2", "-o", str(tmp_path / "s.jsonl")], capsys)
    assert code == 0 and "Ray: 2 of 2 workers got shards (2 shard(s) of up to 4 rows)" in err
    work = seen[0].snapshot()
    assert (work.rows, work.rows_total, work.rows_planned) == (7, 7, 7)
    assert work.steps == work.steps_total > 7 and work.tokens == work.tokens_total > 1000
    # one shard for two workers: said, with what to do
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--engine", "ray", "--workers", "2", "--shard-rows", "64", "-o", str(tmp_path / "t.jsonl")], capsys)
    assert code == 0 and "1 of 2 Ray workers got a shard: 7 row(s) in 1 shard(s) of up to 64 rows" in " ".join(err.split())


def test_local_cluster_workers_run_at_normal_priority_and_wait_passively(cluster):
    def probe():
        return os.nice(0), os.environ.get("OMP_WAIT_POLICY")

    assert ray.get(ray.remote(probe).remote()) == (os.nice(0), "PASSIVE")
