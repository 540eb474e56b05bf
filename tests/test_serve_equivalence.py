"""``iclr serve`` applies replay's online write-back: the upstream sees the same requests.

``replay --variant none`` through ``serve --variant iclr`` must send the upstream exactly the
request bodies that ``replay --variant iclr`` sends it directly; and the captured bodies must
have stable prefixes (request k+1 starts with request k's messages as sent upstream).
"""

from __future__ import annotations

import orjson
import pytest

from replay_fixtures import call, completion, make_session, submit
from serve_fixtures import proxy, scripted_upstream

from iclr_cli.replay.suite import load_tasks

pytest.importorskip("starlette")

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _reasoning(step: int) -> str:
    blocks = [" ".join(WORDS[(step + b + k) % len(WORDS)] for k in range(3 + b)) + f" ({step}.{b})" for b in range(5)]
    return "\n\n".join(blocks)


def _script(steps: int, field: str = "reasoning_content"):
    def reply(body, index):
        if index >= steps:
            return submit("done")
        return completion(None, [call("bash", {"command": f"echo step {index}"}, call_id=f"call_{index}")], **{field: _reasoning(index)})

    return [reply] * (steps + 1)


@pytest.fixture
def tasks(tmp_path):
    folder = tmp_path / "tasks" / "echo"
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text('domain = "code"\ndescription = "echo"\ninstruction = "Echo a few things, then submit."\n')
    (folder / "check.py").write_text("def check(ctx):\n    return 1.0\n")
    return load_tasks(tmp_path / "tasks")


def _direct(tmp_path, tasks, variant: str, field: str, steps: int) -> list[dict]:
    with scripted_upstream(_script(steps, field)) as up:
        make_session(tmp_path / "direct", up.url, tasks=tasks, variants=[variant], max_steps=steps + 2).run(1)
        return up.requests


def _through_proxy(tmp_path, tasks, variant: str, field: str, steps: int, **options):
    with scripted_upstream(_script(steps, field)) as up, proxy(up.url, variant=variant, **options) as (url, state):
        make_session(tmp_path / "proxied", url, tasks=tasks, variants=["none"], max_steps=steps + 2).run(1)
        return up.requests, state


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_replay_none_through_serve_iclr_equals_replay_iclr(tmp_path, tasks, field):
    direct = _direct(tmp_path, tasks, "iclr", field, steps=5)
    proxied, state = _through_proxy(tmp_path, tasks, "iclr", field, steps=5)
    assert len(direct) == 6
    assert proxied == direct
    # The comparison is not vacuous: later requests carry compressed reasoning.
    last = proxied[-1]["messages"]
    sent = [m[field] for m in last if m["role"] == "assistant"]
    assert all("[SKIP]" in r for r in sent)
    assert sent[0] != _reasoning(0)
    total = state.stats.total
    assert total.requests == 6 and total.steps_compressed == 5 and total.reasoning.deleted > 0
    # /stats counts removed reasoning with replay's accounting: the same numbers replay records.
    (run,) = [orjson.loads(line) for line in (tmp_path / "direct" / "out" / "results.jsonl").read_bytes().splitlines()]
    names = ("reasoning_tokens_generated", "reasoning_tokens_removed", "reasoning_tokens_kept", "skip_markers", "skip_marker_tokens")
    assert {n: total.to_record()[n] for n in names} == {n: run[n] for n in names}


def test_delete_all_through_serve_equals_replay(tmp_path, tasks):
    direct = _direct(tmp_path, tasks, "delete-all", "reasoning_content", steps=3)
    proxied, _ = _through_proxy(tmp_path, tasks, "delete-all", "reasoning_content", steps=3)
    assert proxied == direct
    assert [m.get("reasoning_content") for m in proxied[-1]["messages"] if m["role"] == "assistant"] == ["", "", ""]


def test_upstream_prefixes_never_change(tmp_path, tasks):
    proxied, _ = _through_proxy(tmp_path, tasks, "iclr", "reasoning_content", steps=5)
    for before, after in zip(proxied, proxied[1:]):
        assert after["messages"][: len(before["messages"])] == before["messages"]
    assert len(proxied[-1]["messages"]) > len(proxied[0]["messages"])
