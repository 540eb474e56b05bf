"""Reading agent transcripts and writing their reasoning back: the kit every format shares.

The formats themselves are :mod:`iclr_cli.formats.adapters`, one module per on-disk format,
found through :mod:`iclr_cli.formats.registry`; the modules here are the machinery they use
(docs/FORMAT.md, "Adding a format").
"""
