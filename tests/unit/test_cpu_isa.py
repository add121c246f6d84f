"""The AVX2 pin of the numeric libraries (rankstudy.cpu_isa, set by python -m rankstudy)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rankstudy.cpu_isa import AVX2_PINS, cpu_model, has_avx2, pin_vector_isa


@pytest.fixture
def cpuinfo(tmp_path):
    def write(flags: str):
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 {flags}\n")
        return str(path)
    return write


def test_an_avx2_machine_is_pinned_and_a_value_already_set_wins(cpuinfo, monkeypatch):
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    environ = {"OPENBLAS_CORETYPE": "Zen"}
    pins = pin_vector_isa(environ, cpuinfo("avx avx2 avx512f"))
    assert pins == {**AVX2_PINS, "OPENBLAS_CORETYPE": "Zen"} and environ["ATEN_CPU_CAPABILITY"] == "avx2"


@pytest.mark.parametrize("machine, flags, environ", [
    ("x86_64", "avx sse4_2", {}),  # no AVX2: the pins would name kernels the CPU lacks
    ("aarch64", "asimd", {}),  # ARM: the variables mean nothing there
    ("x86_64", "avx2", {"RANKSTUDY_CPU_ISA": "native"}),  # the opt-out
])
def test_no_pin_without_avx2_or_when_asked_for_native(cpuinfo, monkeypatch, machine, flags, environ):
    monkeypatch.setattr("platform.machine", lambda: machine)
    assert pin_vector_isa(environ, cpuinfo(flags)) == {} and "ATEN_CPU_CAPABILITY" not in environ
    assert not has_avx2(cpuinfo(flags)) or environ


def test_the_cpu_model_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu avx2\n")
    assert cpu_model(str(cpuinfo)) == "AMD EPYC 9B14"
    assert cpu_model(str(tmp_path / "absent"))  # elsewhere: the platform's name, never empty


@pytest.mark.skipif(not has_avx2(), reason="the pin applies to x86-64 machines with AVX2")
def test_the_entry_point_runs_torch_and_openblas_on_avx2():
    env = {k: v for k, v in os.environ.items() if k not in AVX2_PINS and k != "RANKSTUDY_CPU_ISA"}
    # as rankstudy.__main__: pin, then load the libraries
    probe = ("from rankstudy.cpu_isa import pin_vector_isa; pin_vector_isa()\n"
             "import numpy, torch; print(torch.backends.cpu.get_cpu_capability()); numpy.show_runtime()")
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "AVX2"
    assert "Haswell" in result.stdout  # OpenBLAS's core type, as numpy reports it
    help_text = subprocess.run([sys.executable, "-m", "rankstudy", "--help"], env=env, capture_output=True,
                               text=True, timeout=120)
    assert help_text.returncode == 0, help_text.stderr
