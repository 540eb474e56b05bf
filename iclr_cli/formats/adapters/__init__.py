"""One module per on-disk format: the pattern a new format follows.

Each module here reads one format into :class:`~iclr_cli.trajectory.Trajectory` objects and
writes the edited reasoning back byte for byte, and exposes ``ADAPTER`` (a
:class:`~iclr_cli.formats.base.FormatAdapter`), listed in
:data:`iclr_cli.formats.registry._ADAPTER_MODULES`. The machinery they share (reading lines and
documents, sniffing, write-back sites, sealing, copies, usage, chat and Responses helpers) is
the kit one level up, in :mod:`iclr_cli.formats`; an adapter imports the kit, never the other
way round. docs/FORMAT.md, "Adding a format", is the checklist.

Two modules are not formats of their own: ``roo`` (Roo Code and Kilo Code extension histories,
read by ``anthropic``) and ``opencode_session`` (the session shape ``opencode`` and ``kilo``
share).
"""
