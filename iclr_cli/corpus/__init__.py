"""Trajectory datasets at corpus scale: ``iclr score/prune --dataset SRC``.

Rows flow one way, in shards of consecutive rows, and every engine runs the same code on a
shard:

    source (``datasets`` streaming, row and shard numbers added)
      -> shard (codec: cell -> Document -> online compression -> records / pruned cell)
      -> engine (``local``: one process; ``ray``: Ray Data, an actor pool of scorers)
      -> run (driver: results in row order, shard files + SQLite manifest, resume, summary)

A shard's results depend only on the shard (same trajectories batched together, same
scorer), so the engine and the number of workers do not change them.
"""
