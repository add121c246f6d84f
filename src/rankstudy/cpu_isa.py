"""The same numbers on every x86-64 machine: pin the vector instruction set the numeric libraries use.

torch (its own kernels, MKL, oneDNN) and OpenBLAS (numpy, scipy, gensim's word2vec) each pick their
kernels by the CPU: AVX-512 where the machine has it, AVX2 where not. The kernels sum in different
orders, so word vectors and trained models differ in the last bits, and training amplifies that: a
fresh default study on an AVX-512 machine (AMD EPYC Zen 4) missed 21 of the 530 cells pinned on an
AVX2 machine by more than 0.02; with every library pinned to AVX2 the same machine gave KNRM's and
CONV-KNRM's pinned cells to the last digit (docs/neural.md,
"The same numbers on every machine"; bench/cpu_isa.py measures what the pin costs).

The variables are read once, when each library loads, so ``python -m rankstudy`` sets them before any
import (``rankstudy.__main__``). A value already in the environment wins; ``RANKSTUDY_CPU_ISA=native``
leaves every library to its own choice. Only x86-64 machines with AVX2 are pinned: elsewhere (ARM, an
older x86) the variables would name kernels the CPU lacks.
"""

from __future__ import annotations

import os
import platform

AVX2_PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's own vectorised kernels
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility: one code path
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (convolutions, some matmuls)
    "OPENBLAS_CORETYPE": "Haswell",  # OpenBLAS's AVX2 kernels (numpy, scipy, gensim)
}


def has_avx2(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True on an x86-64 Linux machine whose CPU has AVX2 (elsewhere the pin is not applied)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open(cpuinfo, encoding="utf-8") as handle:
            return any(line.startswith("flags") and " avx2" in line for line in handle)
    except OSError:
        return False


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name (benchmarks state the machine they measured on)."""
    try:
        with open(cpuinfo, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pin_vector_isa(environ=os.environ, cpuinfo: str = "/proc/cpuinfo") -> dict[str, str]:
    """Set the AVX2 pins in ``environ`` where unset; the pins in effect ({} where not pinned)."""
    if environ.get("RANKSTUDY_CPU_ISA", "avx2").lower() == "native" or not has_avx2(cpuinfo):
        return {}
    for name, value in AVX2_PINS.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in AVX2_PINS}
