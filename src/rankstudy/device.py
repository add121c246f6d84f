"""The torch device a job runs on, from the config's ``device`` setting (auto, cpu, cuda[:n])."""

from __future__ import annotations

import torch

from rankstudy.errors import StudyError


def resolve_device(name: str | torch.device) -> torch.device:
    """``"auto"``: CUDA when available, else CPU; asking for CUDA without one is an error."""
    if str(name) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise StudyError(f"unknown device {name!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise StudyError(f"unsupported device {name!r}: use auto, cpu or cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise StudyError(f"device {name!r} requested but CUDA is not available")
    return device
