"""``iclr savings``: what online write-back would have saved on sessions already recorded.

A static estimate: the recorded actions are assumed to stay the same, so trajectory
amplification (paper, section 4.2) is out of it; ``iclr replay`` measures the live figure.

- :mod:`~iclr_cli.savings.estimate`: the per-request arithmetic (pure functions);
- :mod:`~iclr_cli.savings.measure`: proxy-token counts of a compressed trajectory's steps, and
  which reasoning is sealed;
- :mod:`~iclr_cli.savings.compressed`: steps an earlier write-back already compressed, frozen;
- :mod:`~iclr_cli.savings.sources`: the files of the given paths, their dates and companions;
- :mod:`~iclr_cli.savings.plan`: the steps the scorer will be handed, counted up front;
- :mod:`~iclr_cli.savings.cache`: sessions already estimated, by file content;
- :mod:`~iclr_cli.savings.result`: one session's estimate as reported and cached;
- :mod:`~iclr_cli.savings.run`: files -> batched online compression -> session estimates.
"""
