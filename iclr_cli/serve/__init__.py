"""``iclr serve``: an OpenAI-compatible proxy that applies the online write-back on the wire.

Modules, in the order a request meets them: :mod:`~iclr_cli.serve.app` (routes),
:mod:`~iclr_cli.serve.fingerprint` (which conversation, which step),
:mod:`~iclr_cli.serve.state` (the write-back, conversations, LRU),
chat messages <-> Trajectory through :mod:`iclr_cli.formats.openai_messages` (the same
reading and write-back as the ``openai`` file adapter and replay),
:mod:`~iclr_cli.serve.batching` (one scorer thread, batches across conversations),
:mod:`~iclr_cli.serve.store` (SQLite for ``--state-dir``), :mod:`~iclr_cli.serve.upstream`
(httpx forwarding) and :mod:`~iclr_cli.serve.stats` (``/stats``, ``/metrics``);
:mod:`~iclr_cli.serve.server` puts them together. Heavy imports happen only when serving.
"""
