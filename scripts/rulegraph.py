"""The workflow's rule graph as a Mermaid diagram, drawn from the rules (``snakemake --rulegraph``).

    python scripts/rulegraph.py [--configfile FILE] [--write docs/architecture.md]

Prints a Mermaid ``flowchart`` (GitHub renders it) of the default config's rules, an arrow from a rule
to each rule that reads its outputs; arrows implied by longer paths are left out (transitive
reduction), so the diagram shows the stages in order rather than every dependency. ``--write``
replaces the block between the ``rulegraph`` markers of that Markdown file; tests/workflow checks
that docs/architecture.md holds the current graph.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

START, END = "<!-- rulegraph: start (python scripts/rulegraph.py --write docs/architecture.md) -->", \
    "<!-- rulegraph: end -->"


def rule_edges(dot: str) -> tuple[list[str], set[tuple[str, str]]]:
    """(rule names, producer -> consumer edges) of ``snakemake --rulegraph``'s DOT output."""
    labels = dict(re.findall(r'^\s*(\d+)\[label = "([^"]+)"', dot, flags=re.M))
    edges = {(labels[a], labels[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", dot, flags=re.M)}
    return sorted(labels.values()), edges


def transitive_reduction(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The edges not implied by a longer path (the graph is acyclic)."""
    successors: dict[str, set[str]] = {}
    for a, b in edges:
        successors.setdefault(a, set()).add(b)

    def reachable(start: str, skip: tuple[str, str]) -> set[str]:
        seen, stack = set(), [start]
        while stack:
            node = stack.pop()
            for nxt in successors.get(node, ()):
                if (node, nxt) != skip and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    return {(a, b) for a, b in edges if b not in reachable(a, (a, b))}


def mermaid(nodes: list[str], edges: set[tuple[str, str]]) -> str:
    lines = ["```mermaid", "flowchart LR"]
    lines += [f"    {a} --> {b}" for a, b in sorted(transitive_reduction(edges))]
    linked = {node for edge in edges for node in edge}
    lines += [f"    {node}" for node in nodes if node not in linked]
    return "\n".join(lines + ["```"])


def diagram(configfile: str | None = None) -> str:
    command = [sys.executable, "-m", "snakemake", "--rulegraph", "--quiet", "all"]
    command += ["--configfile", configfile] if configfile else []
    repo = Path(__file__).resolve().parents[1]
    dot = subprocess.run(command, check=True, capture_output=True, text=True, cwd=repo).stdout
    return mermaid(*rule_edges(dot))


def with_diagram(markdown: str, block: str) -> str:
    """``markdown`` with the block between the markers replaced."""
    if START not in markdown or END not in markdown:
        raise SystemExit(f"the file has no {START} ... {END} block")
    head, rest = markdown.split(START, 1)
    return head + START + "\n" + block + "\n" + END + rest.split(END, 1)[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile")
    parser.add_argument("--write", type=Path, help="Markdown file whose rulegraph block to replace")
    args = parser.parse_args()
    block = diagram(args.configfile)
    if args.write:
        args.write.write_text(with_diagram(args.write.read_text(), block))
    else:
        print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
