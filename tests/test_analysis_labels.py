"""Boundary labels: the heuristic's four rules, labels from a file, and the cached judge."""

from __future__ import annotations

import json

import pytest

from replay_fixtures import completion, fake_openai

from iclr_cli.analysis.judge import AnswerCache, judge_labels, parse, prompt
from iclr_cli.analysis.labels import Rules, action_keys, heuristic_labels, labelled_steps, read_labels
from iclr_cli.errors import InputError, UsageError
from iclr_cli.trajectory import Part, Step, Trajectory

PLAIN = "Look at the next file."


def traj(reasonings, actions=None, tid="t"):
    actions = actions or [f'{{"command": "ls dir{i}"}}' for i in range(len(reasonings))]
    steps = tuple(Step(i, (
        Part("reasoning", r, label="reasoning"),
        Part("action", a, label="tool_call:bash"),
        Part("observation", f"out {i}", label="tool_result"),
    )) for i, (r, a) in enumerate(zip(reasonings, actions)))
    return Trajectory(tid, (Part("prompt", "Fix it.", label="user"),), steps)


def labels_of(t, **kw):
    return heuristic_labels([t], Rules(**kw))


def test_a_plain_trajectory_is_all_zero_and_the_last_step_has_no_label():
    t = traj([PLAIN] * 4)
    got = labels_of(t)
    assert sorted(got) == [("t", 0), ("t", 1), ("t", 2)]
    assert all(label.value == 0 and label.reasons == () for label in got.values())


def test_rederivation_by_ngram_overlap():
    derivation = "the config loader reads the header twice because the cache key ignores the path argument entirely"
    t = traj([derivation, PLAIN, "So again: the cache key ignores the path argument entirely, which is the bug.", PLAIN])
    got = labels_of(t)
    assert got[("t", 0)].reasons == ("rederivation",)
    assert got[("t", 1)].value == 0  # PLAIN is re-derived by nobody


def test_more_reasoning_past_the_threshold():
    long = " ".join(["word"] * 60)
    t = traj([PLAIN, PLAIN, long, PLAIN])
    got = labels_of(t)
    assert got[("t", 0)].reasons == ("more_reasoning",) and got[("t", 1)].reasons == ("more_reasoning",)
    assert got[("t", 2)].value == 0  # nothing after it grows
    assert labels_of(t, min_words=100)[("t", 0)].value == 0


def test_replanning_phrases():
    t = traj([PLAIN, "That didn't work, let me try a different approach.", PLAIN])
    assert labels_of(t)[("t", 0)].reasons == ("replanning",)


def test_repeated_command_or_file_read():
    t = traj([PLAIN] * 4, ['{"command": "cat src/app.py"}', '{"command": "ls"}', '{"command": "head -n 5 ./src/app.py"}', '{"command": "pwd"}'])
    got = labels_of(t)
    assert got[("t", 0)].reasons == ("repeated_action",) and got[("t", 1)].reasons == ("repeated_action",)
    assert got[("t", 2)].value == 0
    assert ("read", "src/app.py") in action_keys(t.steps[2])


def test_horizon_limits_what_is_looked_at():
    t = traj([PLAIN, PLAIN, PLAIN, "Let me reconsider everything.", PLAIN])
    assert labels_of(t, horizon=3)[("t", 0)].value == 1
    assert labels_of(t, horizon=2)[("t", 0)].value == 0


def test_fenced_commands_of_text_agents_are_actions():
    step = Step(0, (Part("action", "```bash\ncat  a.py\n```", label="assistant"),))
    assert action_keys(step) == {("cmd", "cat a.py"), ("read", "a.py")}


def test_labelled_steps_need_reasoning():
    t = traj(["", PLAIN, PLAIN])
    assert labelled_steps(t) == [1]


def write(tmp_path, lines):
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_read_labels(tmp_path):
    t = traj([PLAIN] * 3)
    path = write(tmp_path, [json.dumps({"trajectory": "t", "step": 0, "label": 1}), "", json.dumps({"trajectory": "t", "step": 1, "label": False, "note": "x"})])
    got = read_labels(path, [t])
    assert {k: v.value for k, v in got.items()} == {("t", 0): 1, ("t", 1): 0}


@pytest.mark.parametrize("line, field", [
    ('{"trajectory": "t", "step": 0, "label": 2}', "label"),
    ('{"trajectory": "zzz", "step": 0, "label": 1}', "trajectory"),
    ('{"trajectory": "t", "step": 9, "label": 1}', "step"),
    ('{"step": 0, "label": 1}', "trajectory"),
])
def test_bad_label_lines_name_the_line_and_field(tmp_path, line, field):
    path = write(tmp_path, ['{"trajectory": "t", "step": 1, "label": 0}', line])
    with pytest.raises(InputError) as err:
        read_labels(path, [traj([PLAIN] * 3)])
    assert err.value.line == 2 and err.value.field == field and path in str(err.value)


def test_a_boundary_labelled_twice_is_an_error(tmp_path):
    line = '{"trajectory": "t", "step": 1, "label": 0}'
    with pytest.raises(InputError, match="twice"):
        read_labels(write(tmp_path, [line, line]), [traj([PLAIN] * 3)])


def test_judge_parse():
    assert parse("YES") == 1 and parse("no.") == 0 and parse("**Yes** because") == 1
    assert parse("maybe") is None and parse("") is None


def test_judge_parse_reads_the_answer_after_inline_reasoning():
    assert parse("<think>\nThe agent re-reads the file, so yes.\n</think>\n\nYES") == 1
    assert parse("<think>It is not needed: the answer is yes.</think>NO") == 0
    assert parse("the agent thought</think> no") == 0  # opening tag was in the prompt
    assert parse("<think>the answer is YES but I was cut") is None  # never closed: no answer


def test_judge_labels_think_wrapped_answers(tmp_path):
    t = traj(["Reason A.", "Reason B.", "Reason C."])
    script = [completion("<think>\nThey re-read it, so yes.\n</think>\n\nYES"), completion("<think>no need</think>\nNo.")]
    with fake_openai(script) as server:
        labels, asked, unparsed = judge_labels([t], model="qwen3", base_url=server.url, api_key_env=None, cache=str(tmp_path / "j.sqlite3"))
    assert asked == 2 and unparsed == []
    assert {k: v.value for k, v in labels.items()} == {("t", 0): 1, ("t", 1): 0}
    assert labels[("t", 1)].reasons == ("judge: No.",)


def test_judge_never_takes_the_answer_from_reasoning_content_and_asks_unparsed_again(tmp_path):
    t = traj(["Reason A.", "Reason B.", "Reason C."])
    cache = str(tmp_path / "j.sqlite3")
    script = [completion(None, reasoning_content="YES"), completion("NO"),
              completion("<think>Let me look at step", finish_reason="length"),  # cut while thinking
              ]
    with fake_openai(script) as server:
        labels, asked, unparsed = judge_labels([t], model="r1", base_url=server.url, api_key_env=None, cache=cache)
        assert asked == 2 and {k: v.value for k, v in labels.items()} == {("t", 1): 0}
        assert unparsed == ["t step 0: empty content"]
        # the unparsed boundary is asked again, the parsed one comes from the cache
        labels, asked, unparsed = judge_labels([t], model="r1", base_url=server.url, api_key_env=None, cache=cache, max_tokens=8)
        assert asked == 1 and len(server.requests) == 3 and server.requests[2]["max_tokens"] == 8
        assert unparsed == ["t step 0: no answer after the reasoning '<think>Let me look at step' (cut off at --judge-max-tokens 8)"]
    assert AnswerCache(cache).get("r1", prompt(t.steps, 0, 5)) is None


def test_judge_prompt_shows_the_boundary_and_later_actions_not_observations():
    t = traj(["Reason A.", "Reason B.", "Reason C."])
    text = prompt(t.steps, 0, horizon=1)
    assert "Reason A." in text and "Step 1 reasoning:\nReason B." in text and "ls dir1" in text
    assert "Reason C." not in text and "out 1" not in text
    assert "Answer YES or NO." in text


def test_judge_asks_once_then_answers_from_the_cache(tmp_path):
    t = traj(["Reason A.", "Reason B.", "Reason C."])
    script = [completion("YES"), completion("NO, it does not")]
    cache = tmp_path / "judge.sqlite3"
    with fake_openai(script) as server:
        labels, asked, unparsed = judge_labels([t], model="judge", base_url=server.url, api_key_env=None, cache=str(cache))
        assert asked == 2 and unparsed == []
        assert {k: v.value for k, v in labels.items()} == {("t", 0): 1, ("t", 1): 0}
        assert server.requests[0]["messages"][1]["content"] == prompt(t.steps, 0, 5)
        assert server.requests[0]["temperature"] == 0.0
        again, asked, _ = judge_labels([t], model="judge", base_url=server.url, api_key_env=None, cache=str(cache))
        assert asked == 0 and {k: v.value for k, v in again.items()} == {("t", 0): 1, ("t", 1): 0}
        assert len(server.requests) == 2
    # another model is another cache key
    assert AnswerCache(cache).get("other", prompt(t.steps, 0, 5)) is None


def test_judge_needs_its_options(monkeypatch):
    with pytest.raises(UsageError, match="--judge-model"):
        judge_labels([], model=None, base_url="http://x", api_key_env=None, cache=None)
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(UsageError, match="NO_SUCH_KEY_VAR"):
        judge_labels([], model="m", base_url="http://x", api_key_env="NO_SUCH_KEY_VAR", cache=None)
