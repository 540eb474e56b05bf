"""Kilo sessions (``~/.local/share/kilo/kilo.db``, ``kilo export <sessionID>``).

Kilo (github.com/Kilo-Org/kilocode, the ``@kilocode/cli`` package) is a fork of OpenCode and
keeps OpenCode's shapes: the same ``session`` / ``message`` / ``part`` tables and the same
export JSON, read by :mod:`iclr_cli.formats.opencode`. Its ``session`` table has columns of
its own (:data:`~iclr_cli.formats.opencode.KILO_COLUMNS`), which is how its database is told
from OpenCode's; its export cannot be told apart, is detected as ``opencode`` and written back
the same way (``--format kilo`` reads it too).
"""

from __future__ import annotations

from iclr_cli.formats.database import DatabaseHead
from iclr_cli.formats.opencode import KILO_COLUMNS, OpenCodeAdapter, has_session_tables
from iclr_cli.formats.sniff import MARKER, Head, Match


class KiloAdapter(OpenCodeAdapter):
    """Kilo's database and export (module docstring)."""

    name = "kilo"
    description = "Kilo session (an OpenCode fork): `kilo export` JSON, or the database ~/.local/share/kilo/kilo.db"
    agent = "Kilo"
    export_hint = "export one session as a file with `kilo export <sessionID> > session.json`"

    def sniff(self, head: Head | bytes) -> Match | None:
        """None: an export is OpenCode's shape and is detected as ``opencode``."""
        return None

    def sniff_database(self, head: DatabaseHead) -> Match | None:
        """A match for OpenCode's tables with Kilo's own ``session`` columns."""
        if has_session_tables(head) and any(head.has("session", c) for c in KILO_COLUMNS):
            return Match(MARKER, f"an SQLite database with OpenCode's tables and Kilo's session columns ({', '.join(KILO_COLUMNS)})")
        return None


ADAPTER = KiloAdapter()
