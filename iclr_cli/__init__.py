"""iclr: online reasoning compression for long-horizon LLM agents.

Implements ICLR ("When Can Agents Forget Their Reasoning?", arXiv 2609.29875) as specified in
the project's METHOD.md: reasoning blocks of each completed agent step are scored by mean token
entropy (bits) under a frozen proxy LM, the lowest-entropy ``floor(rho * N)`` are replaced by
``[SKIP]``, and the compressed history is written back for every later request.

Importing this package never imports torch; only :mod:`iclr_cli.scoring.transformers_scorer`
does, lazily.
"""

__version__ = "0.1.0"
