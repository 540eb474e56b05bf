"""Which reasoning is still needed: the paper's analysis tools on any trajectory (docs/analyze.md).

The paper's sections 3.3-3.4 and 4.3-4.4 read a frozen sensor model at every compression
boundary (the request before step k, k >= 1, 0-based):

- :mod:`~iclr_cli.analysis.patching`: activation patching, full vs deleted history;
- :mod:`~iclr_cli.analysis.features` and :mod:`~iclr_cli.analysis.probe`: a linear probe of
  the boundary's hidden states under strict task-level nested evaluation, with labels from
  :mod:`~iclr_cli.analysis.labels`;
- :mod:`~iclr_cli.analysis.externalization`: where the derived state of each reasoning block
  lives (:mod:`iclr_cli.derived_state`), joined with the labels.

:mod:`~iclr_cli.analysis.boundaries` renders the boundaries exactly as the scorer renders a
request; :mod:`~iclr_cli.analysis.sensor` runs the model (torch, imported lazily by callers).
"""
