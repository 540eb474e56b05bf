"""Reasoning parts that no conversion can carry (METHOD.md, "Provider rules")."""

from __future__ import annotations

from iclr_cli.formats.convert.pairing import refuse
from iclr_cli.trajectory import Part, Step, Trajectory, WriteBack

_REASONS = {
    WriteBack.SIGNED: "signed thinking; its signature cannot be carried and the text would pass as unsigned",
    WriteBack.OPAQUE: "encrypted reasoning item; only its summary text would remain, without encrypted_content",
    WriteBack.READ_ONLY: "redacted reasoning, or reasoning whose signature must stay with it (read-only); its payload cannot be carried",
}


def check_reasoning(traj: Trajectory, step: Step, part: Part, to: str) -> None:
    """Refuse a reasoning part whose text is not all there is to it.

    Raises:
        UsageError: for signed, opaque (encrypted) and read-only (redacted, Gemini-signed)
        reasoning.
    """
    if part.write_back in _REASONS:
        raise refuse(traj, f"step {step.index}", _REASONS[part.write_back], to)
