"""bench/ holds only maintained benchmarks: each script is run by `make bench` (or `make bench-gpu`), by a test, or
by another script, and each still starts (its imports resolve, its arguments parse). One-off investigations go to
bench/results/ and git history (bench/README.md, "Removed investigations")."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import REPO

BENCH = REPO / "bench"


def makefile_benchmarks() -> set[str]:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    listed = set(re.search(r"^BENCHMARKS :=(.*)$", text, re.M).group(1).split())
    return listed | set(re.findall(r"python bench/(\w+)\.py", text))


def run_by_tests() -> set[str]:
    """Scripts a test file runs or loads by path (``bench" / "NAME.py"``)."""
    found = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        found |= set(re.findall(r'"bench" / "(\w+)\.py"', path.read_text()))
    return found


def imported_by_scripts() -> set[str]:
    return {name for path in BENCH.glob("*.py") for name in re.findall(r"^from (\w+) import", path.read_text(), re.M)
            if (BENCH / f"{name}.py").is_file()}


def test_every_script_in_bench_is_maintained():
    scripts = {path.stem for path in BENCH.iterdir() if path.suffix in (".py", ".sh")}
    maintained = makefile_benchmarks() | run_by_tests() | imported_by_scripts()
    assert scripts - maintained == set(), "scripts no Makefile target, test or script runs: add them to BENCHMARKS " \
                                         "or move their findings to bench/results/ and remove them (bench/README.md)"
    assert makefile_benchmarks() - scripts == set(), "the Makefile names a benchmark bench/ does not have"


def test_every_script_is_in_the_readme():
    readme = (BENCH / "README.md").read_text()
    missing = [path.name for path in BENCH.glob("*.py") if f"`{path.name}`" not in readme]
    assert not missing, f"bench/README.md's table does not describe {missing}"


def test_every_benchmark_still_starts():
    """``--help`` of each script in one interpreter (torch imported once): a renamed function it imports fails here."""
    names = sorted(makefile_benchmarks() | run_by_tests())
    program = "\n".join([
        "import runpy, sys",
        f"sys.path.insert(0, {str(BENCH)!r})",
        f"for name in {names!r}:",
        "    sys.argv = [name + '.py', '--help']",
        "    try:",
        f"        runpy.run_path({str(BENCH)!r} + '/' + name + '.py', run_name='__main__')",
        "    except SystemExit as done:",
        "        assert done.code in (0, None), (name, done.code)",
        "    else:",
        "        raise AssertionError(name + ': --help did not exit')",
    ])
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
