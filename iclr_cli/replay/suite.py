"""Replay tasks: the folder format, the loader and the checker call (docs/TASKS.md).

A task is a folder::

    my-task/
      task.toml      name, domain, description, instruction (task.json works too)
      files/         starting files, copied into a fresh workspace (optional)
      check.py       check(ctx) -> float in [0, 1]; optional environment(task_dir, workspace)

``environment`` is a context manager (e.g. a local web server); what it yields is a dict
whose string values fill ``{key}`` placeholders in the instruction, and which the checker
receives as ``ctx.env``. The built-in suite lives in ``iclr_cli/replay/tasks/``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from iclr_cli.errors import InputError, UsageError

BUILTIN_DIR = Path(__file__).parent / "tasks"
DOMAINS = ("code", "office", "security", "web")
_REQUIRED = ("domain", "description", "instruction")


@dataclass(frozen=True)
class CheckContext:
    """What a checker sees: the workspace after the run, the submitted answer (``None`` when
    the agent never called submit), the environment's dict, and the task folder."""

    workspace: Path
    submission: str | None
    env: Mapping[str, object]
    task_dir: Path


@dataclass(frozen=True)
class Task:
    """One task as loaded from its folder (see module docstring).

    ``domain`` is free text; the built-in suite uses code, office, security and web.
    ``command_timeout_s`` overrides the bash time limit for this task when set.
    """

    name: str
    domain: str
    description: str
    instruction: str
    root: Path
    command_timeout_s: float | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    def prepare(self, workspace: Path) -> None:
        """Copy ``files/`` into ``workspace`` (which must exist)."""
        files = self.root / "files"
        if files.is_dir():
            shutil.copytree(files, workspace, dirs_exist_ok=True)

    @contextlib.contextmanager
    def environment(self, workspace: Path) -> Iterator[dict[str, object]]:
        """Enter the task's ``environment`` hook (or an empty one); yields its dict."""
        hook = getattr(self._module(), "environment", None)
        if hook is None:
            yield {}
            return
        with hook(self.root, workspace) as env:
            yield dict(env or {})

    def render_instruction(self, env: Mapping[str, object]) -> str:
        """The instruction with ``{key}`` replaced by the environment's string values."""
        text = self.instruction
        for key, value in env.items():
            if isinstance(value, str):
                text = text.replace("{" + key + "}", value)
        return text

    def check(self, ctx: CheckContext) -> float:
        """Run the checker.

        Raises:
            ValueError: when it returns something other than a number in [0, 1].
            Exception: whatever the checker raises.
        """
        value = self._module().check(ctx)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"task {self.name}: check() returned {value!r}, not a number in [0, 1]")
        return float(value)

    def _module(self) -> ModuleType:
        return _load_check(self.root / "check.py")


_MODULES: dict[Path, ModuleType] = {}
_MODULES_LOCK = threading.Lock()


def _load_check(path: Path) -> ModuleType:
    with _MODULES_LOCK:
        if path not in _MODULES:
            name = f"iclr_task_check_{len(_MODULES)}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise InputError(str(path), "cannot be imported")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            if not callable(getattr(module, "check", None)):
                raise InputError(str(path), "defines no check(ctx) function")
            _MODULES[path] = module
        return _MODULES[path]


def _read_spec(folder: Path) -> tuple[Path, dict]:
    toml_path, json_path = folder / "task.toml", folder / "task.json"
    if toml_path.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            return toml_path, tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise InputError(str(toml_path), f"not valid TOML: {exc}") from None
    if json_path.is_file():
        from iclr_cli.jsonio import loads

        try:
            data = loads(json_path.read_bytes())
        except ValueError as exc:
            raise InputError(str(json_path), f"not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InputError(str(json_path), "must hold a JSON object")
        return json_path, data
    raise InputError(str(folder), "no task.toml or task.json in the task folder")


def load_task(folder: Path) -> Task:
    """Read one task folder.

    Raises:
        InputError: naming the file and field for a missing or mistyped field, or a missing
            ``check.py``.
    """
    spec_path, data = _read_spec(folder)
    for key in _REQUIRED:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise InputError(str(spec_path), "missing or not a non-empty string", field=key)
    name = data.get("name", folder.name)
    if not isinstance(name, str) or not name or any(c in name for c in "/\\ \t\n"):
        raise InputError(str(spec_path), "must be a non-empty string without slashes or spaces", field="name")
    timeout = data.get("command_timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise InputError(str(spec_path), "must be a positive number of seconds", field="command_timeout_s")
    if not (folder / "check.py").is_file():
        raise InputError(str(folder), "no check.py (it must define check(ctx) -> float)")
    extra = {k: v for k, v in data.items() if k not in (*_REQUIRED, "name", "command_timeout_s")}
    return Task(name, data["domain"], data["description"].strip(), data["instruction"], folder.resolve(), timeout, extra)


def load_tasks(directory: Path) -> list[Task]:
    """Every task under ``directory`` (a task folder itself, or a folder of task folders),
    sorted by domain then name.

    Raises:
        InputError: for a bad task folder, or two tasks with one name.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(str(directory), "not a folder")
    if (directory / "task.toml").is_file() or (directory / "task.json").is_file():
        return [load_task(directory)]
    tasks = [load_task(d) for d in sorted(directory.iterdir()) if d.is_dir() and not d.name.startswith((".", "_"))]
    seen: dict[str, Path] = {}
    for t in tasks:
        if t.name in seen:
            raise InputError(str(t.root), f"task name {t.name!r} is also used by {seen[t.name]}")
        seen[t.name] = t.root
    return sorted(tasks, key=lambda t: (t.domain, t.name))


def select_tasks(names: Sequence[str], suite: str | None, directory: Path | None) -> list[Task]:
    """The tasks a replay runs: from ``directory`` (else the built-in suite), filtered by the
    ``--task`` names, or by ``--suite`` (``all`` or a domain).

    Raises:
        UsageError: for an unknown task name or suite, or an empty selection.
    """
    pool = load_tasks(directory if directory is not None else BUILTIN_DIR)
    by_name = {t.name: t for t in pool}
    if names:
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise UsageError(f"unknown task {', '.join(map(repr, unknown))}; see 'iclr replay --list-tasks'")
        return [by_name[n] for n in dict.fromkeys(names)]
    if suite is None or suite == "all":
        chosen = pool
    else:
        domains = sorted({t.domain for t in pool})
        if suite not in domains:
            raise UsageError(f"unknown suite {suite!r}; choose 'all' or a domain: {', '.join(domains)}")
        chosen = [t for t in pool if t.domain == suite]
    if not chosen:
        raise UsageError("no tasks selected")
    return chosen
