import os

# Idle OpenMP threads sleep at once instead of spinning first (GNU OpenMP's default). On a machine
# that runs anything else, spinning threads take the CPU the working ones need: under load KNRM at
# 2 threads ran at 1/50 of its idle speed, with PASSIVE at 1/5, and idle PASSIVE costs nothing
# (bench/results/busy_speed.md). OpenMP reads this once, when torch loads it, so it is set before
# any import; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The same numbers on every x86-64 machine with AVX2: the numeric libraries' kernels pinned to AVX2 before
# they load (rankstudy.cpu_isa; RANKSTUDY_CPU_ISA=native opts out).
from rankstudy.cpu_isa import pin_vector_isa  # noqa: E402

pin_vector_isa()

# Freed tensor memory stays in the process for the next step instead of being faulted in anew
# (rankstudy.malloc; bench/results/malloc.md); RANKSTUDY_MALLOC=system opts out.
from rankstudy.malloc import keep_freed_memory  # noqa: E402

keep_freed_memory()

from rankstudy.cli import main  # noqa: E402

raise SystemExit(main())
