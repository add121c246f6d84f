"""Subcommands: datasets, Lucene indexes and searches, official and dense candidates, evaluation, the first-stage table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rankstudy.subcommands import subcommand


def _dataset(args: argparse.Namespace) -> None:
    from rankstudy.datasets import export_dataset

    export_dataset(args.name, json.loads(args.config), Path(args.out), seed=args.seed)


@subcommand("dataset", "write a dataset in the study's layout")
def _dataset_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, help="dataset name (config key)")
    p.add_argument("--config", required=True, help="the dataset's config section as JSON")
    p.add_argument("--seed", type=int, required=True, help="the study seed")
    p.add_argument("--out", required=True, help="output directory (data/{dataset})")
    p.set_defaults(handler=_dataset)


def _folds(args: argparse.Namespace) -> None:
    from rankstudy.datasets.folds import export_folds

    export_folds(args.queries, args.qrels, args.collection, args.k, args.seed, args.out)


@subcommand("folds", "deal a split's judged queries into k folds, each a dataset (train, dev, test)")
def _folds_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", required=True, help="the folded split's queries")
    p.add_argument("--qrels", required=True, help="the folded split's qrels")
    p.add_argument("--collection", required=True, help="the collection (train positives need text)")
    p.add_argument("--k", type=int, required=True, help="folds")
    p.add_argument("--seed", type=int, required=True, help="seed of the fold assignment")
    p.add_argument("--out", nargs="+", required=True, help="one directory per fold, in order")
    p.set_defaults(handler=_folds)


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


@subcommand("index", "build a Lucene index with Anserini and check its statistics")
def _index_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collection", required=True)
    p.add_argument("--out", required=True, help="index directory")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--expected-stats", help='JSON {"documents": N, "total_terms": M} to check exactly')
    p.add_argument("--terms-tolerance", type=float, default=0.01,
                   help="allowed relative difference between index total terms and the collection estimate")
    p.add_argument("--timing", help="write Anserini vs pipeline wall times here (JSON)")
    p.set_defaults(handler=_index)


def _official_candidates(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_queries, read_run, write_run

    qids = read_queries(args.queries)
    if args.run:
        from rankstudy.runs import split_lists

        run = split_lists(read_run(args.run), qids, args.hits)
    else:
        from rankstudy.datasets.irds import official_candidates

        run = official_candidates(args.ids, qids, args.hits)  # the queries file's order, not a set's
    write_run(args.out, run, args.tag)


@subcommand("official-candidates", "a split's own candidate lists as a first-stage run: an irds split's scoreddocs, "
                                   "or a given run's lists of the split's queries")
def _official_candidates_arguments(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--ids", nargs="+", help="the ir_datasets id(s) of the split")
    source.add_argument("--run", help="a TREC run: a local dataset's candidates.run, or a fold's parent's run")
    p.add_argument("--queries", required=True, help="the split's exported queries (the run keeps these)")
    p.add_argument("--hits", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.set_defaults(handler=_official_candidates)


def _dense_config(text: str):
    from rankstudy.config import from_json
    from rankstudy.dense import DenseConfig

    return from_json(DenseConfig, text, "dense first stage (--config)")


def _dense_index(args: argparse.Namespace) -> None:
    from rankstudy.dense import build_index
    from rankstudy.device import resolve_device

    build_index(args.collection, _dense_config(args.config), args.out, device=str(resolve_device(args.device)))


@subcommand("dense-index", "encode a collection into pyserini's FAISS index (dense first stage)")
def _dense_index_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collection", required=True)
    p.add_argument("--config", required=True, help="JSON DenseConfig: encoder, kind, pooling, l2_norm, max_length, ...")
    p.add_argument("--out", required=True, help="index directory")
    p.add_argument("--device", default="auto")
    p.set_defaults(handler=_dense_index)


def _dense_search(args: argparse.Namespace) -> None:
    import torch

    from rankstudy.dense import search
    from rankstudy.formats import write_run
    from rankstudy.device import resolve_device

    torch.set_num_threads(max(1, args.threads))
    device = str(resolve_device(args.device))
    if args.rescore:
        from rankstudy.dense import rescore
        from rankstudy.formats import read_run

        run = rescore(args.index, args.queries, read_run(args.rescore), _dense_config(args.config), args.hits, device)
    else:
        run = search(args.index, args.queries, _dense_config(args.config), args.hits, device=device,
                     threads=args.threads)
    write_run(args.out, run, args.tag)


@subcommand("dense-search", "first-stage retrieval with pyserini's FaissSearcher")
def _dense_search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--config", required=True, help="JSON DenseConfig (the index's)")
    p.add_argument("--hits", type=int, default=100)
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--tag", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rescore", help="a TREC run: score its lists instead of searching (a zero-shot re-scorer)")
    p.set_defaults(handler=_dense_search)


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


@subcommand("search", "first-stage retrieval (BM25 or QL) with Anserini")
def _search_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index", required=True)
    p.add_argument("--queries", required=True)
    p.add_argument("--out", required=True, help="TREC run file")
    p.add_argument("--model", required=True, choices=["bm25", "ql"])
    p.add_argument("--params", default="{}", help='JSON model parameters, e.g. {"k1": 0.9, "b": 0.4} or {"mu": 1000}')
    p.add_argument("--hits", type=int, default=100)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timing", help="write Anserini vs pipeline wall times here (JSON)")
    p.set_defaults(handler=_search)


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


@subcommand("evaluate", "evaluate a run with ir-measures into long-format CSV")
def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True)
    p.add_argument("--qrels", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--measures", nargs="+", required=True)
    p.add_argument("--rel-threshold", type=int, default=1, help="lowest grade counted relevant by binary measures")
    p.add_argument("--dataset", required=True)
    p.add_argument("--system", required=True)
    p.add_argument("--split", required=True)
    p.set_defaults(handler=_evaluate)


def _first_stage_table(args: argparse.Namespace) -> None:
    from rankstudy.report.tables import first_stage_table

    first_stage_table([Path(p) for p in args.metrics], args.measures, Path(args.out_prefix))


@subcommand("first-stage-table", "systems x measures table of the first-stage runs")
def _first_stage_table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", nargs="+", required=True, help="metric CSVs from 'evaluate'")
    p.add_argument("--measures", nargs="+", required=True, help="columns, in order")
    p.add_argument("--out-prefix", required=True, help="writes PREFIX.csv, PREFIX.md and PREFIX.tex")
    p.set_defaults(handler=_first_stage_table)


def _summary(args: argparse.Namespace) -> None:
    from rankstudy.report.summary import write_summary

    write_summary(args.metrics, args.out)


@subcommand("summary", "DVC's metrics.json and test.csv from the metric CSVs")
def _summary_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", default="results/metrics", help="folder of {dataset}/{system}.{split}.csv")
    p.add_argument("--out", default="summary", help="output folder")
    p.set_defaults(handler=_summary)
