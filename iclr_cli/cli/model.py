"""``iclr model``: prepare and inspect the proxy model without scoring anything."""

from __future__ import annotations

import typer

from iclr_cli.cli import options as opt

app = typer.Typer(help="Prepare and inspect the proxy model.", no_args_is_help=True, add_completion=False)


@app.command("prepare")
def prepare(model: opt.Model = "smollm2") -> None:
    """Make the proxy loadable offline: convert its GGUF to float32 safetensors in the cache
    (about 15 s for the embedded SmolLM2, once) and print the folder."""
    from iclr_cli.scoring.loading import ensure_folder, resolve

    print(ensure_folder(resolve(model)))


@app.command("path")
def path(model: opt.Model = "smollm2") -> None:
    """Print where the model's cached folder is (or would be)."""
    from iclr_cli.scoring.loading import resolve

    print(resolve(model).folder)
