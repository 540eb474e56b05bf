"""``iclr formats``: list the transcript formats iclr reads and writes."""

from __future__ import annotations


def formats() -> None:
    """List the supported formats, one per line: name, then a description."""
    from iclr_cli.formats import registry

    for adapter in registry.adapters():
        print(f"{adapter.name}\t{adapter.description}")
