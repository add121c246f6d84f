"""Numeric precision of training and re-ranking, from the config's ``neural.precision`` (docs/neural.md, "Precision").

- ``fp32`` (the default): nothing is entered or switched, torch runs as it always did (the study's pinned numbers).
- ``bf16``: forward passes run under ``torch.autocast(dtype=torch.bfloat16)``: linear layers, attention and
  convolutions in bfloat16. Where 8 bits of mantissa would change the result, the computation leaves autocast
  (``in_fp32``): cosine matrices (an exact-match kernel of σ = 0.001 needs cos = 1 to better than 1e-3), kernel
  pooling with its log-sums, the score heads (a bf16 score ties documents 0.4 % apart), and the losses (the
  loop casts the scores to float).
- ``tf32``: on CUDA, matrix products and cuDNN convolutions in TensorFloat-32 (10-bit mantissa products, fp32
  sums). A CPU has no TF32: there it is fp32.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, ContextManager, Iterator, TypeVar

import torch

PRECISIONS = ("fp32", "bf16", "tf32")
Function = TypeVar("Function", bound=Callable[..., Any])


def check_precision(name: str) -> str:
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {name!r}")
    return name


def autocast(precision: str, device: torch.device | str) -> ContextManager:
    """The context of a forward pass: bf16 autocast for ``bf16``, else nothing at all (fp32 stays bit for bit)."""
    if check_precision(precision) == "bf16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def tf32(precision: str, device: torch.device | str) -> Iterator[None]:
    """TF32 matrix products and convolutions while inside, for ``tf32`` on CUDA (the switches are process-wide
    and put back on exit; backward passes inside use them too); elsewhere nothing is switched."""
    if check_precision(precision) != "tf32" or torch.device(device).type != "cuda":
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _tensors(values: tuple) -> Iterator[torch.Tensor]:
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (item for item in value if isinstance(item, torch.Tensor))


def _autocast_device(values: tuple) -> str | None:
    """The device type of the first tensor among ``values`` (also inside lists and tuples) if autocast is on there."""
    tensor = next(_tensors(values), None)
    return tensor.device.type if tensor is not None and torch.is_autocast_enabled(tensor.device.type) else None


def _to_float(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_to_float(item) for item in value)
    return value


def in_fp32(function: Function) -> Function:
    """``function`` run in float32 when autocast is on for its tensors' device: autocast off inside and its
    floating-point tensor arguments (also those in lists and tuples) cast to float32. Without autocast it is
    called as it is (the fp32 path does not change)."""

    def wrapper(*args, **kwargs):
        device = _autocast_device(args + tuple(kwargs.values()))
        if device is None:
            return function(*args, **kwargs)
        with torch.autocast(device, enabled=False):
            return function(*_to_float(args), **{key: _to_float(value) for key, value in kwargs.items()})

    # name and docstring only: ``function`` may be a module (a score head), whose __dict__ is no function's
    return functools.update_wrapper(wrapper, function, updated=())  # type: ignore[return-value]
