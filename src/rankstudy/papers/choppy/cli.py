"""Subcommands: the Choppy paper: merged folds, its ranked-list truncation study (BiCut, Choppy, baselines) on a
run, its table and figures."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rankstudy.errors import StudyError
from rankstudy.subcommands import subcommand


def _merge_folds(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_qrels, read_run, write_qrels, write_run
    from rankstudy.runs import merge_disjoint

    if len(args.runs) != len(args.qrels):
        raise StudyError(f"merge-folds: one qrels file per run, got {len(args.runs)} runs and {len(args.qrels)} qrels")
    run = merge_disjoint([read_run(path) for path in args.runs], args.runs)
    qrels = merge_disjoint([read_qrels(path) for path in args.qrels], args.qrels)
    write_qrels(args.out_qrels, qrels)
    write_run(args.out_run, run, args.tag)


@subcommand("merge-folds", "one run and qrels from cross-validation folds' test runs")
def _merge_folds_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", nargs="+", required=True, help="each fold's run (disjoint queries)")
    p.add_argument("--qrels", nargs="+", required=True, help="each fold's qrels, in the same order")
    p.add_argument("--out-run", required=True)
    p.add_argument("--out-qrels", required=True)
    p.add_argument("--tag", required=True)
    p.set_defaults(handler=_merge_folds)


def _choppy_study(args: argparse.Namespace) -> None:
    import torch

    from rankstudy.truncation.experiment import run_from_files
    from rankstudy.truncation.repeats import repeat_seed

    # one thread, as the workflow's job (Snakemake sets OMP_NUM_THREADS to the rule's threads): run by hand
    # with torch's default (every core) Choppy gave other numbers than the workflow; on one thread two runs
    # side by side and the workflow's agree to the last digit
    torch.set_num_threads(max(1, args.threads))
    qid_lists = {part: path for part, path in (("train", args.train_qids), ("dev", args.dev_qids),
                                               ("test", args.test_qids)) if path}
    if qid_lists and not {"train", "test"} <= set(qid_lists):
        raise StudyError("give --train-qids and --test-qids (--dev-qids is optional), or none of them")
    run_from_files(Path(args.run), Path(args.qrels), json.loads(args.config), repeat_seed(args.seed, args.repeat),
                   Path(args.out) if args.out else None, qid_lists,
                   Path(args.grid_out) if args.grid_out else None, Path(args.grid_study) if args.grid_study else None)


@subcommand("choppy-study", "ranked-list truncation study (Choppy Table 1) on a run")
def _choppy_study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, help="TREC run with scores")
    p.add_argument("--qrels", required=True)
    p.add_argument("--config", required=True, help="the choppy config section (less its runs) as JSON")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--repeat", type=int, default=0,
                   help="repeat r of the study: its split and training use seed + r (choppy.repeats)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", help="output directory of the study (every method, both metrics)")
    target.add_argument("--grid-out", help="only train Choppy over the d x heads grid (Fig. 2) and write this CSV")
    p.add_argument("--grid-study", help="with --grid-out: the output directory of this study's repeat 0 (--out); "
                                        "a grid point it trained already is not trained again")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the same numbers on every run)")
    p.add_argument("--train-qids", help="file with one train query id per line (else a seeded split)")
    p.add_argument("--dev-qids", help="optional with --train-qids and --test-qids")
    p.add_argument("--test-qids")
    p.set_defaults(handler=_choppy_study)


def _choppy_pool(args: argparse.Namespace) -> None:
    from rankstudy.truncation.experiment import write_study
    from rankstudy.truncation.repeats import pool, read_study

    write_study(pool([read_study(Path(directory)) for directory in args.repeats]), Path(args.out))


@subcommand("choppy-pool", "one truncation study from its repeated splits (mean, sd, every per-query value)")
def _choppy_pool_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", nargs="+", required=True, help="choppy-study output directories, repeat 0 first")
    p.add_argument("--out", required=True, help="output directory of the pooled study")
    p.set_defaults(handler=_choppy_pool)


def _choppy_report(args: argparse.Namespace) -> None:
    from rankstudy.papers.choppy import report as choppy

    studies = [Path(p) for p in args.studies]
    if args.what == "table1":
        choppy.table1(studies, args.names, Path(args.out_prefix))
    elif args.what == "fig1":
        choppy.figure1(studies, args.names, Path(args.out_prefix))
    else:
        choppy.figure2(studies, args.names, Path(args.out_prefix))


@subcommand("choppy-report", "the Choppy paper's Table 1 and Figures 1-2")
def _choppy_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["table1", "fig1", "fig2"])
    p.add_argument("--studies", nargs="+", required=True, help="choppy-study output directories")
    p.add_argument("--names", nargs="+", required=True, help="run-type name of each study")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_choppy_report)
