"""``iclr serve --config FILE``: the options people set once, in a TOML file.

Keys are ``iclr serve``'s long flags without the leading dashes, values of the flag's type::

    upstream = "https://api.anthropic.com/v1"
    upstream-kind = "anthropic"
    port = 8788
    state-dir = "/home/me/.local/state/iclr-serve"
    eager-scoring = false      # a --x/--no-x pair takes its first name and a boolean
    keepalive = 15

Every flag given on the command line wins over the file: the file fills click's default map
(``Context.default_map``), so click's own precedence applies (command line, then the file,
then the built-in default) and ``Context.get_parameter_source`` tells them apart
(``ParameterSource.COMMANDLINE`` against ``DEFAULT_MAP``). A key that is not such a flag, a
table or list, a boolean for a flag that is not one, or a value the flag refuses is an error
naming the file, the line and the key (exit 2); ``--config`` itself cannot be set in a file.
Read with ``tomllib`` (``tomli`` before Python 3.11), as replay's suite files are.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from iclr_cli.errors import InputError

FLAG = "--config"


def read(path: Path) -> dict:
    """The TOML table in ``path``.

    Raises:
        InputError: the file cannot be read or is not TOML.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), f"cannot read the config file ({exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), f"not valid TOML: {exc}") from None


def _line(path: Path, key: str) -> int | None:
    """The 1-based line where ``key`` is assigned in ``path`` (``None`` if not found)."""
    pattern = re.compile(r"""^\s*(?:(?:"|')?%s(?:"|')?\s*=|\[\s*%s\s*\])""" % (re.escape(key), re.escape(key)))
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((n for n, line in enumerate(lines, 1) if pattern.match(line)), None)


def _flags(command) -> dict[str, object]:
    """Long flag name without dashes -> its click parameter (the first name of a pair)."""
    out: dict[str, object] = {}
    for param in command.params:
        longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        if longs and longs[0] != FLAG and param.expose_value:
            out[longs[0][2:]] = param
    return out


def _secondary(command) -> dict[str, str]:
    """``no-x`` of a ``--x/--no-x`` pair -> ``x``, for the hint."""
    out = {}
    for param in command.params:
        longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        for other in getattr(param, "secondary_opts", ()):
            if longs and other.startswith("--"):
                out[other[2:]] = longs[0][2:]
    return out


def _coerce(param, ctx, value):
    """``value`` converted and checked as the flag would be on the command line (click's
    ``type_cast_value``; Typer's own copy of click names it ``get_runtime_param().coerce``)."""
    cast = getattr(param, "type_cast_value", None)
    if cast is not None:
        return cast(ctx, value)
    return param.get_runtime_param().coerce(value, param=param, ctx=ctx)


def default_map(ctx, path: Path) -> dict[str, object]:
    """Parameter name -> value for every key of the TOML file at ``path``, checked against
    ``ctx.command``'s options (module docstring); for ``ctx.default_map``.

    Raises:
        InputError: an unknown key, a value of the wrong kind, or one the flag refuses (the
            file, the line where the key is set, the key and why).
    """
    table = read(path)
    flags = _flags(ctx.command)
    secondary = _secondary(ctx.command)
    out: dict[str, object] = {}
    for key, value in table.items():
        line = _line(path, key)
        param = flags.get(key)
        if param is None and isinstance(value, dict):
            raise InputError(str(path), f"table [{key}]: iclr serve reads only top-level keys (its flags without the dashes)", line=line)
        if param is None:
            if key == FLAG[2:]:
                why = "a config file cannot name another one"
            elif key in secondary:
                why = f"write {secondary[key]} = false"
            else:
                close = difflib.get_close_matches(key.replace("_", "-"), flags, n=1)
                why = f"did you mean {close[0]}?" if close else f"the keys are iclr serve's flags without the dashes: {', '.join(sorted(flags))}"
            raise InputError(str(path), f"unknown key {key!r} ({why})", line=line)
        if isinstance(value, (dict, list)):
            raise InputError(str(path), f"key {key!r}: a {'table' if isinstance(value, dict) else 'list'} is not a value of --{key}", line=line)
        if isinstance(value, bool) and not getattr(param, "is_flag", False):
            raise InputError(str(path), f"key {key!r}: --{key} takes a value, not true or false", line=line)
        if getattr(param, "is_flag", False) and not isinstance(value, bool):
            raise InputError(str(path), f"key {key!r}: --{key} is a switch, so its value is true or false", line=line)
        try:
            _coerce(param, ctx, value)
        except Exception as exc:  # click's BadParameter, from the copy of click Typer uses
            message = getattr(exc, "message", None) or str(exc)
            raise InputError(str(path), f"key {key!r}: {message}", line=line) from None
        out[param.name] = value
    return out


def option_callback(ctx, value: Path | None) -> Path | None:
    """The ``--config`` option's callback (eager, so it runs before the other options are
    read): the file's values become the defaults of the flags not given."""
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **default_map(ctx, value)}
    return value


def from_file(ctx) -> tuple[list[str], list[str]]:
    """(flags whose value came from the config file, flags of the file the command line
    overrode), as long flag names without dashes, from click's parameter sources."""
    used, overridden = [], []
    for key, param in _flags(ctx.command).items():
        if ctx.default_map is None or param.name not in ctx.default_map:
            continue
        source = ctx.get_parameter_source(param.name)
        (used if source is not None and source.name == "DEFAULT_MAP" else overridden).append(key)
    return used, overridden
