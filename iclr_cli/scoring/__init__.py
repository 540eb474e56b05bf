"""Proxy-model scoring: the :class:`~iclr_cli.scoring.base.Scorer` interface and its engines.

``base`` and ``window`` are pure Python; ``transformers_scorer`` and ``loading`` import torch
only when a scorer is built; ``fake`` is a deterministic scorer for tests and dry runs.
:func:`build_scorer` and :func:`load_tokenizer` pick one by ``--model`` name.
"""

from iclr_cli.scoring.factory import build_scorer, load_tokenizer

__all__ = ["build_scorer", "load_tokenizer"]
