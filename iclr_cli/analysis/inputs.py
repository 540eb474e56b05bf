"""The trajectories an analysis reads: files, folders, replay runs, or a dataset.

- A **file** in any format ``iclr`` reads (sniffed, or ``--format``).
- A **folder**: every file in it, recursively, in name order, that is in a format ``iclr`` reads;
  the others are listed in one warning (never silently dropped). Hidden files are skipped.
- A **replay output folder** (``iclr replay --out DIR``: ``results.jsonl`` and
  ``runs/TASK/VARIANT/seedN/``): each run's ``trajectory.json``, the conversation as the agent
  last sent it, with ``TASK`` as the trajectory's task and ``TASK/VARIANT/seedN`` as its id.
- ``--dataset SRC``: one trajectory per row, read as ``iclr score --dataset`` reads it
  (:mod:`iclr_cli.corpus`), ids ``ROW:ID``.

Each trajectory carries what ``--group-by`` may group on: its file (or ``SRC``), its id and
its task (the replay task, else the dataset's ``--task-column``, else none).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from iclr_cli.errors import InputError, UsageError
from iclr_cli.trajectory import Trajectory

GROUPINGS = ("auto", "file", "trajectory", "task")


@dataclass(frozen=True)
class Source:
    """One trajectory with where it came from: ``file`` (path or dataset) and ``task`` (or ``None``)."""

    trajectory: Trajectory
    file: str
    task: str | None = None

    def group(self, how: str) -> str:
        """The group key of ``--group-by how``: ``auto`` is the task when known, else the file.

        Raises:
            UsageError: for ``task`` when the trajectory has none, or an unknown ``how``.
        """
        if how == "auto":
            return self.task or self.file
        if how == "file":
            return self.file
        if how == "trajectory":
            return self.trajectory.id
        if how == "task":
            if self.task is None:
                raise UsageError(f"--group-by task: {self.file} has no task (replay runs and --task-column have one); use file or trajectory")
            return self.task
        raise UsageError(f"--group-by {how!r}: choose one of {', '.join(GROUPINGS)}")


@dataclass
class Read:
    """What reading found: the trajectories and the files passed over (not a known format)."""

    sources: list[Source]
    passed_over: list[str]


def read_paths(paths: Sequence[str], fmt: str | None = None, *, skip_bad_lines: bool = False) -> Read:
    """Read every path (module docstring); trajectory ids are made unique by prefixing the
    file's path where two files use the same id.

    Raises:
        InputError: a named file that cannot be read or is not a known format (with the file
            and line), or a path that does not exist.
        UsageError: no path given, or nothing found to read.
    """
    if not paths:
        raise UsageError("give trajectory files or folders, or --dataset")
    found: list[tuple[str, str | None, str | None]] = []  # (file, task, id override)
    passed: list[str] = []
    explicit: set[str] = set()
    for path in paths:
        if os.path.isdir(path):
            found.extend(_folder(path))
        elif os.path.exists(path) or path == "-":
            found.append((path, None, None))
            explicit.add(path)
        else:
            raise InputError(path, "no such file or folder")
    sources: list[Source] = []
    for file, task, ident in found:
        lenient = file not in explicit and ident is None
        docs = _documents(file, fmt, skip_bad_lines, lenient=lenient)
        if isinstance(docs, str):
            passed.append(f"{file} ({docs})")
            continue
        for traj in docs:
            if ident is not None:
                traj = replace(traj, id=ident if len(docs) == 1 else f"{ident}#{traj.id}")
            sources.append(Source(traj, file, task))
    if not sources:
        raise UsageError(f"no trajectory found in {', '.join(paths)}")
    return Read(_unique(sources), passed)


def _folder(path: str) -> list[tuple[str, str | None, str | None]]:
    root = Path(path)
    runs = root / "runs"
    if (root / "results.jsonl").is_file() and runs.is_dir():
        out = []
        for traj in sorted(runs.glob("*/*/*/trajectory.json")):
            task, variant, seed = traj.parts[-4:-1]
            out.append((str(traj), task, f"{task}/{variant}/{seed}"))
        return out
    files = []
    for base, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files.extend(os.path.join(base, n) for n in sorted(names) if not n.startswith("."))
    return [(f, None, None) for f in files]


def _documents(file: str, fmt: str | None, skip_bad_lines: bool, *, lenient: bool) -> list[Trajectory] | str:
    """The file's trajectories; with ``lenient`` (a file found in a folder) a file in no known
    format, or with no step, is passed over: the reason comes back instead. Bad records of a
    known format are errors either way."""
    from iclr_cli.formats import registry
    from iclr_cli.jsonio import read_input
    from iclr_cli.inputs import Input

    data = read_input(file)
    try:
        adapter = registry.get(fmt) if fmt else registry.detect(data, file)
    except InputError as exc:
        if not lenient:
            raise
        return exc.summary
    item = Input(file, adapter, data)
    loader = getattr(adapter, "load_chunks", None)
    docs = loader(data, file, skip_bad_lines=skip_bad_lines) if loader else [adapter.load(data, file, skip_bad_lines=skip_bad_lines)]
    trajectories = [t for doc in docs for t in doc.trajectories]
    steps = sum(len(t.steps) for t in trajectories)
    if not steps:
        if lenient:
            return f"read as {adapter.name}, but it holds no step"
        registry.require_steps(item.adapter, file, steps, len(trajectories))
    return trajectories


def _unique(sources: list[Source]) -> list[Source]:
    counts: dict[str, int] = {}
    for s in sources:
        counts[s.trajectory.id] = counts.get(s.trajectory.id, 0) + 1
    return [replace(s, trajectory=replace(s.trajectory, id=f"{s.file}:{s.trajectory.id}")) if counts[s.trajectory.id] > 1 else s
            for s in sources]


def read_dataset(src: str, split: str = "train", column: str = "messages", id_column: str = "id", *,
                 task_column: str | None = None, fmt: str | None = None, skip_bad_lines: bool = False) -> Read:
    """Every row of a dataset split as a trajectory (module docstring).

    Raises:
        InputError: a row that is not a trajectory (``SRC [split] row N: field ...``), unless
            ``skip_bad_lines`` (then it is passed over and listed).
        UsageError: a missing column or split.
    """
    from iclr_cli.corpus.codec import CellCodec
    from iclr_cli.corpus.source import ROW, DatasetSpec, peek_schema, read_shards

    spec = DatasetSpec(src, split, column, id_column)
    schema = peek_schema(spec)
    if task_column is not None and task_column not in schema.names:
        raise UsageError(f"{spec.where()}: no column {task_column!r} (--task-column); columns: {', '.join(schema.names)}")
    codec = CellCodec(spec, schema.field(column).type, fmt=fmt, skip_bad_lines=skip_bad_lines)
    sources, passed = [], []
    for table in read_shards(spec, 64):
        rows = table.column(ROW).to_pylist()
        ids = table.column(id_column).to_pylist() if id_column in table.column_names else rows
        tasks = table.column(task_column).to_pylist() if task_column else [None] * len(rows)
        for row, ident, task, value in zip(rows, ids, tasks, table.column(column).to_pylist()):
            try:
                cell = codec.read(value, row)
            except InputError as exc:
                if not skip_bad_lines:
                    raise
                passed.append(str(exc))
                continue
            for n, traj in enumerate(cell.doc.trajectories):
                name = f"{row}:{ident}" if len(cell.doc.trajectories) == 1 else f"{row}:{ident}#{n}"
                sources.append(Source(replace(traj, id=name), src, None if task is None else str(task)))
    if not sources:
        raise UsageError(f"{spec.where()}: no trajectory in the split")
    return Read(sources, passed)
