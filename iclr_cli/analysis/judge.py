"""``--label judge``: an OpenAI-compatible model asked one fixed question per boundary.

The question (:data:`QUESTION`, version :data:`VERSION`) shows the judge the reasoning of the
completed step ``t`` and what the agent did in the next ``horizon`` steps (their reasoning and
actions; observations are left out, they are not the agent's), each text cut to
:data:`MAX_CHARS` characters (head and tail kept), and asks whether the later steps need that
reasoning again: re-derive its conclusions, spend substantially more reasoning on the same
problem, or explicitly change or restart the plan (the paper's target, section 3.3). The
label is 1 for an answer starting with YES, 0 for NO; any other answer leaves the boundary
unlabelled, with a warning.

The answer is the reply's ``content`` with its inline ``<think>`` elements removed
(:mod:`iclr_cli.formats.think`, the project's one parser of that markup): a model that
thinks inline (Qwen3, DeepSeek-R1 distills) writes ``<think>...</think>YES``. A separate
``reasoning_content`` field is the model's reasoning, never its answer (DeepSeek's
reasoning-model docs: "reasoning_content ... the content of the CoT", the final answer is
``content``), so a reply whose content is empty once the reasoning is removed is unparsed.

Requests go through the replay client (:mod:`iclr_cli.replay.client`: retries with backoff,
temperature 0). Answers are cached in SQLite (the project's store for small durable state)
under a hash of the model name, the version and the full prompt, so a rerun asks nothing
twice and a changed question never reuses an old answer. Only answers that parse to YES or
NO are cached: an unparsed one is asked again on the next run.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from iclr_cli.analysis.labels import Label, Labels, labelled_steps, reasoning_text
from iclr_cli.errors import UsageError
from iclr_cli.formats.think import outside_think
from iclr_cli.trajectory import Step, Trajectory

# Version of the question and of how an answer is read; part of the cache key. Version 1
# took the answer from reasoning_content when content was empty and cached unparsed
# answers, so its entries are not reused.
VERSION = "2"
MAX_CHARS = 4000
MAX_TOKENS = 8  # default output limit: the answer is one word
SYSTEM = "You label AI agent trajectories for a research analysis. Answer with exactly one word: YES or NO."
QUESTION = (
    "Question: in those later steps, does the agent need the reasoning of step {t} again? That is, does it "
    "re-derive conclusions that reasoning had already reached, spend substantially more reasoning on the same "
    "problem, or explicitly change or restart its plan? Answer YES or NO."
)


def _cut(text: str, limit: int = MAX_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def prompt(steps: Sequence[Step], t: int, horizon: int) -> str:
    """The user message for the boundary after step ``t`` (module docstring)."""
    later = []
    for s in steps[t + 1 : t + 1 + horizon]:
        text = reasoning_text(s)
        if text.strip():
            later.append(f"Step {s.index} reasoning:\n{_cut(text)}")
        for part in s.parts:
            if part.kind == "action" and part.text.strip():
                later.append(f"Step {s.index} action ({part.label or 'action'}):\n{_cut(part.text)}")
    n = min(horizon, len(steps) - t - 1)
    return (f"An AI agent works on a task in steps. At step {t} it reasoned as follows:\n\n<reasoning>\n{_cut(reasoning_text(steps[t]))}\n</reasoning>\n\n"
            f"In the next {n} step(s) it did this (reasoning and actions; tool outputs left out):\n\n<later>\n"
            + "\n\n".join(later) + "\n</later>\n\n" + QUESTION.format(t=t))


class AnswerCache:
    """Judge answers on disk: one SQLite table keyed by a hash of model, version and prompt."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path))
        # WAL: an open connection then holds a lock `iclr cache rm` finds (iclr_cli.cache_dir.in_use)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, model TEXT, answer TEXT, at REAL)")
        self._db.commit()

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\0{VERSION}\0{SYSTEM}\0{text}".encode()).hexdigest()

    def get(self, model: str, text: str) -> str | None:
        row = self._db.execute("SELECT answer FROM answers WHERE key = ?", (self.key(model, text),)).fetchone()
        return row[0] if row else None

    def put(self, model: str, text: str, answer: str) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)", (self.key(model, text), model, answer, time.time()))

    def close(self) -> None:
        self._db.close()


def parse(answer: str) -> int | None:
    """1 for YES, 0 for NO (the first word outside any ``<think>`` element, any case,
    punctuation ignored), else ``None``."""
    words = outside_think(answer).strip().split()
    first = words[0].strip(".,:;!*\"'").upper() if words else ""
    return {"YES": 1, "NO": 0}.get(first)


def shown(answer: str, limit: int = 80) -> str:
    """``answer`` on one line, cut to ``limit`` characters, quoted: for warnings."""
    flat = " ".join(answer.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


def unparsed_note(answer: str, cut: bool, max_tokens: int) -> str:
    """Why ``answer`` gave no label, for the warning: the answer itself (cut to 80
    characters), or that nothing was left outside the reasoning; and whether the reply
    stopped at the output-token limit."""
    if not answer.strip():
        note = "empty content"
    elif not outside_think(answer).strip():
        note = f"no answer after the reasoning {shown(answer)}"
    else:
        note = shown(answer)
    return note + (f" (cut off at --judge-max-tokens {max_tokens})" if cut else "")


def judge_labels(trajectories: Sequence[Trajectory], *, model: str | None, base_url: str | None, api_key_env: str | None,
                 cache: str | None, horizon: int = 5, max_tokens: int = MAX_TOKENS, client=None) -> tuple[Labels, int, list[str]]:
    """Labels from the judge for every labellable boundary; returns them, how many questions
    were sent (the others came from the cache) and the boundaries whose answer was neither YES
    nor NO (``TRAJECTORY step T: NOTE``, :func:`unparsed_note`). ``max_tokens`` is each
    request's output limit (a model that thinks before answering needs hundreds or more).
    ``client`` replaces the HTTP client (tests pass one with a fake transport).

    Raises:
        UsageError: ``--judge-model`` or ``--judge-base-url`` missing, or the key variable unset.
        ApiError: the endpoint failed after its retries.
    """
    if not model or not base_url:
        raise UsageError("--label judge needs --judge-model and --judge-base-url (an OpenAI-compatible endpoint)")
    key = "no-key"
    if api_key_env:
        key = os.environ.get(api_key_env, "")
        if not key:
            raise UsageError(f"--judge-api-key-env {api_key_env}: the variable is not set")
    from iclr_cli.replay.client import ChatClient, ClientConfig
    from iclr_cli.scoring.loading import cache_root

    chat = client or ChatClient(ClientConfig(base_url=base_url, model=model, api_key=key, temperature=0.0, max_output_tokens=max_tokens))
    store = AnswerCache(cache or cache_root() / "judge.sqlite3")
    labels: Labels = {}
    asked = 0
    unparsed: list[str] = []
    try:
        for traj in trajectories:
            for t in labelled_steps(traj):
                text = prompt(traj.steps, t, horizon)
                answer, cut = store.get(model, text), False
                if answer is None:
                    reply = chat.complete([{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}], None)
                    answer = str(reply.message.get("content") or "")
                    cut = reply.finish_reason == "length"
                    asked += 1
                    if parse(answer) is not None:
                        store.put(model, text, answer)
                value = parse(answer)
                if value is None:
                    unparsed.append(f"{traj.id} step {t}: {unparsed_note(answer, cut, max_tokens)}")
                else:
                    labels[(traj.id, t)] = Label(value, (f"judge: {outside_think(answer).strip()[:40]}",))
    finally:
        store.close()
    return labels, asked, unparsed
