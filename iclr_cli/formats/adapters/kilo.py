"""Kilo sessions (``~/.local/share/kilo/kilo.db``, ``kilo export <sessionID>``).

Kilo (github.com/Kilo-Org/kilocode, the ``@kilocode/cli`` package) is a fork of OpenCode and
keeps OpenCode's shapes: the same ``session`` / ``message`` / ``part`` tables and the same
export JSON, read by :mod:`iclr_cli.formats.adapters.opencode`. Its database has tables (and in some
releases ``session`` columns) of its own (:func:`~iclr_cli.formats.adapters.opencode.is_kilo`), which is
how it is told from OpenCode's. Its export is told apart only by the agent that ran (Kilo's
built-in ``code``, ``ask``...); one that ran another agent is detected as ``opencode`` and read
and written back the same way.
"""

from __future__ import annotations

from iclr_cli.formats.database import DatabaseHead
from iclr_cli.formats.adapters.opencode import KILO_TABLES, OpenCodeAdapter, has_session_tables, is_kilo
from iclr_cli.formats.sniff import MARKER, Head, Match


KILO_AGENTS = frozenset({"code", "architect", "ask", "debug", "orchestrator"})
"""Kilo's built-in agents (its modes); OpenCode's are ``build`` and ``plan``."""


class KiloAdapter(OpenCodeAdapter):
    """Kilo's database and export (module docstring)."""

    name = "kilo"
    description = "Kilo session (an OpenCode fork): `kilo export` JSON, or the database ~/.local/share/kilo/kilo.db"
    agent = "Kilo"
    export_hint = "export one session as a file with `kilo export <sessionID> > session.json`"

    def sniff(self, head: Head | bytes) -> Match | None:
        """A match, one above OpenCode's, for an export whose session ran one of Kilo's own
        built-in agents (:data:`KILO_AGENTS`, the session's or its first message's ``agent``);
        any other export is OpenCode's (the two read and write alike)."""
        match = super().sniff(head)
        doc = Head.of(head).records[0] if match else None
        first = next((m for m in doc["messages"] if isinstance(m, dict)), {}) if isinstance(doc, dict) else {}
        agents = {doc["info"].get("agent"), (first.get("info") or {}).get("agent")} if isinstance(doc, dict) else set()
        if match and agents & KILO_AGENTS:
            return Match(MARKER + 1, f"a Kilo session export (an OpenCode export whose agent is Kilo's {sorted(agents & KILO_AGENTS)[0]!r})")
        return None

    def sniff_database(self, head: DatabaseHead) -> Match | None:
        """A match for OpenCode's tables with Kilo's own tables or ``session`` columns."""
        if has_session_tables(head) and is_kilo(head):
            return Match(MARKER, f"an SQLite database with OpenCode's session tables and Kilo's own ({KILO_TABLES[0]})")
        return None


ADAPTER = KiloAdapter()
