"""``iclr score/prune --dataset`` with the local engine, on a dataset folder built from the
real OpenAI-chat trajectories: records, write-back in the column's own shape, nulls, resume,
bad rows."""

from __future__ import annotations

import json
import re

import datasets
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_data import OPENAI, REAL, real_rows, records, tiny_model, write_jsonl, write_parquet  # noqa: F401 (fixture)
from iclr_cli.cli.app import main
from iclr_cli.corpus import codec
from iclr_cli.corpus.shard import ShardProcessor


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def rows():
    return real_rows()


@pytest.fixture
def pq_dir(tmp_path, rows):
    return write_parquet(tmp_path / "pq", rows)


def load_rows(folder) -> list[dict]:
    return datasets.load_dataset(str(folder), split="train").data.table.to_pylist()


def test_score_records_carry_row_and_id_and_match_the_file(tmp_path, pq_dir, rows, capsys):
    code, out, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "1", "-q"], capsys)
    assert code == 0 and err == ""
    got = records(out)
    assert [r["row"] for r in got] == sorted(r["row"] for r in got)
    assert {r["row"]: r["trajectory"] for r in got} == {i: row["id"] for i, row in enumerate(rows) if any(m["role"] == "assistant" for m in row["messages"])}
    assert {r["source"] for r in got} == {str(pq_dir)}
    # Row 0 is the tau-bench run: the same records as scoring its file (fake scorer: a first
    # shard of one row sees exactly what a fresh run on the file sees).
    code, file_out, _ = run_cli(["score", str(OPENAI / "taubench_airline_gpt5_wiki_random.json"), "--model", "fake", "-q"], capsys)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("trajectory", "row", "source")}
    assert [strip(r) for r in got if r["row"] == 0] == [strip(r) for r in records(file_out)]
    assert len([r for r in got if r["row"] == 0]) == 17  # GPT-5 summary titles joined to their paragraphs (METHOD.md, "Blocks")


def test_parquet_and_jsonl_sources_give_the_same_records(tmp_path, pq_dir, rows, capsys):
    jl_dir = write_jsonl(tmp_path / "jl", rows)
    outs = []
    for src in (pq_dir, jl_dir):
        code, out, _ = run_cli(["score", "--dataset", str(src), "--model", "fake", "--shard-rows", "3", "-q"], capsys)
        assert code == 0
        outs.append([{k: v for k, v in r.items() if k != "source"} for r in records(out)])
    assert outs[0] == outs[1] and len(outs[0]) == 292


def test_score_parquet_output_equals_jsonl(tmp_path, pq_dir, capsys):
    run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "-o", str(tmp_path / "s.jsonl"), "-q"], capsys)
    run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "-o", str(tmp_path / "s.parquet"), "-q"], capsys)
    as_jsonl = records((tmp_path / "s.jsonl").read_bytes())
    table = pq.read_table(tmp_path / "s.parquet")
    assert table.schema.field("entropy_bits").type == pa.float64() and table.schema.field("row").type == pa.int64()
    as_parquet = [{k: v for k, v in r.items() if v is not None or k in jr} for r, jr in zip(table.to_pylist(), as_jsonl)]
    assert as_parquet == as_jsonl
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pq", "s.jsonl", "s.parquet"]  # no parts left


def test_prune_writes_same_rows_in_order_with_nulls_kept(tmp_path, pq_dir, rows, capsys):
    out_dir = tmp_path / "pruned"
    code, out, err = run_cli(["prune", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "3", "-o", str(out_dir)], capsys)
    assert code == 0 and out == "" and "blocks removed" in err
    assert sorted(p.name for p in (out_dir / "data").iterdir()) == [f"train-0000{k}-of-00003.parquet" for k in range(3)]
    before, after = pq.read_table(pq_dir / "train.parquet"), datasets.load_dataset(str(out_dir), split="train").data.table
    assert after.schema.equals(before.schema)  # types, and the metadata datasets keeps
    old, new = before.to_pylist(), after.to_pylist()
    assert [r["id"] for r in new] == [r["id"] for r in old] and [r["source"] for r in new] == [r["source"] for r in old]
    edited = 0
    for o, n in zip(old, new):
        assert len(o["messages"]) == len(n["messages"])
        for mo, mn in zip(o["messages"], n["messages"]):
            assert set(mo) == set(mn)
            assert [k for k, v in mo.items() if v is None] == [k for k, v in mn.items() if v is None]
            changed = [k for k in mo if mo[k] != mn[k]]
            assert set(changed) <= {"reasoning_content", "content"}
            if changed:
                edited += 1
                assert mo["role"] == "assistant" and all("[SKIP]" in mn[k] for k in changed)
    assert edited == 10  # 4 tau-bench turns (the others hold one block once titles join their paragraphs), 3 reasoning_content and 3 <think> replies
    # tau-bench's first user message had no tool_calls: null in the dataset, null after pruning
    assert new[0]["messages"][1]["tool_calls"] is None and new[0]["messages"][1]["reasoning_content"] is None


def test_prune_row_equals_pruning_the_file(tmp_path, pq_dir, capsys):
    out_dir = tmp_path / "pruned"
    run_cli(["prune", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "1", "-o", str(out_dir), "-q"], capsys)
    pruned_file = tmp_path / "tau.json"
    run_cli(["prune", str(OPENAI / "taubench_airline_gpt5_wiki_random.json"), "--model", "fake", "-o", str(pruned_file), "-q"], capsys)
    expected = json.loads(pruned_file.read_text())[0]["traj"]
    got = load_rows(out_dir)[0]["messages"]
    # same messages; the dataset adds null fields that the file does not have
    assert [{k: v for k, v in m.items() if k in e} for m, e in zip(got, expected)] == expected


def test_jsonl_source_keeps_json_messages_and_untouched_bytes(tmp_path, rows, capsys):
    jl_dir = write_jsonl(tmp_path / "jl", rows)
    out_dir = tmp_path / "pruned"
    code, _, _ = run_cli(["prune", "--dataset", str(jl_dir), "--model", "fake", "-o", str(out_dir), "-q"], capsys)
    assert code == 0
    before = datasets.load_dataset(str(jl_dir), split="train", streaming=True)
    schema_in = next(iter(before.with_format("arrow").iter(batch_size=1))).schema
    after = pq.read_table(next((out_dir / "data").iterdir()))
    assert str(after.schema.field("messages").type) == str(schema_in.field("messages").type) == "list<item: extension<arrow.json>>"
    old = next(iter(before.with_format("arrow").iter(batch_size=100))).column("messages").to_pylist()
    new = after.column("messages").to_pylist()
    untouched = [(a, b) for ro, rn in zip(old, new) for a, b in zip(ro, rn) if json.loads(a).get("role") != "assistant"]
    assert untouched and all(a == b for a, b in untouched)  # the stored JSON text, byte for byte


def test_json_string_column_in_any_format(tmp_path, capsys):
    files = [REAL / "mini_swe_agent" / "github_issue.traj.json", REAL / "swe_agent" / "gpt4_pydicom-1458.traj", REAL / "claude_code" / "spotter_short.jsonl"]
    if not all(f.exists() for f in files):
        pytest.skip("../shared/realdata is not available")
    folder = write_parquet(tmp_path / "docs", [{"name": f.name, "doc": f.read_text(encoding="utf-8")} for f in files])
    code, out, _ = run_cli(["score", "--dataset", str(folder), "--column", "doc", "--id-column", "name", "--model", "fake", "--shard-rows", "1", "-q"], capsys)
    assert code == 0
    got = records(out)
    assert [r["trajectory"] for r in got if r["row"] == 0][0] == "github_issue.traj.json"
    code, file_out, _ = run_cli(["score", str(files[0]), "--model", "fake", "-q"], capsys)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("trajectory", "row", "source")}
    assert [strip(r) for r in got if r["row"] == 0] == [strip(r) for r in records(file_out)]

    out_dir = tmp_path / "pruned"
    run_cli(["prune", "--dataset", str(folder), "--column", "doc", "--model", "fake", "--shard-rows", "1", "-o", str(out_dir), "-q"], capsys)
    pruned = load_rows(out_dir)
    run_cli(["prune", str(files[0]), "--model", "fake", "-o", str(tmp_path / "f.json"), "-q"], capsys)
    assert pruned[0]["doc"] == (tmp_path / "f.json").read_text(encoding="utf-8")
    assert pruned[2]["doc"] == files[2].read_text(encoding="utf-8")  # signed thinking: nothing pruned, bytes kept


def test_no_id_column_uses_the_row_index(tmp_path, rows, capsys):
    folder = write_parquet(tmp_path / "noid", [{"messages": r["messages"]} for r in rows[:2]])
    code, out, _ = run_cli(["score", "--dataset", str(folder / "train.parquet"), "--model", "fake", "-q"], capsys)
    assert code == 0 and {(r["row"], r["trajectory"]) for r in records(out)} == {(0, "0"), (1, "1")}


def test_bad_rows_name_dataset_row_and_field(tmp_path, rows, capsys):
    bad = [dict(r) for r in rows[:4]]
    bad[2] = dict(bad[2], messages=[dict(m) for m in bad[2]["messages"]])
    bad[2]["messages"][1]["role"] = None
    folder = write_parquet(tmp_path / "bad", bad)
    code, out, err = run_cli(["score", "--dataset", str(folder), "--model", "fake", "--shard-rows", "2", "-o", str(tmp_path / "s.jsonl")], capsys)
    assert code == 2 and out == "" and not (tmp_path / "s.jsonl").exists()
    assert f"{folder} [train] row 2: field 'messages[1].role': message has no string 'role'" in err

    out_dir = tmp_path / "pruned"
    code, _, err = run_cli(["prune", "--dataset", str(folder), "--model", "fake", "--skip-bad-lines", "-o", str(out_dir)], capsys)
    assert code == 0 and "row 2: field 'messages[1].role'" in err
    new = load_rows(out_dir)
    assert len(new) == 4 and new[2]["messages"] == load_rows(folder)[2]["messages"]  # passed through untouched
    assert "[SKIP]" in new[1]["messages"][-1]["reasoning_content"]


def test_null_cell_and_missing_column_are_input_errors(tmp_path, rows, capsys):
    folder = write_parquet(tmp_path / "nulls", [{"id": "a", "messages": rows[1]["messages"]}, {"id": "b", "messages": None}])
    code, _, err = run_cli(["score", "--dataset", str(folder), "--model", "fake"], capsys)
    assert code == 2 and "row 1: field 'messages': is null, not a trajectory" in err
    code, _, err = run_cli(["score", "--dataset", str(folder), "--column", "conversation", "--model", "fake"], capsys)
    assert code == 2 and "no column 'conversation'" in err and "columns: id, messages" in err
    code, _, err = run_cli(["score", "--dataset", str(tmp_path / "absent"), "--model", "fake"], capsys)
    assert code == 2 and "absent" in err
    # An --id-column given by name must exist; only the default 'id' falls back to the row index.
    code, _, err = run_cli(["score", "--dataset", str(folder), "--id-column", "uid", "--model", "fake"], capsys)
    assert code == 2 and "no column 'uid' (--id-column)" in err


def test_a_run_that_finished_no_shard_does_not_block_the_corrected_command(tmp_path, rows, capsys):
    folder = write_parquet(tmp_path / "nulls", [{"id": "a", "messages": rows[1]["messages"]}, {"id": "b", "messages": None}])
    target = str(tmp_path / "s.jsonl")
    code, _, err = run_cli(["score", "--dataset", str(folder), "--model", "fake", "-o", target], capsys)
    assert code == 2 and "is null" in err
    code, out, err = run_cli(["score", "--dataset", str(folder), "--model", "fake", "--skip-bad-lines", "-o", target, "-q"], capsys)
    assert code == 0, err
    assert {r["trajectory"] for r in records(open(target).read())} == {"a"}


class Interrupt:
    """Makes ShardProcessor.process raise KeyboardInterrupt on a given shard, counting calls."""

    def __init__(self, monkeypatch, stop_at: int | None):
        self.shards: list[int] = []
        original = ShardProcessor.process

        def process(processor, table):
            shard = table.column("__iclr_shard__")[0].as_py()
            if shard == stop_at:
                raise KeyboardInterrupt
            self.shards.append(shard)
            return original(processor, table)

        monkeypatch.setattr(ShardProcessor, "process", process)


def interrupted(command: str, src, out, stop_at: int, monkeypatch, model: str = "fake") -> list[int]:
    """Run ``command`` over ``src`` into ``out`` in shards of 2 rows, with a Ctrl-C at shard
    ``stop_at``; returns the shards processed before it."""
    from iclr_cli.corpus.command import DatasetArgs, run_dataset_command
    from iclr_cli.errors import Interrupted
    from iclr_cli.pipeline import ScorerConfig
    from iclr_cli.policies import parse_variant
    from iclr_cli.render.output import Output

    with monkeypatch.context() as m:
        first = Interrupt(m, stop_at=stop_at)
        with pytest.raises(Interrupted, match="run the same command again to resume"):
            config = ScorerConfig(model)
            run_dataset_command(command, DatasetArgs(str(src), shard_rows=2), None, config.settings(parse_variant("iclr")), config, Output(None, quiet=True), target=str(out), fmt=None, skip_bad_rows=False)
    return first.shards


@pytest.mark.parametrize("target", ["scores.jsonl", "scores.parquet", "pruned"])
def test_interrupted_run_resumes_and_skips_finished_shards(tmp_path, pq_dir, capsys, monkeypatch, target, tiny_model):
    # The tiny Llama, not the fake: the fake numbers tokens in the order it first sees them,
    # so its scores of a shard depend on the shards it scored before.
    command = "prune" if target == "pruned" else "score"
    args = [command, "--dataset", str(pq_dir), "--model", tiny_model, "--shard-rows", "2"]
    reference = tmp_path / f"ref-{target}"
    assert run_cli(args + ["-q", "-o", str(reference)], capsys)[0] == 0

    out = tmp_path / target
    assert interrupted(command, pq_dir, out, 2, monkeypatch, tiny_model) == [0, 1]
    assert not (out.exists() and out.is_file())  # nothing visible until the run completes
    with monkeypatch.context() as m:
        second = Interrupt(m, stop_at=None)
        code, _, err = run_cli(args + ["-o", str(out)], capsys)
    assert code == 0 and second.shards == [2, 3]
    assert "resuming: 2 shard(s), 4 row(s) already done" in err and re.search(r"trajectories\s*│\s*7\s*│", err)
    if command == "score":
        assert out.read_bytes() == reference.read_bytes()
    else:
        assert load_rows(out) == load_rows(reference)
        code, _, err = run_cli(args + ["-o", str(out)], capsys)  # complete: nothing to do
        assert code == 0 and "trajectories" in err


def test_resume_with_other_settings_is_refused(tmp_path, pq_dir, capsys, monkeypatch):
    out = tmp_path / "pruned"
    interrupted("prune", pq_dir, out, 1, monkeypatch)
    code, _, err = run_cli(["prune", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "2", "--ratio", "0.5", "-o", str(out)], capsys)
    assert code == 2 and "other settings or data (ratio)" in err
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    code, _, err = run_cli(["prune", "--dataset", str(pq_dir), "--model", "fake", "-o", str(tmp_path / "taken")], capsys)
    assert code == 2 and "is not the output of 'iclr prune --dataset'" in err


def test_engine_options_are_checked(pq_dir, capsys):
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--workers", "2"], capsys)
    assert code == 2 and "need --engine ray" in err
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--engine", "spark"], capsys)
    assert code == 2 and "--engine must be one of local, ray" in err
    code, _, err = run_cli(["score", "x.json", "--dataset", str(pq_dir), "--model", "fake"], capsys)
    assert code == 2 and "not both" in err
    code, _, err = run_cli(["score", "--model", "fake"], capsys)
    assert code == 2 and "--dataset" in err


def test_rebuild_keeps_stored_values_and_refuses_new_fields():
    t = pa.list_(pa.struct([("role", pa.string()), ("reasoning_content", pa.string()), ("name", pa.null())]))
    stored = [{"role": "user", "reasoning_content": None, "name": None}, {"role": "assistant", "reasoning_content": "a\n\nb", "name": None}]
    old = codec.plain(stored, t)
    new = orjson.loads(orjson.dumps(old))
    new[1]["reasoning_content"] = "[SKIP]\n\nb"
    rebuilt = codec.rebuild(new, stored, old, t, "messages")
    assert rebuilt[0] is stored[0] and rebuilt[1] == {"role": "assistant", "reasoning_content": "[SKIP]\n\nb", "name": None}
    new[1]["reasoning_details"] = []
    with pytest.raises(ValueError, match="reasoning_details in messages\\[1\\]"):
        codec.rebuild(new, stored, old, t, "messages")
    js = pa.list_(pa.json_())
    stored_js = ['{"role":"user","content":"hi"}', '{"role": "assistant", "reasoning_content": "x\\n\\ny"}']
    new_js = [json.loads(stored_js[0]), {"role": "assistant", "reasoning_content": "[SKIP]\n\ny"}]
    out = codec.rebuild(new_js, stored_js, codec.plain(stored_js, js), js, "messages")
    assert out[0] is stored_js[0] and json.loads(out[1]) == new_js[1]
    assert pa.array([out], type=codec.storage_type(js)).cast(js).type == js


def test_split_chooses_the_dataset_split_and_block_split_the_splitter(tmp_path, rows, capsys):
    with_steps = [r for r in rows if any(m["role"] == "assistant" for m in r["messages"])]
    folder = write_parquet(tmp_path / "two", with_steps[:1], "train.parquet")
    write_parquet(folder, with_steps[1:2], "test.parquet")
    code, out, _ = run_cli(["score", "--dataset", str(folder), "--split", "test", "--model", "fake", "-q"], capsys)
    assert code == 0 and {r["trajectory"] for r in records(out)} == {with_steps[1]["id"]}
    code, out, _ = run_cli(["score", "--dataset", str(folder), "--model", "fake", "-q"], capsys)
    assert code == 0 and {r["trajectory"] for r in records(out)} == {with_steps[0]["id"]}
    by_sentence = run_cli(["score", "--dataset", str(folder), "--block-split", "sentence", "--model", "fake", "-q"], capsys)
    assert by_sentence[0] == 0 and len(records(by_sentence[1])) == 65 > len(records(out)) == 17
    # --split was the block splitter before: such a value without --dataset is refused, not ignored.
    code, _, err = run_cli(["score", str(OPENAI / "taubench_airline_gpt5_wiki_random.json"), "--split", "line", "--model", "fake"], capsys)
    assert code == 2 and "--block-split" in err and "no --dataset" in err


def test_default_shard_rows_leave_no_ray_worker_idle():
    from iclr_cli.corpus.command import default_shard_rows

    assert [default_shard_rows(20, 2), default_shard_rows(200, 2), default_shard_rows(None, 2), default_shard_rows(20, 1), default_shard_rows(3, 4)] == [10, 64, 64, 64, 1]


def test_other_shard_rows_start_afresh_only_while_no_shard_is_done(tmp_path, pq_dir, capsys, monkeypatch):
    # Nothing finished: nothing to mix, so the corrected command starts over with its own size.
    out = tmp_path / "fresh.jsonl"
    assert interrupted("score", pq_dir, out, 0, monkeypatch) == []
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "3", "-o", str(out)], capsys)
    assert code == 0 and "resuming" not in err and len(records(out.read_text())) > 40
    # A finished shard of 2 rows: another size would cut rows differently, so it is refused ...
    out = tmp_path / "half.jsonl"
    assert interrupted("score", pq_dir, out, 1, monkeypatch) == [0]
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "3", "-o", str(out)], capsys)
    assert code == 2 and "other settings or data (shard_rows)" in err
    # ... and without --shard-rows the run resumes with the size it started with.
    code, _, err = run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "-o", str(out)], capsys)
    assert code == 0 and "resuming: 1 shard(s), 2 row(s) already done" in err


def test_dataset_outputs_get_the_umask_mode_like_other_outputs(tmp_path, pq_dir, capsys):
    """Atomic writes of shards and of a parquet score file use the mode a plain open gives
    (0666 less the umask), not mkstemp's 0600."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        run_cli(["prune", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "3", "-o", str(tmp_path / "pruned"), "-q"], capsys)
        run_cli(["score", "--dataset", str(pq_dir), "--model", "fake", "-o", str(tmp_path / "s.parquet"), "-q"], capsys)
    finally:
        os.umask(old)
    written = [*(tmp_path / "pruned" / "data").iterdir(), tmp_path / "s.parquet"]
    assert len(written) == 4 and {oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {"0o644"}


def test_resume_under_the_other_profile_is_refused(tmp_path, pq_dir, capsys, monkeypatch):
    """What the proxy sees (iclr_cli.scoring.profile) changes every score: a run started under
    the fast default never resumes under --exact."""
    out = tmp_path / "pruned"
    interrupted("prune", pq_dir, out, 1, monkeypatch)
    code, _, err = run_cli(["prune", "--dataset", str(pq_dir), "--model", "fake", "--shard-rows", "2", "--exact", "-o", str(out)], capsys)
    assert code == 2 and "other settings or data (max_tokens, profile, recheck_below)" in err
