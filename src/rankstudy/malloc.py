"""Keep freed tensor memory in the process instead of handing it back to the kernel after every tensor.

glibc's malloc serves a large request (by default above 128 KiB, growing to 32 MiB as such blocks are
freed) with a fresh ``mmap`` and gives it back with ``munmap`` when freed. A training step allocates and
frees the same large activations and gradients again and again, so every step faults each of their 4 KiB
pages in anew and the kernel zeroes them: the default study's TK step on one thread took 1.36× as long,
TKL's paper-size step (16 pairs of 2,000 tokens in one pass) 1.28× (bench/malloc.py,
bench/results/malloc.md). ``keep_freed_memory`` tells malloc to serve every request from its heap
(``M_MMAP_MAX`` = 0) and to give the heap's free top back only past ``trim_threshold_mb``
(``M_TRIM_THRESHOLD``), so freed blocks are reused: their pages stay mapped.

The cost is resident memory: a freed block stays in the process (up to the trim threshold at the top of
the heap, any amount between live blocks), so the peak RSS can exceed the largest working set: the same
for the study's models, +38 % for TKL's paper-size step. The setting changes where tensors live, not a
number they hold (tested). ``python -m rankstudy`` applies it at start; ``RANKSTUDY_MALLOC=system``
leaves malloc as it is. Only glibc has these knobs: elsewhere (macOS, musl) nothing is changed.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # mallopt parameters, glibc's malloc.h
M_MMAP_MAX = -4
TRIM_THRESHOLD_MB = 256


def _glibc():
    """The C library as a ctypes handle where it is glibc, else None. The process's own symbols
    (``CDLL(None)``, dlopen of the program) include its C library's; ``ctypes.util.find_library`` would
    run ``ldconfig`` in a subprocess, 0.1-0.2 s at the start of every job."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


def keep_freed_memory(environ=os.environ, trim_threshold_mb: int = TRIM_THRESHOLD_MB) -> str:
    """Serve large allocations from the heap and keep freed ones for reuse (see the module's docstring).
    Returns the setting in effect: "heap" (applied), "system" (opted out, or not glibc)."""
    if environ.get("RANKSTUDY_MALLOC", "heap").lower() == "system":
        return "system"
    libc = _glibc()
    if libc is None:
        return "system"
    applied = libc.mallopt(M_MMAP_MAX, 0) and libc.mallopt(M_TRIM_THRESHOLD, trim_threshold_mb << 20)
    return "heap" if applied else "system"
