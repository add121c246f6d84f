"""``python -m rankstudy <command>``: one subcommand per workflow rule.

Handlers only parse arguments and call into the package; heavy imports happen inside the
handlers so that ``--help`` and light commands start fast. A ``StudyError`` (bad file, bad
config) is printed as one clear line and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from rankstudy.errors import StudyError

log = logging.getLogger("rankstudy")


def _dataset(args: argparse.Namespace) -> None:
    from rankstudy.datasets import export_dataset

    export_dataset(args.name, json.loads(args.config), Path(args.out), seed=args.seed)


def _index(args: argparse.Namespace) -> None:
    from rankstudy.lucene import build_index

    expected = json.loads(args.expected_stats) if args.expected_stats else None
    build_index(
        Path(args.collection),
        Path(args.out),
        threads=args.threads,
        expected_stats=expected,
        terms_tolerance=args.terms_tolerance,
        timing_path=Path(args.timing) if args.timing else None,
    )


def _search(args: argparse.Namespace) -> None:
    from rankstudy.lucene import search

    search(
        Path(args.index),
        Path(args.queries),
        Path(args.out),
        model=args.model,
        params=json.loads(args.params),
        hits=args.hits,
        threads=args.threads,
        timing_path=Path(args.timing) if args.timing else None,
    )


def _evaluate(args: argparse.Namespace) -> None:
    from rankstudy.evaluate import evaluate_to_csv

    evaluate_to_csv(
        run_path=Path(args.run),
        qrels_path=Path(args.qrels),
        out_path=Path(args.out),
        measures=args.measures,
        rel_threshold=args.rel_threshold,
        dataset=args.dataset,
        system=args.system,
        split=args.split,
    )


def _first_stage_table(args: argparse.Namespace) -> None:
    from rankstudy.report.tables import first_stage_table

    first_stage_table([Path(p) for p in args.metrics], args.measures, Path(args.out_prefix))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rankstudy", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("dataset", help="write a dataset in the study's layout")
    p.add_argument("--name", required=True, help="dataset name (config key)")
    p.add_argument("--config", required=True, help="the dataset's config section as JSON")
    p.add_argument("--seed", type=int, required=True, help="the study seed")
    p.add_argument("--out", required=True, help="output directory (data/{dataset})")
    p.set_defaults(handler=_dataset)

    p = commands.add_parser("index", help="build a Lucene index with Anserini and check its statistics")
    p.add_argument("--collection", required=True)
    p.add_argument("--out", required=True, help="index directory")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--expected-stats", help='JSON {"documents": N, "total_terms": M} to check exactly')
    p.add_argument("--terms-tolerance", type=float, default=0.01,
                   help="allowed relative difference between index total terms and the collection estimate")
    p.add_argument("--timing", help="write Anserini vs pipeline wall times here (JSON)")
    p.set_defaults(handler=_index)

    p = commands.add_parser("search", help="first-stage retrieval (BM25 or QL) with Anserini")
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--model", required=True, choices=["bm25", "ql"])
    p.add_argument("--params", default="{}", help='JSON model parameters, e.g. {"k1": 0.9, "b": 0.4} or {"mu": 1000}')
    p.add_argument("--hits", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timing", help="write Anserini vs pipeline wall times here (JSON)")
    p.set_defaults(handler=_search)

    p = commands.add_parser("evaluate", help="evaluate a run with ir-measures into long-format CSV")
    p.add_argument("--run", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--measures", nargs="+", required=True)
    p.add_argument("--rel-threshold", type=int, default=1, help="lowest grade counted relevant by binary measures")
    p.add_argument("--dataset", required=True)
    p.add_argument("--system", required=True)
    p.add_argument("--split", required=True)
    p.set_defaults(handler=_evaluate)

    p = commands.add_parser("first-stage-table", help="systems x measures table of the first-stage runs")
    p.add_argument("--metrics", nargs="+", required=True, help="metric CSVs from 'evaluate'")
    p.add_argument("--measures", nargs="+", required=True, help="columns, in order")
    p.add_argument("--out-prefix", required=True, help="writes PREFIX.csv, PREFIX.md and PREFIX.tex")
    p.set_defaults(handler=_first_stage_table)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        args.handler(args)
    except StudyError as error:
        print(f"rankstudy {args.command}: error: {error}", file=sys.stderr)
        return 2
    return 0
