"""The agent loop: request, run the tool calls, compress the completed step, repeat.

Plain control flow in the style of mini-swe-agent's default agent: every way a run ends is an
exception that carries its message (:class:`Submitted`, :class:`StepLimit`,
:class:`ApiFailure`, :class:`Interrupted`), caught once in :meth:`Agent.run`.

Actions come from native ``tool_calls``; when a reply has none, tool calls written as text
(``<tool_call>{...}</tool_call>``, a bare JSON call, or a fenced bash or python block) are
accepted too and answered with a user message, since small local models often cannot emit
native calls. Then the text before the call is the THOUGHT, which is reasoning (METHOD.md,
"Objects": SWE-agent thoughts; the same rule as the mini-swe-agent adapter) and is
compressed like any other reasoning, unless the reply also carried a reasoning field.
A reply with no action at all is answered with a note asking for one; it counts as a step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from iclr_cli.replay.accounting import Usage
from iclr_cli.replay.client import ApiError, ChatClient
from iclr_cli.replay.history import History
from iclr_cli.replay.provider import read_reply, to_wire
from iclr_cli.replay.tools import TOOL_SPECS, Workspace, cap, parse_text_calls

NO_ACTION = "No tool call found in your reply. Use one of the tools (bash, read_file, write_file), or call submit when the task is done."


class AgentExit(Exception):
    """A run ended; ``status`` is what results.jsonl records, the message says why."""

    status = "ended"


class Submitted(AgentExit):
    status = "submitted"


class StepLimit(AgentExit):
    status = "step_limit"


class ApiFailure(AgentExit):
    status = "error"


class Interrupted(AgentExit):
    """The replay is stopping (Ctrl-C); the run is not recorded and reruns on resume."""

    status = "interrupted"


@dataclass(frozen=True)
class AgentConfig:
    """How the agent runs.

    Attributes:
        max_steps: assistant turns before the run stops with ``step_limit``.
        tool_protocol: ``native`` (tools sent as OpenAI function tools; text calls still
            accepted) or ``text`` (no ``tools`` field; the protocol is explained in the prompt).
        reasoning_style: how reasoning is sent back (:data:`iclr_cli.replay.provider.STYLES`),
            or ``auto``: the way the provider returned it.
        send_seed: send the run's seed as the request ``seed``, so that at a temperature
            above 0 the variants of one seed sample alike until their histories differ.
    """

    max_steps: int = 30
    tool_protocol: str = "native"
    reasoning_style: str = "auto"
    send_seed: bool = False


@dataclass(frozen=True)
class RequestRecord:
    """One agent request, for the per-request usage log.

    ``step`` is the 0-based step the request produced; ``messages`` the number of messages
    sent; ``wall_s`` seconds including retries.
    """

    step: int
    messages: int
    usage: Usage
    raw_usage: dict | None
    finish_reason: str | None
    wall_s: float


@dataclass
class Outcome:
    """How a run ended: ``status`` (submitted, step_limit, error), a message, the submitted
    answer (``None`` when the agent never submitted) and every request made."""

    status: str
    message: str
    submission: str | None
    requests: list[RequestRecord] = field(default_factory=list)


class Agent:
    """Drives one task run; see the module docstring.

    ``on_request`` is called after every request (progress, live logs); ``should_stop`` is
    asked before every request and ends the run with :class:`Interrupted` when it says so.
    """

    def __init__(
        self,
        client: ChatClient,
        history: History,
        workspace: Workspace,
        config: AgentConfig = AgentConfig(),
        on_request: Callable[[RequestRecord], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ):
        self.client = client
        self.history = history
        self.workspace = workspace
        self.config = config
        self.on_request = on_request
        self.should_stop = should_stop
        self.style: str | None = None if config.reasoning_style == "auto" else config.reasoning_style
        self.requests: list[RequestRecord] = []
        self.submission: str | None = None

    def run(self) -> Outcome:
        """Step until the run ends; never raises for the endings listed in the module docstring."""
        try:
            while True:
                self.step()
        except AgentExit as exc:
            return Outcome(exc.status, str(exc), self.submission, self.requests)

    def step(self) -> None:
        """One request and its actions, then the online compression of the completed step.

        Raises:
            StepLimit: before the request, when ``max_steps`` steps are done.
            ApiFailure: when the endpoint fails after its retries.
            Submitted: after the step in which the agent called ``submit``.
        """
        n = len(self.history.entries)
        if self.should_stop is not None and self.should_stop():
            raise Interrupted("the replay was interrupted")
        if n >= self.config.max_steps:
            raise StepLimit(f"reached the limit of {self.config.max_steps} steps without submitting")
        messages = to_wire(self.history.request_messages(), self.style)
        tools = TOOL_SPECS if self.config.tool_protocol == "native" else None
        start = time.monotonic()
        try:
            response = self.client.complete(messages, tools, seed=self.history.seed if self.config.send_seed else None)
        except ApiError as exc:
            raise ApiFailure(str(exc)) from exc
        record = RequestRecord(n, len(messages), response.usage, response.raw_usage, response.finish_reason, time.monotonic() - start)
        self.requests.append(record)
        if self.on_request is not None:
            self.on_request(record)

        assistant, style = read_reply(response.message)
        if self.style is None and style is not None:
            self.style = style
        observations, submitted = self._act(assistant, response.finish_reason)
        self.history.complete_step(assistant, observations)
        if submitted is not None:
            self.submission = submitted
            raise Submitted(f"submitted after {n + 1} steps")

    def _act(self, assistant: dict, finish_reason: str | None) -> tuple[list[dict], str | None]:
        limit = self.workspace.limits.output_cap
        submitted = None
        observations: list[dict] = []
        for call in assistant.get("tool_calls") or []:
            result = self.workspace.call(call["function"]["name"], call["function"]["arguments"])
            submitted = result.submitted if result.submitted is not None else submitted
            observations.append({"role": "tool", "tool_call_id": call["id"], "content": cap(result.text, limit)})
        if observations:
            return observations, submitted
        content = assistant.get("content") or ""
        found = parse_text_calls(content)
        if found.calls and "reasoning_content" not in assistant and content[: found.start].strip():
            # The text before a text-encoded call is the THOUGHT (METHOD.md: SWE-agent
            # thoughts are reasoning); it goes back as the prefix of content ("thought" style).
            assistant["reasoning_content"], assistant["content"] = content[: found.start], content[found.start :]
            if self.style is None:
                self.style = "thought"
        texts = []
        for name, args in found.calls:
            result = self.workspace.call(name, args)
            submitted = result.submitted if result.submitted is not None else submitted
            texts.append(f"[{name} result]\n{cap(result.text, limit)}")
        if not texts:
            cut = " Your reply was cut at the output token limit." if finish_reason == "length" else ""
            texts.append(NO_ACTION + cut)
        return [{"role": "user", "content": "\n\n".join(texts)}], submitted
