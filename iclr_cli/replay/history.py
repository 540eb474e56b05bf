"""The live conversation, held both as messages and as an iclr :class:`Trajectory`.

P is the system prompt, the tool definitions and the task instruction; each step is one
assistant message plus the tool results (or user notes) that answered it (METHOD.md,
"Objects"). Parts are built by the OpenAI message-level API
(:mod:`iclr_cli.formats.openai_messages`), the code the ``openai`` format adapter reads saved
files with, and the run files hold the tool definitions beside the messages: ``iclr score`` on
the saved ``generated.json`` therefore scores exactly the text the proxy saw online.

Online write-back (METHOD.md, "Select and replace"): :meth:`History.complete_step` runs
:func:`iclr_cli.compress.compress_step` on the just-completed step against P and the already
compressed earlier steps, and writes the result into the step's message. The first request
is therefore uncompressed, and every later request sends the compressed history. The messages
as generated are kept apart (:meth:`History.generated_messages`) for the saved record only.

``sliding-window-K`` (paper Table 1) keeps P and only the last K steps in the request; a step
always travels with its tool results, so calls and results stay paired.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from iclr_cli.compress import CompressionResult, Settings, StepReport, compress_step
from iclr_cli.formats.openai_messages import read_messages, write_messages
from iclr_cli.policies import Variant
from iclr_cli.scoring.base import Scorer, Tokenizer
from iclr_cli.trajectory import Part, Step, Trajectory


@dataclass
class Compressor:
    """The variant and the engines that compress one step; shared by all runs of a replay.

    ``lock`` serialises scorer calls: the scorer and its prefix cache are not thread-safe.
    ``elide``: what the proxy reads of long tool outputs (:class:`iclr_cli.compress.Settings`).
    """

    variant: Variant
    scorer: Scorer | None
    tokenizer: Tokenizer
    ratio: float = 0.8
    splitter: str = "paragraph"
    elide: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, traj_id: str, seed: int, prompt: Sequence[Part], history: Sequence[Step], step: Step) -> tuple[Step, StepReport]:
        settings = Settings(self.variant, ratio=self.ratio, seed=seed, splitter=self.splitter, elide=self.elide)
        with self.lock:
            return compress_step(traj_id, prompt, history, step, settings, self.scorer, self.tokenizer)


@dataclass
class _StepEntry:
    messages: list[dict]  # assistant message (reasoning as it now stands) + observations
    generated: list[dict]  # the same messages with reasoning as the model generated it
    original: Step  # the step as generated
    step: Step  # the step as it now stands (compressed)


class History:
    """P plus completed steps, with online compression (see module docstring).

    Parts come from :func:`iclr_cli.formats.openai_messages.read_messages` and edits go back
    through :func:`~iclr_cli.formats.openai_messages.write_messages`, as for a saved file.

    Args:
        traj_id: stream id of this run (seeds ``random-R``, keys the scorer's prefix cache).
        prompt_messages: system and user messages of P.
        tools: tool definitions sent with every request (part of P for the scorer).
        compressor: the variant to apply after each step.
        seed: the run's seed.
    """

    def __init__(self, traj_id: str, prompt_messages: Sequence[dict], tools: Sequence[dict] | None, compressor: Compressor, seed: int = 0):
        self.traj_id = traj_id
        self.seed = seed
        self.compressor = compressor
        self.prompt_messages = [dict(m) for m in prompt_messages]
        self.tools = list(tools) if tools else None
        self.prompt = read_messages(self.prompt_messages, tools=self.tools, traj_id=traj_id).prompt
        self.entries: list[_StepEntry] = []
        self.reports: list[StepReport] = []

    def request_messages(self) -> list[dict]:
        """Canonical messages of the next request: P and the compressed steps (the last K
        of them for ``sliding-window-K``)."""
        entries = self.entries
        if self.compressor.variant.kind == "sliding-window":
            entries = entries[max(0, len(entries) - (self.compressor.variant.param or 1)) :]
        return [*self.prompt_messages, *(m for e in entries for m in e.messages)]

    def complete_step(self, assistant: dict, observations: Sequence[dict]) -> StepReport:
        """Add a finished step (canonical assistant message and its answers), compress its
        reasoning with the variant against P and the compressed history, and write the
        result back; returns the step's report."""
        generated = [copy.deepcopy(assistant), *(dict(o) for o in observations)]
        messages = [*self.messages(), *generated]
        traj = read_messages(messages, tools=self.tools, traj_id=self.traj_id)
        *history, step = traj.steps
        new_step, report = self.compressor(self.traj_id, self.seed, traj.prompt, history, step)
        written = write_messages(messages, traj, traj.with_steps([*history, new_step]))
        start, stop = traj.step_spans[-1]
        self.entries.append(_StepEntry(written[start:stop], generated, step, new_step))
        self.reports.append(report)
        return report

    def messages(self) -> list[dict]:
        """The whole conversation as it stands (compressed, never windowed)."""
        return [*self.prompt_messages, *(m for e in self.entries for m in e.messages)]

    def generated_messages(self) -> list[dict]:
        """The whole conversation with reasoning as generated (before any compression)."""
        return [*self.prompt_messages, *(m for e in self.entries for m in e.generated)]

    def compression_result(self) -> CompressionResult:
        """The run as an iclr :class:`CompressionResult` (original and compressed trajectory,
        one report per step), for ``iclr score``-style block records."""
        original = Trajectory(self.traj_id, self.prompt, tuple(e.original for e in self.entries), meta={"format": "openai"})
        return CompressionResult(original, original.with_steps([e.step for e in self.entries]), tuple(self.reports))
