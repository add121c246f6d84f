"""Benchmark: how hard a config's training negatives are, beside the test lists the models must re-rank.

A pairwise re-ranker learns only from the triples on which its current order is wrong. Where the first stage
already ranks the positive above the negative in almost every triple, a model that copies the first stage
reaches a low loss, and more queries of the same kind add little (docs/msmarco.md, "What it would take").
From a study run's files (run it after `snakemake ... --configfile config/msmarco-passages.yaml`):

    python bench/training_negatives.py --triples train/msmarco-train/triples.tsv \\
        --train-run runs/msmarco-train/bm25.train.run \\
        --test dl-test-a:runs/dl-test-a/bm25-given.test.run:data/dl-test-a/qrels.test.txt \\
        --test dl-test-b:runs/dl-test-b/bm25-given.test.run:data/dl-test-b/qrels.test.txt \\
        --given-negatives resources/data/msmarco-passage-train-sample/negatives.tsv \\
        --rel-threshold 2 --out bench/results/training_negatives.md

Triples: the share whose positive is the first stage's rank 1, whose negative the first stage ranks above the
positive, the negatives' median rank. Test lists: of the pairs (a relevant passage, grade >= rel-threshold; a
judged non-relevant one, grade 0) of a query's list, the share the first stage orders wrongly: the same
quantity as the triples' "negative above positive", on the pairs a model is tested on.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rankstudy.formats import Run, read_qrels, read_run
from rankstudy.train.examples import read_triples


def ranks(run: Run) -> dict[tuple[str, str], int]:
    """(qid, docid) -> 1-based rank in the run (read_run sorts each list by score)."""
    return {(qid, docid): rank for qid, ranked in run.items() for rank, (docid, _) in enumerate(ranked, 1)}


def triple_line(label: str, pairs: list, rank: dict[tuple[str, str], int]) -> str:
    positive = [rank.get((qid, pos)) for qid, pos, _ in pairs]
    negative = [rank.get((qid, neg)) for qid, _, neg in pairs]
    above = sum(1 for p, n in zip(positive, negative) if n is not None and (p is None or n < p))
    in_run = [n for n in negative if n is not None]
    return (f"| {label} | {len(pairs):,} | {sum(1 for p in positive if p == 1) / len(pairs):.3f} "
            f"| {above / len(pairs):.3f} | {statistics.median(in_run):.0f} |")


def triple_lines(triples: Path, train_run: Path, given_negatives: Path | None) -> list[str]:
    """All triples, and (with ``given_negatives``, lines 'qid docid') those whose negative is a given one."""
    rank = ranks(read_run(train_run))
    pairs = read_triples(triples)
    lines = [triple_line("all", pairs, rank)]
    if given_negatives:
        given = {tuple(line.split()[:2]) for line in given_negatives.open() if line.strip()}
        lines.append(triple_line("negative given", [pair for pair in pairs if (pair[0], pair[2]) in given], rank))
    return lines


def judged_pairs_line(name: str, run_path: Path, qrels_path: Path, rel_threshold: int) -> str:
    """The pairs a model must order on a test list: a relevant passage (grade >= rel_threshold) and a judged
    non-relevant one (grade 0) of the same list; the share the first stage orders wrongly."""
    run, qrels = read_run(run_path), read_qrels(qrels_path)
    pairs = wrong = 0
    for qid, ranked in run.items():
        grades = qrels.get(qid, {})
        relevant = [rank for rank, (docid, _) in enumerate(ranked) if grades.get(docid, 0) >= rel_threshold]
        negative = [rank for rank, (docid, _) in enumerate(ranked) if grades.get(docid) == 0]
        pairs += len(relevant) * len(negative)
        wrong += sum(1 for r in relevant for n in negative if n < r)
    return f"| {name} | {len(run)} | {pairs:,} | {wrong / pairs:.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triples", type=Path, required=True)
    parser.add_argument("--train-run", type=Path, required=True)
    parser.add_argument("--given-negatives", type=Path, help="the training folder's negatives.tsv (qid docid)")
    parser.add_argument("--test", action="append", default=[], help="NAME:RUN:QRELS")
    parser.add_argument("--rel-threshold", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/training_negatives.md"))
    args = parser.parse_args()
    lines = ["# Training negatives beside the test lists", "",
             f"Triples `{args.triples}`, ranked by the first stage `{args.train_run}`.", "",
             "| triples | count | positive at rank 1 | negative above positive | negatives' median rank |",
             "|---|---:|---:|---:|---:|", *triple_lines(args.triples, args.train_run, args.given_negatives), ""]
    if args.test:
        lines += [f"Test lists (relevant: grade >= {args.rel_threshold}):", "",
                  "| dataset | queries | (relevant, judged non-relevant) pairs | non-relevant above relevant |",
                  "|---|---:|---:|---:|"]
        for spec in args.test:
            name, run_path, qrels_path = spec.split(":")
            lines.append(judged_pairs_line(name, Path(run_path), Path(qrels_path), args.rel_threshold))
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
