"""Many inputs at once: which files ``prune`` and ``score`` read, and where each one's output goes.

``iclr prune DIR_OR_FILES... -o OUTDIR`` and ``iclr score DIR_OR_FILES... [-o FILE | -o DIR/]``
(docs/scoring.md, "Many files at once"):

- Folders are walked as ``iclr savings`` walks them (:func:`iclr_cli.savings.sources.discover`):
  every file in name order; a replay run's logs and copies and a session database's
  ``-wal`` / ``-shm`` / ``-journal`` files are left out with their reason; a Claude Code
  session file named alone brings its sub-agent transcripts (``<session>/subagents/``).
- Each output mirrors its input's relative path: below a folder given, its path there; a
  file given, its name; a sub-agent transcript a session file brought, its path beside that
  session (``<session>/subagents/agent-*.jsonl``), so the output folder has the agent's own layout.
- A file reached twice (a folder and a file in it) is read once, at the first path.
- Everything that could go wrong before the first output is written is refused up front:
  two inputs whose outputs would be the same file, an output that is its own input, an
  ``OUTDIR`` that is a file or an input folder, an existing read-only output (without ``--force``).
  Files below ``OUTDIR`` inside a folder walked are this command's own outputs and left out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from iclr_cli.errors import UsageError
from iclr_cli.savings.sources import Skipped, discover


@dataclass(frozen=True)
class Job:
    """One file of a run over many: ``source`` (the path to read), ``relative`` (its path
    below the output folder, ``/``-separated as the platform's), ``explicit`` (named on the
    command line: a file no format reads is an error, not a skip)."""

    source: str
    relative: str
    explicit: bool


def names_folder(output: str | None) -> bool:
    """Whether ``-o`` names a folder: an existing one, or a path ending with ``/``."""
    return output is not None and output != "-" and (output.endswith(("/", os.sep)) or os.path.isdir(output))


def is_many(inputs: Sequence[str], output: str | None) -> bool:
    """Whether a ``prune`` / ``score`` run is over many files: several inputs, a folder among
    them, or ``-o`` naming a folder. One file (or ``-``) with ``-o FILE`` is the single-file run."""
    return len(inputs) > 1 or any(p != "-" and os.path.isdir(p) for p in inputs) or names_folder(output)


def plan(inputs: Sequence[str], outdir: str | None = None) -> tuple[list[Job], list[Skipped]]:
    """The files of ``inputs`` (see the module docstring) and those left out with their reason.

    ``outdir``: the output folder, whose files are left out of the folders walked.

    Raises:
        UsageError: for ``-`` among them (standard input has no name to write it under).
        InputError: for a path that does not exist (:func:`discover`).
    """
    if "-" in inputs:
        raise UsageError("standard input ('-') cannot be one of many inputs: its output would have no name; give files or folders")
    out_real = os.path.realpath(outdir) if outdir else None
    jobs: list[Job] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    for given in inputs:
        found, left = discover([given])
        skipped.extend(left)
        folder = os.path.isdir(given)
        for cand in found:
            real = os.path.realpath(cand.path)
            if real in seen:
                continue
            seen.add(real)
            if folder and out_real and _below(real, out_real):
                skipped.append(Skipped(cand.path, f"below -o {outdir}: an output of this command"))
                continue
            base = given if folder else os.path.dirname(given)
            jobs.append(Job(cand.path, os.path.relpath(cand.path, base or "."), cand.explicit))
    return jobs, skipped


def require_jobs(jobs: Sequence[Job], skipped: Sequence[Skipped], inputs: Sequence[str]) -> None:
    """An empty folder is not a run that succeeded.

    Raises:
        UsageError: when ``jobs`` is empty, naming the inputs and the first file left out.
    """
    if not jobs:
        left = f" ({len(skipped)} left out: {skipped[0].path}: {skipped[0].reason})" if skipped else ""
        raise UsageError(f"no files to read in {', '.join(inputs)}{left}")


def targets(jobs: Sequence[Job], outdir: str, inputs: Sequence[str], *, rename=None, force: bool = False) -> list[str]:
    """The output path of each job below ``outdir`` (``rename(relative)`` when given, e.g.
    ``score``'s ``.scores.jsonl`` names), checked up front (see the module docstring).

    Raises:
        UsageError: naming the paths, for an ``outdir`` that is a file or one of the input
            folders, two jobs with the same output, an output that is its own input, or an
            existing read-only output without ``force``.
    """
    from iclr_cli.jsonio import output_path, same_file

    if os.path.exists(outdir) and not os.path.isdir(outdir):
        raise UsageError(f"-o {outdir} is a file: with several inputs or a folder, -o names a folder to write each output below")
    for given in inputs:
        if os.path.isdir(given) and os.path.realpath(given) == os.path.realpath(outdir):
            raise UsageError(f"-o {outdir} is the input folder {given}: every output would replace its input; give another -o")
    by_target: dict[str, str] = {}
    paths = []
    for job in jobs:
        target = os.path.join(outdir, rename(job.relative) if rename else job.relative)
        key = os.path.normcase(os.path.normpath(target))
        other = by_target.setdefault(key, job.source)
        if other != job.source:
            raise UsageError(f"{other} and {job.source} would both be written to {target}; prune them in separate runs, or give their folder instead")
        if same_file(target, job.source):
            raise UsageError(f"{target} is the input {job.source} itself: its output would replace it; give another -o")
        if os.path.isdir(os.path.dirname(target) or "."):
            output_path(target, force=force)  # a read-only file or a folder in the way, refused now
        paths.append(target)
    return paths


# the suffixes of a trajectory file's name that a score file's name leaves out
_COMPRESSED = (".gz", ".zst")
_TRAJECTORY = (".jsonl", ".json", ".traj")


def scores_name(relative: str) -> str:
    """The name ``score -o DIR/`` writes a file's records under: its relative path, without
    a ``.gz`` / ``.zst`` and then one ``.jsonl`` / ``.json`` / ``.traj`` suffix, plus
    ``.scores.jsonl`` (``proj/abc.jsonl.gz`` -> ``proj/abc.scores.jsonl``)."""
    stem = relative
    for suffixes in (_COMPRESSED, _TRAJECTORY):
        for suffix in suffixes:
            if stem.endswith(suffix) and len(stem) > len(suffix):
                stem = stem[: -len(suffix)]
                break
    return stem + ".scores.jsonl"


def _below(path: str, folder: str) -> bool:
    return Path(path).is_relative_to(folder)
