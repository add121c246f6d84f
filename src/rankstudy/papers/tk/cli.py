"""Subcommands: the TK paper's Tables 2-4, its interpretability view, trade-off figure and learning curve."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from rankstudy.subcommands import subcommand

log = logging.getLogger("rankstudy")


def _tk_table2(args: argparse.Namespace) -> None:
    from rankstudy.papers.tk.report import table2

    from rankstudy.report.tables import data_counts

    data = f"{args.data} ({data_counts(args.data_dirs)})" if args.data_dirs else args.data
    table2(args.metrics, json.loads(args.rows), Path(args.out_prefix), args.depth, args.scaled, args.efficiency, data)


@subcommand("tk-table2", "the TK paper's Table 2 from metric CSVs")
def _tk_table2_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", nargs="+", required=True)
    p.add_argument("--rows", required=True, help="JSON list of {run, model, dataset, rerank, full, baseline}")
    p.add_argument("--efficiency", help="efficiency CSV: adds the docs/ms column (CPU) per model")
    p.add_argument("--depth", type=int, required=True, help="candidates of the re-rank task (caption)")
    p.add_argument("--scaled", default="", help="caption note on scaled-down settings")
    p.add_argument("--data", default="", help="caption: what the datasets are (default: their names)")
    p.add_argument("--data-dirs", nargs="*", default=[],
                   help="the datasets' data/NAME folders: the caption gives their query and document counts")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_tk_table2)


def _tk_queries(args: argparse.Namespace) -> None:
    from rankstudy.papers.tk.report import best_worst_queries

    best_worst_queries(args.metrics, args.queries, args.qrels, Path(args.out_prefix), args.count,
                       first_table=args.first_table)


@subcommand("tk-queries", "the TK paper's Tables 3-4: best and worst test queries")
def _tk_queries_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", nargs="+", required=True,
                   help="metric CSVs of the runs on the test split, one per table")
    p.add_argument("--queries", nargs="+", required=True, help="each run's test queries")
    p.add_argument("--qrels", nargs="+", required=True, help="each run's test qrels")
    p.add_argument("--count", type=int, default=5)
    p.add_argument("--first-table", type=int, default=3, help="the paper's number of the first table")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_tk_queries)


def _tk_view(args: argparse.Namespace) -> None:
    import torch

    from rankstudy.experiment import load_trained
    from rankstudy.papers.tk.view import render
    from rankstudy.text.vocab import Vocabulary

    model_dir = args.model_dir[0]
    if len(args.model_dir) > 1:  # the seed the run's select-seed chose: the best validated (as select-seed)
        from rankstudy.report.curves import read_log
        from rankstudy.runs import best_validated

        logs = [str(Path(path) / "log.csv") for path in args.model_dir]
        model_dir = args.model_dir[best_validated([read_log(path) for path in logs], logs)]
    model, spec = load_trained(Path(model_dir), Path(args.embeddings), torch.device("cpu"))
    render(model, Vocabulary.load(args.vocab), Path(args.collection), Path(args.queries), Path(args.qrels),
           Path(args.first_stage), Path(args.neural), Path(args.out), spec.max_query_length, spec.max_doc_length,
           args.kernels)


@subcommand("tk-view", "the TK paper's interpretability view (HTML)")
def _tk_view_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-dir", nargs="+", required=True,
                   help="the trained model; several: the one whose log.csv validated best (as select-seed)")
    p.add_argument("--embeddings", required=True)
    p.add_argument("--vocab", required=True)
    p.add_argument("--collection", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--first-stage", required=True, help="first-stage run of the same queries")
    p.add_argument("--neural", required=True, help="TK's run of the same queries")
    p.add_argument("--out", required=True, help="HTML file")
    p.add_argument("--kernels", type=float, nargs="+", default=[1.0, 0.9, 0.7, 0.5], help="kernel centres to colour")
    p.set_defaults(handler=_tk_view)


def _tk_tradeoff(args: argparse.Namespace) -> None:
    from rankstudy.papers.tk.tradeoff import tradeoff_figure

    tradeoff_figure(args.table, Path(args.out_prefix), args.measure)


@subcommand("tk-tradeoff", "the TK paper's effectiveness-efficiency trade-off figure from its Table 2 CSV")
def _tk_tradeoff_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", required=True, help="Table 2 CSV (tk-table2 with --efficiency: a docs/ms column)")
    p.add_argument("--measure", default="test re-rank nDCG@10", help="the Table 2 column on the y axis")
    p.add_argument("--out-prefix", required=True, help="writes PREFIX.png and PREFIX.pdf")
    p.set_defaults(handler=_tk_tradeoff)


def _tk_learning_curve(args: argparse.Namespace) -> None:
    from rankstudy.errors import StudyError
    from rankstudy.papers.tk.tradeoff import learning_curve, training_queries

    def parsed(option: str, text: str) -> list:
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise StudyError(f"{option}: not JSON ({error})") from None

    points = parsed("--points", args.points)
    for point in points:  # a run on all its training queries: as many as its examples file has
        if point.get("queries") is None:
            point["queries"] = training_queries(point["examples"])
    learning_curve(args.metrics, points, Path(args.out_prefix), Path(args.figure_prefix),
                   parsed("--baselines", args.baselines), args.measure, args.caption)


@subcommand("tk-learning-curve", "test effectiveness by the number of training queries (table and figure)")
def _tk_learning_curve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", nargs="+", required=True)
    p.add_argument("--points", required=True, help="JSON list of {series, queries, dataset, system, examples}; one "
                   "per seed; queries null: the number of queries of the examples file")
    p.add_argument("--baselines", default="[]", help="JSON list of {label, dataset, system}; p is against the first")
    p.add_argument("--measure", default="nDCG@10")
    p.add_argument("--caption", default="", help="appended to the table's caption")
    p.add_argument("--out-prefix", required=True, help="the table: PREFIX.csv, .md, .tex")
    p.add_argument("--figure-prefix", required=True, help="the figure: PREFIX.png, .pdf")
    p.set_defaults(handler=_tk_learning_curve)
