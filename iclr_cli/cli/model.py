"""``iclr model``: prepare and inspect the proxy model without scoring anything."""

from __future__ import annotations

from typing import Annotated

import typer

from iclr_cli.cli import options as opt

app = typer.Typer(help="Prepare and inspect the proxy model.", no_args_is_help=True, add_completion=False)


def _say(line: object) -> None:
    """One line of data on stdout, through the one output sink."""
    from iclr_cli.render.output import Output

    Output(None).write_bytes(f"{line}\n".encode())


@app.command("prepare")
def prepare(model: opt.Model = "smollm2") -> None:
    """Make the proxy loadable offline: convert its GGUF to float32 safetensors in the cache
    (about 15 s for the embedded SmolLM2, once) and print the folder."""
    from iclr_cli.scoring.loading import ensure_folder, resolve

    _say(ensure_folder(resolve(model)))


@app.command("path")
def path(
    model: opt.Model = "smollm2",
    gguf: Annotated[bool, typer.Option("--gguf", help="Print the GGUF file the model is converted from (for llama.cpp: llama-server -m \"$(iclr model path --gguf)\").")] = False,
) -> None:
    """Print where the model's cached folder is (or would be), or with --gguf its GGUF file."""
    from iclr_cli.errors import UsageError
    from iclr_cli.scoring.loading import resolve

    source = resolve(model)
    if not gguf:
        _say(source.folder)
        return
    if source.gguf is None:
        raise UsageError(f"--model {model}: a Hugging Face folder, not a GGUF file; --gguf prints the GGUF of 'smollm2' or of a .gguf model")
    _say(source.gguf)
