"""The built-in task suite and the task folder format (docs/TASKS.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from iclr_cli.errors import InputError, UsageError
from iclr_cli.replay.suite import BUILTIN_DIR, CheckContext, load_tasks, select_tasks
from iclr_cli.replay.tools import ToolLimits, Workspace

TASKS = load_tasks(BUILTIN_DIR)


def _run(task, tmp_path: Path, *, solve: bool) -> float:
    ws = tmp_path / "ws"
    ws.mkdir()
    task.prepare(ws)
    with task.environment(ws) as env:
        submission = None
        if solve:
            script = (task.root / "solution" / "solve.sh").read_text()
            for key, value in env.items():
                if isinstance(value, str):
                    script = script.replace("{" + key + "}", value)
            out = Workspace(ws, ToolLimits(timeout_s=60)).bash(script)
            assert out.startswith("exit code: 0"), out
            answer = task.root / "solution" / "answer.txt"
            submission = answer.read_text().strip() if answer.exists() else ""
        return task.check(CheckContext(ws, submission, env, task.root))


def test_suite_has_four_domains_with_three_tasks_each():
    by_domain = {}
    for t in TASKS:
        by_domain.setdefault(t.domain, []).append(t.name)
    assert sorted(by_domain) == ["code", "office", "security", "web"]
    assert all(len(names) >= 3 for names in by_domain.values()), by_domain


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_starting_state_scores_zero(task, tmp_path):
    assert _run(task, tmp_path, solve=False) == 0.0


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_reference_solution_scores_one(task, tmp_path):
    assert _run(task, tmp_path, solve=True) == 1.0


def test_partial_credit_office_totals(tmp_path):
    [task] = select_tasks(["office-sales-totals"], None, None)
    ws = tmp_path / "ws"
    ws.mkdir()
    task.prepare(ws)
    # header right, two of four regions right, one wrong value
    (ws / "totals.csv").write_text("region,total\nEast,1151.20\nNorth,3951.87\nSouth,1.00\n")
    assert task.check(CheckContext(ws, None, {}, task.root)) == pytest.approx(0.2 + 0.8 * 2 / 4)


def test_web_instruction_gets_the_server_url(tmp_path):
    [task] = select_tasks(["web-product-price"], None, None)
    with task.environment(tmp_path) as env:
        text = task.render_instruction(env)
        assert env["url"].startswith("http://127.0.0.1:")
        assert env["url"] in text and "{url}" not in text
        import urllib.request

        page = urllib.request.urlopen(env["url"] + "/product/1042", timeout=5).read().decode()
        assert "$149.99" in page


def test_select_by_suite_and_unknown_names():
    assert {t.domain for t in select_tasks([], "web", None)} == {"web"}
    assert len(select_tasks([], "all", None)) == len(TASKS)
    with pytest.raises(UsageError, match="unknown task 'nope'"):
        select_tasks(["nope"], None, None)
    with pytest.raises(UsageError, match="unknown suite 'gardening'"):
        select_tasks([], "gardening", None)


def _write_task(folder: Path, toml: str, check: str = "def check(ctx):\n    return 1.0\n") -> Path:
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(textwrap.dedent(toml))
    (folder / "check.py").write_text(check)
    return folder


def test_user_task_folder_loads_and_checks(tmp_path):
    folder = _write_task(
        tmp_path / "tasks" / "hello",
        """
        domain = "office"
        description = "Write hello.txt"
        instruction = "Write hello.txt containing hi."
        command_timeout_s = 5
        """,
        "def check(ctx):\n    p = ctx.workspace / 'hello.txt'\n    return 1.0 if p.exists() and p.read_text().strip() == 'hi' else 0.0\n",
    )
    [task] = load_tasks(tmp_path / "tasks")
    assert (task.name, task.domain, task.command_timeout_s) == ("hello", "office", 5)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "hello.txt").write_text("hi\n")
    assert task.check(CheckContext(tmp_path / "ws", None, {}, folder)) == 1.0


def test_missing_field_names_file_and_field(tmp_path):
    _write_task(tmp_path / "t", 'domain = "code"\ninstruction = "x"\n')
    with pytest.raises(InputError) as exc:
        load_tasks(tmp_path / "t")
    assert exc.value.field == "description"
    assert exc.value.source.endswith("task.toml")


def test_checker_out_of_range_is_an_error(tmp_path):
    folder = _write_task(tmp_path / "t", 'domain = "code"\ndescription = "d"\ninstruction = "x"\n', "def check(ctx):\n    return 3\n")
    [task] = load_tasks(folder)
    with pytest.raises(ValueError, match=r"not a number in \[0, 1\]"):
        task.check(CheckContext(tmp_path, None, {}, folder))


def test_duplicate_task_names_are_refused(tmp_path):
    for sub in ("a", "b"):
        _write_task(tmp_path / sub, 'name = "same"\ndomain = "code"\ndescription = "d"\ninstruction = "x"\n')
    with pytest.raises(InputError, match="also used by"):
        load_tasks(tmp_path)
