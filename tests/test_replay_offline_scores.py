"""Replay and offline scoring agree (docs/replay.md, ``block_scores.jsonl``): ``iclr score`` on a replay's saved
``generated.json`` (messages and the tool definitions beside them) gives the proxy the text it
saw online, so it reproduces ``block_scores.jsonl`` within 1e-3 bits.

``generated.json`` is the file to score: it holds the reasoning as generated, which is what the
scorer saw for each step (earlier steps are compressed again, identically, by the online loop
of ``iclr score``). ``trajectory.json`` holds the already compressed history, whose blocks are
``[SKIP]`` markers and cannot be scored as they were.
"""

from __future__ import annotations

import json

import pytest

from format_helpers import run_cli
from replay_fixtures import call, completion, fake_openai, make_session, submit
from tiny_llama import build_tiny_llama

from iclr_cli.replay.suite import load_tasks

TOL = 1e-3
STEP1 = "Plan: read the seed file first.\n\nThe file may be empty, then write hi.\n\nI should not touch other files.\n\nAfter that I list the folder.\n\nThen I submit the answer."
STEP2 = "The file is written.\n\nListing shows out.txt and seed.txt.\n\nNothing else changed.\n\nReady to submit now."


@pytest.fixture
def hello_task(tmp_path):
    folder = tmp_path / "tasks" / "hello"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "seed.txt").write_text("seed\n")
    (folder / "task.toml").write_text('domain = "office"\ndescription = "Write hi"\ninstruction = "Write hi into out.txt."\n')
    (folder / "check.py").write_text("def check(ctx):\n    return 1.0\n")
    return load_tasks(tmp_path / "tasks")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def replay(tmp_path, tasks, proxy_model: str) -> tuple[dict, list[dict]]:
    script = [
        completion(None, [call("bash", {"command": "echo hi > out.txt"})], reasoning_content=STEP1),
        completion(None, [call("bash", {"command": "ls"})], reasoning_content=STEP2),
        submit("done"),
    ]
    with fake_openai(script) as srv:
        make_session(tmp_path, srv.url, tasks=tasks, variants=["iclr"], proxy_model=proxy_model).run(1)
    [record] = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    online = [json.loads(line) for line in (tmp_path / "out" / record["block_scores"]).read_text().splitlines()]
    return record, online


def offline(capsys, path, model: str) -> list[dict]:
    out = path.with_name(path.stem + ".scores.jsonl")
    # the replay ran in float32 (make_session's options): the same precision reproduces it within 1e-3 bits
    code, _, err = run_cli(capsys, "score", str(path), "--model", model, "--dtype", "float32", "-o", str(out), "-q")
    assert code == 0, err
    return [json.loads(line) for line in out.read_text().splitlines()]


def assert_same_scores(online: list[dict], scored: list[dict]) -> None:
    key = lambda r: (r["step"], r["block"])  # noqa: E731
    assert [key(r) for r in scored] == [key(r) for r in online]
    for a, b in zip(online, scored):
        assert (b["text"], b["n_tokens"], b["selected"], b["context_tokens"]) == (a["text"], a["n_tokens"], a["selected"], a["context_tokens"])
        assert abs(b["entropy_bits"] - a["entropy_bits"]) <= TOL, (key(a), a["entropy_bits"], b["entropy_bits"])


def check_reproduced(tmp_path, capsys, tasks, model: str) -> None:
    record, online = replay(tmp_path, tasks, model)
    assert {r["step"] for r in online} == {0, 1} and sum(r["selected"] for r in online) == 4 + 3
    generated = tmp_path / "out" / record["generated"]
    saved = json.loads(generated.read_text())
    assert [t["function"]["name"] for t in saved["tools"]] == ["bash", "read_file", "write_file", "submit"]
    assert_same_scores(online, offline(capsys, generated, model))
    # the tools part matters: the same file without it scores differently
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"messages": saved["messages"]}))
    without = offline(capsys, bare, model)
    assert max(abs(a["entropy_bits"] - b["entropy_bits"]) for a, b in zip(online, without)) > TOL


def test_score_of_saved_run_reproduces_block_scores_tiny_llama(tmp_path, capsys, hello_task, tiny_dir):
    check_reproduced(tmp_path, capsys, hello_task, str(tiny_dir))


@pytest.mark.model
def test_score_of_saved_run_reproduces_block_scores_real_proxy(tmp_path, capsys, hello_task):
    pytest.importorskip("torch")
    check_reproduced(tmp_path, capsys, hello_task, "smollm2")
