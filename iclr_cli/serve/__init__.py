"""``iclr serve``: a proxy that applies the online write-back on the wire.

Modules, in the order a request meets them: :mod:`~iclr_cli.serve.app` (routes),
a dialect (:mod:`~iclr_cli.serve.dialect`, the interface; :mod:`~iclr_cli.serve.chat` for chat
completions, read and written by :mod:`iclr_cli.formats.openai_messages`, the same code as the
``openai`` file adapter and replay; :mod:`~iclr_cli.serve.messages` for Anthropic Messages and
:mod:`~iclr_cli.serve.responses` for OpenAI Responses, with each upstream's reasoning rule from
:mod:`iclr_cli.providers`), :mod:`~iclr_cli.serve.fingerprint` (which conversation,
which step), :mod:`~iclr_cli.serve.state` (the write-back, conversations, LRU; no wire format),
:mod:`~iclr_cli.serve.batching` (one scorer thread, batches across conversations),
:mod:`~iclr_cli.serve.eager` (a reply's step scored while the agent runs its tool),
:mod:`~iclr_cli.serve.budget` (how long a request waits for scores; steps sent late),
:mod:`~iclr_cli.serve.store` (SQLite for ``--state-dir``), :mod:`~iclr_cli.serve.upstream`
(httpx forwarding), :mod:`~iclr_cli.serve.sse` (reading relayed streams) and
:mod:`~iclr_cli.serve.stats` (``/stats``, ``/metrics``); :mod:`~iclr_cli.serve.server` puts
them together. Heavy imports happen only when serving.
"""
