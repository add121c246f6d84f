"""Where a re-ranker puts each kind of document of the synthetic data (docs/socialformer.md).

For every run given, over the test queries of a synthetic dataset (its ``truth.json``): the mean
rank in the run's top ``--depth`` of relevant documents per grade, split by whether their evidence
starts before or after word ``--read`` (what a model reading that many words can see), of the hard
negatives, and of the rest; and what kind of document each query has first. A model that learns
the synonyms lifts relevant documents; a model blind to the query lifts "other" documents.

    python bench/rank_breakdown.py --dataset data/synthetic-doc runs/synthetic-doc/bm25.test.run \
        runs/synthetic-doc/maxp.sf-maxp.s42.test.run [--read 1024] [--depth 50]

Writes a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from rankstudy.formats import read_run


def breakdown(run: dict, truth: dict, read: int, depth: int) -> tuple[dict[str, list[int]], Counter]:
    """(ranks per kind of document, kind of each query's first document) over the test queries."""
    ranks: dict[str, list[int]] = defaultdict(list)
    first: Counter = Counter()
    for qid, ranked in run.items():
        if truth["queries"].get(qid, {}).get("split") != "test":
            continue
        relevant = truth["relevant"].get(qid, {})
        hard = set(truth["hard_negatives"].get(qid, []))
        for rank, (docid, _) in enumerate(ranked[:depth], start=1):
            if docid in relevant:
                info = relevant[docid]
                kind = f"grade {info['grade']} {'late' if info['evidence_start'] >= read else 'early'}"
            else:
                kind = "hard negative" if docid in hard else "other"
            ranks[kind].append(rank)
            if rank == 1:
                first["relevant" if docid in relevant else kind] += 1
    return ranks, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--dataset", type=Path, required=True, help="a synthetic dataset directory (truth.json)")
    parser.add_argument("--read", type=int, default=1024, help="words a model reads (early/late evidence)")
    parser.add_argument("--depth", type=int, default=50, help="ranks counted (the re-ranking depth)")
    args = parser.parse_args()
    truth = json.loads((args.dataset / "truth.json").read_text())

    kinds = [f"grade {g} {w}" for g in (3, 2, 1) for w in ("early", "late")] + ["hard negative", "other"]
    print(f"Mean rank in the top {args.depth} (count); evidence early/late: before/after word {args.read}; "
          f"first: the kind of document ranked first, per query.\n")
    print("| run | " + " | ".join(kinds) + " | first: relevant / hard / other |")
    print("|---|" + "---|" * (len(kinds) + 1))
    for path in args.runs:
        ranks, first = breakdown(read_run(path), truth, args.read, args.depth)
        cells = [f"{statistics.mean(ranks[k]):.1f} ({len(ranks[k])})" if ranks[k] else "–" for k in kinds]
        print(f"| {path.name} | " + " | ".join(cells)
              + f" | {first['relevant']} / {first['hard negative']} / {first['other']} |")


if __name__ == "__main__":
    main()
