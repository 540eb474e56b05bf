"""The ``iclr`` Typer application and the process entry point.

Subcommands live one per module; each is imported only when the app is built, and heavy
libraries (torch, transformers, openai) only inside the command that needs them.
Errors: :class:`~iclr_cli.errors.IclrError` subclasses print one line and exit with their
code (1 failure, 2 usage or input error, 130 interrupted); click usage errors exit 2. Ctrl-C
always exits 130 with one line on stderr: commands that write output say what was kept
(:class:`~iclr_cli.errors.Interrupted`); anywhere else the line is "iclr: interrupted".
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

import typer

# (command name, module, function or Typer sub-app). Keep in the order ``iclr --help`` should list them.
_COMMANDS: list[tuple[str, str, str]] = [
    ("score", "iclr_cli.cli.score", "score"),
    ("prune", "iclr_cli.cli.prune", "prune"),
    ("convert", "iclr_cli.cli.convert", "convert"),
    ("diff", "iclr_cli.cli.diff", "diff"),
    ("report", "iclr_cli.cli.report", "report"),
    ("savings", "iclr_cli.cli.savings", "savings"),
    ("replay", "iclr_cli.cli.replay", "replay"),
    ("serve", "iclr_cli.cli.serve", "serve"),
    ("analyze", "iclr_cli.cli.analyze", "app"),
    ("formats", "iclr_cli.cli.formats_cmd", "formats"),
    ("model", "iclr_cli.cli.model", "app"),
    ("cache", "iclr_cli.cli.cache", "app"),
]


def build_app() -> typer.Typer:
    """Build the Typer app with every subcommand registered."""
    app = typer.Typer(
        name="iclr",
        help="Online reasoning compression for long-horizon LLM agents (ICLR, arXiv 2609.29875).",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    for name, module, attr in _COMMANDS:
        target = getattr(importlib.import_module(module), attr)
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)
    return app


def _show_version(value: bool) -> None:
    if value:
        from iclr_cli import __version__

        print(f"iclr {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_show_version, is_eager=True,
                                          help="Print the version of iclr and exit.")] = False,
) -> None:
    """Online reasoning compression for long-horizon LLM agents (ICLR, arXiv 2609.29875)."""


def _click_exceptions() -> tuple[type, type, type, type]:
    """(ClickException, UsageError, Exit, Abort) of the click that Typer actually uses.

    Typer >= 0.2x bundles its own copy of click, whose exceptions are not ``click``'s; they
    are found through the classes Typer re-exports so either layout is caught.
    """
    def base(cls: type, name: str) -> type:
        return next(c for c in cls.__mro__ if c.__name__ == name)

    return base(typer.BadParameter, "ClickException"), base(typer.BadParameter, "UsageError"), typer.Exit, typer.Abort


def _interruptible() -> None:
    """Make SIGINT raise KeyboardInterrupt even when it was inherited as ignored.

    A shell starts ``iclr ... &`` with SIGINT ignored, so ``kill -INT`` (or a Ctrl-C that
    reaches the job) would be silently dropped and the run would go on to exit 0; every
    command stops cleanly on KeyboardInterrupt instead (exit 130, nothing half-written).
    """
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; never returns (exits with the command's code)."""
    from iclr_cli.errors import IclrError
    from iclr_cli.scoring.threads import choose_wait_policy

    # Before anything can import torch: its OpenMP runtime reads the wait policy when it loads.
    choose_wait_policy()
    click_error, usage_error, exit_, abort = _click_exceptions()
    _interruptible()
    app = build_app()
    from iclr_cli.errors import Interrupted

    try:
        # Typer turns a KeyboardInterrupt it sees into a *returned* 130 when not standalone.
        code = app(args=argv, standalone_mode=False, prog_name="iclr")
        if isinstance(code, int) and code:
            if code == 130:
                print("iclr: interrupted", file=sys.stderr)
            sys.exit(code)
    except exit_ as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except abort:
        print("iclr: aborted", file=sys.stderr)
        sys.exit(130)
    except click_error as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, usage_error) else exc.exit_code)
    except Interrupted as exc:
        # "interrupted after 3 trajectories ..." already says it: the word once, not twice
        said = str(exc)
        print(f"iclr: {said}" if said.startswith("interrupted") else f"iclr: interrupted: {said}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except IclrError as exc:
        print(f"iclr: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("iclr: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # `iclr score f | head` closes the pipe early; that is not a failure.
        sys.exit(0)
    sys.exit(0)
