"""Which torch device the proxy model runs on (``--device``), checked before anything loads.

Its own module so that the loader (:mod:`iclr_cli.scoring.loading`) and the precision choice
(:mod:`iclr_cli.scoring.precision`) both use it without importing each other. torch is
imported inside the function: importing this module costs nothing.
"""

from __future__ import annotations

from iclr_cli.errors import UsageError


def pick_device(device: str | None) -> str:
    """``device`` if given and usable, else ``cuda`` when available, else ``mps`` (Apple
    GPUs, torch's Metal backend) when available, else ``cpu``.

    MPS has not been tried on a Mac here (no such machine at hand): the scorer's operations
    are plain matmuls, softmax and indexing, all in torch's MPS coverage; ``--device cpu``
    is the way out if a torch release lacks one.

    Raises:
        UsageError: for a device string torch does not know, or a CUDA / MPS device this
            torch build or machine does not have; the message says what to do instead.
    """
    import torch

    if not device:
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if _mps_available(torch) else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"--device {device!r} is not a torch device ({exc}); use cpu, cuda, cuda:N or mps") from None
    if parsed.type == "cuda":
        if torch.version.cuda is None:
            raise UsageError(
                f"--device {device}: this torch ({torch.__version__}) is a CPU-only build without CUDA. "
                "Use --device cpu (or leave --device out), or install a CUDA build of torch in this environment"
            )
        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: torch {torch.__version__} has CUDA but sees no GPU (check the driver and CUDA_VISIBLE_DEVICES), or use --device cpu")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise UsageError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) visible (cuda:0..cuda:{torch.cuda.device_count() - 1})")
    if parsed.type == "mps" and not _mps_available(torch):
        raise UsageError(f"--device {device}: MPS is not available on this machine or torch build; use --device cpu")
    return device


def _mps_available(torch) -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())
