"""``iclr replay``: live agents with online write-back, a task suite and token accounting.

Modules: ``agent`` (the loop), ``client`` (OpenAI-compatible transport), ``provider``
(reasoning write-back per provider), ``history`` (the conversation as an iclr Trajectory),
``tools`` (the agent's tools in a task workspace), ``suite`` / ``checks`` (task format and
checker helpers), ``accounting`` (API usage), ``runner`` / ``session`` (the matrix),
``summary`` (the per-variant table).
"""
