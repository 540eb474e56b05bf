"""``iclr convert``: the command; the conversion itself is :mod:`iclr_cli.formats.convert`."""

from __future__ import annotations

from typing import Annotated

import typer

from iclr_cli.cli import options as opt


def convert(
    input: Annotated[str, typer.Argument(help="Trajectory file ('-' for stdin).", show_default=False)],
    to: Annotated[opt.ConvertTarget, typer.Option("--to", "-t", help="Target format: iclr (canonical JSONL), openai (chat messages JSONL) or anthropic (Messages JSONL).")] = opt.ICLR_TARGET,
    output: opt.Output = None,
    fmt: opt.Format = None,
    skip_bad_lines: opt.SkipBadLines = False,
    force: opt.Force = False,
    quiet: opt.Quiet = False,
) -> None:
    """Convert a trajectory file to another format, refusing conversions that would lose data.

    Output is JSONL, one trajectory per line. A refused conversion exits 2 with the first
    reason found (trajectory, step, part) and leaves the -o file untouched.
    """
    from iclr_cli.formats.convert import convert_document, reading_tracked
    from iclr_cli.inputs import open_inputs
    from iclr_cli.render.output import Output

    out = Output(output, quiet=quiet, force=force, inputs=[input])
    [item] = open_inputs([input], fmt)
    if item.chosen:
        out.info(item.chosen)
    trajectories = steps = 0
    encode = item.output_encoder()  # written in the input's encoding (UTF-16/32 with its BOM)
    with out.stream() as sink, reading_tracked():
        for doc in item.documents(skip_bad_lines=skip_bad_lines):
            for w in doc.warnings:
                out.warn(w)
            sink.write(encode(convert_document(doc, to.value)))
            trajectories += len(doc.trajectories)
            steps += sum(len(t.steps) for t in doc.trajectories)
    out.info(f"converted {trajectories} trajectories ({steps} steps) from {item.adapter.name} to {to}")
