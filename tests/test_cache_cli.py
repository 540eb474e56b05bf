"""``iclr cache``: the listing (kinds, entries, sizes), removal by kind and age, the proxy model
kept unless named, refusal without --yes off a terminal, and checkpoints of running commands
left alone (iclr_cli/cache_dir.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from format_helpers import run_cli
from iclr_cli import cache_dir
from iclr_cli.compress import BlockReport, StepReport
from iclr_cli.savings.cache import SavingsCache
from iclr_cli.token_accounting import ReasoningTokens

# one scored step: a checkpoint that kept none is removed when its run ends (iclr_cli.checkpoint)
STEP = ("t", 0, ["r"], StepReport("t", 0, (BlockReport(0, 0, "r", True, 1, 1.0),), ReasoningTokens(1, 1, 0, 1, 0, 0)))

DAY = 86400
NOW = time.time()


@pytest.fixture(autouse=True)
def _now():
    """Ages are relative to each test's start, not to collection: "just now" must not have
    become "1 min ago" by the time a long suite reaches this file."""
    global NOW
    NOW = time.time()


def _file(path: Path, size: int, age_days: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    t = NOW - age_days * DAY
    os.utime(path, (t, t))
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder with entries of every kind (sizes in bytes, ages in days):

    models: one model folder (6,000) + gguf-digests.json (50); prompts: aaa.pt (3,000, fresh)
    with an alias, bbb.pt (2,000, 10 days) with an alias, recent-*.json (20); checkpoints:
    old.sqlite3 (4,096, 10 days), new.sqlite3 (8,192) + -wal (1,000); savings.sqlite3 (3 rows);
    agent-clis (700, a file and a hard link to it); notes.txt (11, not iclr's).
    """
    root = tmp_path / "cache"
    monkeypatch.setenv("ICLR_CACHE_DIR", str(root))
    monkeypatch.delenv("ICLR_CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("ICLR_PROMPT_CACHE_DIR", raising=False)
    model = root / "models" / "smollm2-0ba7c6f96872"
    _file(model / "config.json", 100, 3)
    _file(model / "model.safetensors", 5000, 3)
    _file(model / "tokenizer.json", 900, 3)
    os.utime(model, (NOW - 3 * DAY, NOW - 3 * DAY))
    os.utime(root / "models", (NOW - 3 * DAY, NOW - 3 * DAY))
    _file(root / "gguf-digests.json", 50, 3)
    _file(root / "prompts" / "aaa.pt", 3000)
    _file(root / "prompts" / "t1.aaa.alias", 0)
    _file(root / "prompts" / "bbb.pt", 2000, 10)
    _file(root / "prompts" / "t2.bbb.alias", 0, 10)
    _file(root / "prompts" / "recent-0123456789abcdef.json", 20, 10)
    _file(root / "checkpoints" / "old.sqlite3", 4096, 10)  # within the 14 days a run keeps them
    _file(root / "checkpoints" / "new.sqlite3", 8192)
    _file(root / "checkpoints" / "new.sqlite3-wal", 1000)
    db = SavingsCache(root / "savings.sqlite3")
    for key in ("a", "b", "c"):
        db.put(key, [{"session": key}])
    db.close()
    _file(root / "agent-clis" / "node_modules" / "x" / "index.js", 700, 1)
    os.link(root / "agent-clis" / "node_modules" / "x" / "index.js", root / "agent-clis" / "node_modules" / "x" / "bin.js")  # counted once, as du does
    _file(root / "notes.txt", 11, 1)
    return root


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _listing(capsys) -> dict:
    code, out, err = run_cli(capsys, "cache", "list", "--json")
    assert (code, err) == (0, "")
    return {k["kind"]: k for k in json.loads(out)["kinds"]} | {"_total": json.loads(out)["total_bytes"]}


def test_list_counts_and_sizes_every_kind(cache, capsys):
    kinds = _listing(capsys)
    savings = (cache / "savings.sqlite3").stat().st_size
    got = {k: (v["entries"], v["size_bytes"]) for k, v in kinds.items() if k != "_total"}
    assert got == {"models": (1, 6050), "prompts": (2, 5020), "checkpoints": (2, 13288), "savings": (3, savings),
                   "judge": (0, 0), "agent-clis": (1, 700), "other": (1, 11)}
    assert kinds["_total"] == 6050 + 5020 + 13288 + savings + 700 + 11
    assert kinds["prompts"]["path"] == str(cache / "prompts")
    assert kinds["judge"]["exists"] is False
    assert round(kinds["checkpoints"]["last_used_unix"]) == round(NOW)
    assert round(kinds["models"]["last_used_unix"]) == round(NOW - 3 * DAY)


def test_bare_cache_prints_the_table_with_a_total(cache, capsys):
    code, out, _ = run_cli(capsys, "cache")
    assert code == 0
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]] for line in out.splitlines() if line.count("│") > 4}
    assert rows["checkpoints"][1:4] == ["2", "13.3 kB", "just now"]
    assert rows["prompts"][1:4] == ["2", "5.0 kB", "just now"]
    assert rows["models"][1:4] == ["1", "6.0 kB", "3 d ago"]
    assert rows["judge"][0].endswith("judge.sqlite3 (none)")
    assert rows["other"][1:3] == ["1", "11 B"]
    assert rows["total"][2] == cache_dir.human_size(_listing(capsys)["_total"])


def test_rm_a_kind_removes_exactly_it_and_says_what_it_freed(cache, capsys):
    before = _files(cache)
    code, out, err = run_cli(capsys, "cache", "rm", "checkpoints", "--yes")
    assert code == 0 and out == ""
    assert err.strip() == "removed 2 checkpoints (13.3 kB); freed 13.3 kB"
    assert before - _files(cache) == {"checkpoints/old.sqlite3", "checkpoints/new.sqlite3", "checkpoints/new.sqlite3-wal"}
    assert _files(cache) <= before


def test_rm_older_than_takes_only_old_entries_and_their_aliases(cache, capsys):
    before = _files(cache)
    code, _, err = run_cli(capsys, "cache", "rm", "prompts", "checkpoints", "--older-than", "7d", "--yes")
    assert code == 0
    assert before - _files(cache) == {"prompts/bbb.pt", "prompts/t2.bbb.alias", "checkpoints/old.sqlite3"}
    assert err.strip() == "removed 1 prompt state (2.0 kB), 1 checkpoint (4.1 kB); freed 6.1 kB"
    # the bookkeeping file is as old, but it goes only with the whole kind
    assert (cache / "prompts" / "recent-0123456789abcdef.json").exists()


def test_rm_all_keeps_the_model_and_what_iclr_did_not_write(cache, capsys):
    code, _, err = run_cli(capsys, "cache", "rm", "all", "--yes")
    assert code == 0, err
    assert _files(cache) == {"models/smollm2-0ba7c6f96872/config.json", "models/smollm2-0ba7c6f96872/model.safetensors",
                             "models/smollm2-0ba7c6f96872/tokenizer.json", "gguf-digests.json", "notes.txt"}
    kinds = _listing(capsys)
    assert kinds["models"]["entries"] == 1 and kinds["prompts"]["size_bytes"] == 0


def test_the_model_goes_only_when_named(cache, capsys):
    code, _, err = run_cli(capsys, "cache", "rm", "models", "--yes")
    assert code == 0
    assert err.strip() == "removed 1 model (6.0 kB); freed 6.0 kB"
    assert not any(f.startswith("models/") or f == "gguf-digests.json" for f in _files(cache))
    assert "prompts/aaa.pt" in _files(cache)


def test_without_yes_off_a_terminal_it_refuses_and_removes_nothing(cache, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    before = _files(cache)
    code, out, err = run_cli(capsys, "cache", "rm", "checkpoints", "--older-than", "1w")
    assert code == 2 and out == ""
    assert err.strip() == ("iclr: error: iclr cache rm would remove 1 checkpoint (4.1 kB) last used over 1w ago; "
                           "stdin is not a terminal to ask: add --yes (or --dry-run to list them)")
    assert _files(cache) == before


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "gone"), [("n\n", set()), ("y\n", {"agent-clis/node_modules/x/index.js", "agent-clis/node_modules/x/bin.js"})])
def test_on_a_terminal_it_asks(cache, capsys, monkeypatch, answer, gone):
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    before = _files(cache)
    code, _, err = run_cli(capsys, "cache", "rm", "agent-clis")
    assert code == 0
    assert "Remove the agent-clis folder (700 B)? [y/N]" in err
    assert before - _files(cache) == gone
    assert ("nothing removed" in err) == (not gone)


def test_dry_run_lists_and_removes_nothing(cache, capsys):
    before = _files(cache)
    code, _, err = run_cli(capsys, "cache", "rm", "prompts", "--dry-run")
    assert code == 0 and _files(cache) == before
    assert err.splitlines() == [f"would remove {cache / 'prompts' / 'aaa.pt'} (3.0 kB)",
                                f"would remove {cache / 'prompts' / 'bbb.pt'} (2.0 kB)",
                                f"would remove {cache / 'prompts' / 'recent-0123456789abcdef.json'} (20 B)",
                                "would free 5.0 kB: 2 prompt states (5.0 kB)"]


@pytest.mark.parametrize(("args", "message"), [
    (["rm", "weights", "--yes"], "iclr cache rm weights: no such kind; kinds are models, prompts, checkpoints, savings, judge, agent-clis and all (every kind but models)"),
    (["rm", "other", "--yes"], "iclr cache rm other: iclr did not write these files, so it does not remove them; look at them with 'iclr cache list'"),
    (["rm", "prompts", "--older-than", "7 days", "--yes"], "--older-than '7 days': not a duration; give a number and a unit: 30m, 12h, 7d or 2w"),
    (["path", "weights"], "iclr cache path weights: no such kind; kinds are models, prompts, checkpoints, savings, judge, agent-clis, other"),
])
def test_bad_arguments_are_usage_errors(cache, capsys, args, message):
    before = _files(cache)
    code, _, err = run_cli(capsys, "cache", *args)
    assert (code, err.strip()) == (2, f"iclr: error: {message}")
    assert _files(cache) == before


def test_ages_parse():
    assert [cache_dir.parse_age(t) for t in ("90", "30m", "12h", "7d", "2w", "1.5h")] == [90, 1800, 43200, 604800, 1209600, 5400]


def test_nothing_to_remove_says_so(cache, capsys):
    code, _, err = run_cli(capsys, "cache", "rm", "judge", "--yes")
    assert code == 0 and err.strip() == f"nothing to remove (judge) in {cache}"


def test_moved_folders_are_listed_where_they_are(cache, capsys, monkeypatch, tmp_path):
    """$ICLR_PROMPT_CACHE_DIR / $ICLR_CHECKPOINT_DIR move a kind; the same rules as the code
    that writes them (prompt_dir, Checkpoint.open); the default folders left behind are 'other'."""
    from iclr_cli.checkpoint import Checkpoint
    from iclr_cli.scoring.prompt_keys import prompt_dir

    assert cache_dir.kind_path("prompts") == prompt_dir() == cache / "prompts"
    monkeypatch.setenv("ICLR_PROMPT_CACHE_DIR", str(tmp_path / "p"))
    monkeypatch.setenv("ICLR_CHECKPOINT_DIR", str(tmp_path / "c"))
    _file(tmp_path / "p" / "ccc.pt", 123)
    assert cache_dir.kind_path("prompts") == prompt_dir()
    opened = Checkpoint.open("score", ["x.jsonl"], None, [b""], {})
    opened.put("x.jsonl", *STEP)
    opened.close(finished=False)
    assert opened.path.parent == cache_dir.kind_path("checkpoints") == tmp_path / "c"
    kinds = _listing(capsys)
    assert (kinds["prompts"]["path"], kinds["prompts"]["entries"], kinds["prompts"]["size_bytes"]) == (str(tmp_path / "p"), 1, 123)
    assert kinds["checkpoints"]["entries"] == 1
    assert kinds["other"]["entries"] == 3  # notes.txt, and prompts/ and checkpoints/ no longer used
    code, out, _ = run_cli(capsys, "cache", "path", "prompts")
    assert (code, out) == (0, f"{tmp_path / 'p'}\n")


_HOLD = """
import sys
from pathlib import Path
from iclr_cli.checkpoint import Checkpoint
from iclr_cli.compress import BlockReport, StepReport
from iclr_cli.token_accounting import ReasoningTokens
c = Checkpoint(Path(sys.argv[1]), "key", {"ratio": 0.8})
c.put("x.jsonl", "t", 0, ["r"], StepReport("t", 0, (BlockReport(0, 0, "r", True, 1, 1.0),), ReasoningTokens(1, 1, 0, 1, 0, 0)))
print("open", flush=True)
sys.stdin.readline()
c.close(finished=False)
"""


def test_a_checkpoint_open_in_a_running_command_is_kept(cache, capsys):
    """Deleting it would free nothing and lose the steps the run says it kept: it is skipped and said so; once the
    run has stopped, the same command removes it."""
    running = cache / "checkpoints" / "running.sqlite3"
    hold = subprocess.Popen([sys.executable, "-c", _HOLD, str(running)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        assert hold.stdout.readline() == "open\n"
        code, _, err = run_cli(capsys, "cache", "rm", "checkpoints", "--yes")
        assert code == 0
        assert f"warning: kept {running}: open in a running iclr command" in " ".join(err.split())
        assert err.splitlines()[-1] == "removed 2 checkpoints (13.3 kB); freed 13.3 kB"
        assert running.exists()
    finally:
        hold.stdin.write("\n")
        hold.stdin.flush()
        assert hold.wait(timeout=60) == 0
    assert cache_dir.in_use(running) is False
    code, _, err = run_cli(capsys, "cache", "rm", "checkpoints", "--yes")
    assert code == 0 and not running.exists()
    assert err.strip().startswith("removed 1 checkpoint (")


def test_a_model_conversion_under_way_is_kept(cache, capsys):
    _file(cache / "models" / ".smollm2-0ba7c6f96872-abcd" / "model.safetensors", 400)
    code, _, err = run_cli(capsys, "cache", "rm", "models", "--yes")
    assert code == 0
    assert "being written (under an hour old)" in err
    assert _files(cache) & {"models/.smollm2-0ba7c6f96872-abcd/model.safetensors", "gguf-digests.json"} == {
        "models/.smollm2-0ba7c6f96872-abcd/model.safetensors"}


def test_loading_a_cached_model_marks_its_use(tmp_path, monkeypatch):
    from iclr_cli.scoring.loading import ModelSource, ensure_folder

    folder = tmp_path / "models" / "m-0123"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        _file(folder / name, 10, 5)
    os.utime(folder, (NOW - 5 * DAY, NOW - 5 * DAY))
    assert ensure_folder(ModelSource("m", folder, gguf=tmp_path / "m.gguf")) == folder
    assert folder.stat().st_mtime > NOW - 60


def test_the_judge_cache_holds_a_lock_while_open(tmp_path):
    from iclr_cli.analysis.judge import AnswerCache

    store = AnswerCache(tmp_path / "judge.sqlite3")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_refusal_over_several_kinds_gives_each_and_the_total(cache, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    savings = cache_dir.human_size((cache / "savings.sqlite3").stat().st_size)
    total = cache_dir.human_size(5020 + 13288 + (cache / "savings.sqlite3").stat().st_size + 700)
    code, _, err = run_cli(capsys, "cache", "rm", "all")
    assert code == 2
    assert err.strip() == (f"iclr: error: iclr cache rm would remove 2 prompt states (5.0 kB), 2 checkpoints (13.3 kB), "
                           f"the savings database ({savings}), the agent-clis folder (700 B): {total} in all; "
                           "stdin is not a terminal to ask: add --yes (or --dry-run to list them)")
