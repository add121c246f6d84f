"""``python -m rankstudy <command>``: one subcommand per workflow rule.

Each handler is followed by the function that declares its arguments, registered with
``@subcommand`` under the command's name. Handlers only parse arguments and call into the package;
heavy imports happen inside the handlers so that ``--help`` and light commands start fast. A
``StudyError`` (bad file, bad config) is printed as one clear line and exits with status 2,
without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Callable

from rankstudy.errors import StudyError

log = logging.getLogger("rankstudy")
AddArguments = Callable[[argparse.ArgumentParser], None]
SUBCOMMANDS: dict[str, tuple[str, AddArguments]] = {}  # name -> (help, the function declaring its arguments)


def subcommand(name: str, help_text: str) -> Callable[[AddArguments], AddArguments]:
    """Register the decorated function as the argument declarations of subcommand ``name``."""
    def register(add_arguments: AddArguments) -> AddArguments:
        SUBCOMMANDS[name] = (help_text, add_arguments)
        return add_arguments
    return register


def _scoring_arguments(parser: argparse.ArgumentParser, batch_size: int) -> None:
    """What every command that scores with a trained model needs: the model, its inputs, and how to run it
    (the lengths come from the model's directory: ``experiment.InputSpec``)."""
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--embeddings", required=True)
    parser.add_argument("--queries", required=True, help="token store of the queries")
    parser.add_argument("--documents", required=True, help="token store of the collection")
    parser.add_argument("--batch-size", type=int, default=batch_size)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1)


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
    from rankstudy.datasets.irds import official_candidates
    from rankstudy.formats import read_queries, write_run

    run = official_candidates(args.ids, set(read_queries(args.queries)), args.hits)
    write_run(args.out, run, args.tag)


@subcommand("official-candidates", "a split's own candidate lists (ir_datasets scoreddocs) as a first-stage run")
def _official_candidates_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ids", nargs="+", required=True, help="the ir_datasets id(s) of the split")
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
    from rankstudy.train.loop import resolve_device

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
    from rankstudy.train.loop import resolve_device

    torch.set_num_threads(max(1, args.threads))
    run = search(args.index, args.queries, _dense_config(args.config), args.hits,
                 device=str(resolve_device(args.device)), threads=args.threads)
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


def _vocab(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_queries
    from rankstudy.text.vocab import build_vocabulary

    extra = [text for path in args.queries for text in read_queries(path).values()]
    vocab = build_vocabulary(Path(args.collection), args.min_count, extra_texts=extra)
    vocab.save(Path(args.out))
    log.info("wrote %s: %d terms (vocab.tsv, vocab.json)", args.out, len(vocab))


@subcommand("vocab", "build the vocabulary (vocab.tsv, vocab.json) from a collection")
def _vocab_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collection", required=True)
    p.add_argument("--queries", nargs="*", default=[], help="query files whose terms join the vocabulary")
    p.add_argument("--min-count", type=int, default=1, help="keep terms seen at least this often")
    p.add_argument("--out", required=True, help="vocabulary directory")
    p.set_defaults(handler=_vocab)


def _store(args: argparse.Namespace) -> None:
    if args.encoder:
        from rankstudy.text.wordpiece import build_wordpiece_store

        count = build_wordpiece_store(Path(args.input), args.encoder, Path(args.out), kind=args.kind)
    else:
        from rankstudy.text.word_store import build_store
        from rankstudy.text.vocab import Vocabulary

        count = build_store(Path(args.input), Vocabulary.load(args.vocab), Path(args.out), kind=args.kind)
    log.info("wrote %s: token store of %d %s texts", args.out, count, args.kind)


@subcommand("store", "encode an id<TAB>text file into a token store")
def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True)
    p.add_argument("--kind", required=True, choices=["collection", "queries"])
    tokens = p.add_mutually_exclusive_group(required=True)
    tokens.add_argument("--vocab", help="vocabulary directory (BlingFire words)")
    tokens.add_argument("--encoder", help="pre-trained encoder whose WordPiece ids to store: 'minilm' or a directory")
    p.add_argument("--out", required=True, help="store directory")
    p.set_defaults(handler=_store)


def _embeddings(args: argparse.Namespace) -> None:
    import numpy as np

    from rankstudy.config import from_json
    from rankstudy.store import TokenStore
    from rankstudy.text.embeddings import EmbeddingConfig, build_embeddings, save_embeddings
    from rankstudy.text.vocab import Vocabulary

    if json.loads(args.config).get("method") == "wordpiece":  # the model's pre-trained encoder has its own
        save_embeddings(Path(args.out), np.zeros((0, 0), dtype=np.float32))
        return
    config = from_json(EmbeddingConfig, args.config, "embeddings")
    if not args.vocab:
        raise StudyError(f"embeddings: method {config.method!r} needs --vocab")
    store = [TokenStore(path) for path in args.store or []]
    array = build_embeddings(config, Vocabulary.load(args.vocab), args.seed, store=store)
    save_embeddings(Path(args.out), array)
    log.info("wrote %s: %s embeddings %s", args.out, config.method, array.shape)


@subcommand("embeddings", "train (word2vec, fasttext) or load (glove) embeddings")
def _embeddings_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", nargs="+", help="collection token stores, read as one corpus (word2vec, fasttext)")
    p.add_argument("--vocab", help="vocabulary directory (all methods but wordpiece)")
    p.add_argument("--config", required=True, help="the embeddings config section as JSON")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True, help="embeddings .npy file")
    p.add_argument("--threads", type=int, default=1, help="ignored: training uses one thread for determinism")
    p.set_defaults(handler=_embeddings)


def _examples(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_qrels, read_run
    from rankstudy.train import examples

    qrels, run = read_qrels(args.qrels), read_run(args.candidates)
    common = dict(rel_threshold=args.rel_threshold, negatives_depth=args.negatives_depth,
                  per_query=args.per_query, seed=args.seed)
    if args.kind == "triples":
        made = examples.make_triples(qrels, run, **common)
    else:
        made = examples.make_groups(qrels, run, negatives=args.negatives, **common)
    if not made:  # an empty file would only fail later, inside training
        raise StudyError(f"{args.qrels}, {args.candidates}: no training example: no query has both a positive "
                         f"(grade >= {args.rel_threshold}) and a negative in its top {args.negatives_depth} candidates")
    (examples.write_triples if args.kind == "triples" else examples.write_groups)(args.out, made)


@subcommand("examples", "sample training triples (pairwise) or groups (listwise)")
def _examples_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--qrels", required=True, help="train qrels")
    p.add_argument("--candidates", required=True, help="first-stage run of the train queries")
    p.add_argument("--out", required=True, help="triples.tsv or groups.tsv")
    p.add_argument("--kind", required=True, choices=["triples", "groups"])
    p.add_argument("--rel-threshold", type=int, default=1, help="lowest grade counted as a positive")
    p.add_argument("--negatives-depth", type=int, required=True, help="negatives come from this many top candidates")
    p.add_argument("--per-query", type=int, required=True, help="examples per query")
    p.add_argument("--negatives", type=int, default=1, help="negatives per group (groups only)")
    p.add_argument("--seed", type=int, required=True)
    p.set_defaults(handler=_examples)


def _tune_depth(args: argparse.Namespace) -> None:
    from rankstudy.atomic import atomic_open
    from rankstudy.formats import read_qrels, read_run
    from rankstudy.runs import tune_depth

    start, stop, step = args.depths
    depth, table = tune_depth(read_run(args.first_stage), read_run(args.neural), read_qrels(args.qrels),
                              range(start, stop + 1, step), args.measure, args.rel_threshold)
    with atomic_open(args.out_json) as out:
        json.dump({"depth": depth, "measure": args.measure, "table": table.to_dict("records")}, out, indent=2)


@subcommand("tune-depth", "pick the re-ranking depth that maximises a measure")
def _tune_depth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--first-stage", required=True, help="first-stage run")
    p.add_argument("--neural", required=True, help="neural scores of the candidates (run)")
    p.add_argument("--qrels", required=True)
    p.add_argument("--measure", required=True, help="ir-measures string, e.g. RR@10")
    p.add_argument("--rel-threshold", type=int, default=1)
    p.add_argument("--depths", type=int, nargs=3, default=[5, 100, 5], metavar=("START", "STOP", "STEP"),
                   help="depths START..STOP (inclusive) every STEP")
    p.add_argument("--out-json", required=True, help='writes {"depth": n, "measure": m, "table": [...]}')
    p.set_defaults(handler=_tune_depth)


def _apply_depth(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_run, write_run
    from rankstudy.runs import rerank_to_depth

    if args.depth is not None:  # a fixed depth (a collection without a dev split to tune it on)
        depth = args.depth
    else:
        try:
            depth = int(json.loads(Path(args.depth_json).read_text())["depth"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StudyError(f"{args.depth_json}: expected JSON with an integer 'depth' ({error})") from None
    write_run(args.out, rerank_to_depth(read_run(args.first_stage), read_run(args.neural), depth), args.tag)


@subcommand("apply-depth", "re-rank the top depth candidates (depth from tune-depth)")
def _apply_depth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--first-stage", required=True)
    p.add_argument("--neural", required=True)
    depth = p.add_mutually_exclusive_group(required=True)
    depth.add_argument("--depth-json", help="output of tune-depth")
    depth.add_argument("--depth", type=int, help="a fixed depth instead (no dev split to tune it on)")
    p.add_argument("--out", required=True, help="TREC run")
    p.add_argument("--tag", required=True)
    p.set_defaults(handler=_apply_depth)


def _ensemble(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_run, write_run
    from rankstudy.runs import ensemble

    write_run(args.out, ensemble([read_run(path) for path in args.runs]), args.tag)


@subcommand("ensemble", "average the scores of several runs (same candidates)")
def _ensemble_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.set_defaults(handler=_ensemble)


def _select_seed(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_run, write_run
    from rankstudy.report.curves import read_log
    from rankstudy.runs import best_validated

    if len(args.logs) != len(args.runs):
        raise StudyError(f"select-seed: one run per training log, got {len(args.logs)} logs and {len(args.runs)} runs")
    chosen = best_validated([read_log(path) for path in args.logs], args.logs)
    write_run(args.out, read_run(args.runs[chosen]), args.tag)


@subcommand("select-seed", "the run of the seed whose training validated best")
def _select_seed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--logs", nargs="+", required=True, help="each seed's training log.csv")
    p.add_argument("--runs", nargs="+", required=True, help="each seed's run, in the same order")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.set_defaults(handler=_select_seed)


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


def _train(args: argparse.Namespace) -> None:
    from rankstudy.experiment import train_model

    train_model(args.model, json.loads(args.model_config), json.loads(args.train_config), Path(args.embeddings),
                Path(args.examples), Path(args.train_queries), Path(args.documents), Path(args.dev_queries),
                Path(args.dev_run), Path(args.dev_qrels), Path(args.out), args.seed, args.threads)


@subcommand("train", "train a neural ranker (resumes from checkpoint.pt)")
def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model name (tk, knrm, conv_knrm)")
    p.add_argument("--model-config", required=True, help="the model's settings as JSON")
    p.add_argument("--train-config", required=True, help="training settings as JSON (TrainConfig)")
    p.add_argument("--embeddings", required=True)
    p.add_argument("--examples", required=True, help="triples.tsv or groups.tsv")
    p.add_argument("--train-queries", required=True, help="token store of the train queries")
    p.add_argument("--documents", required=True, help="token store of the collection")
    p.add_argument("--dev-queries", required=True, help="token store of the dev queries")
    p.add_argument("--dev-run", required=True, help="first-stage run of the dev queries")
    p.add_argument("--dev-qrels", required=True)
    p.add_argument("--out", required=True, help="model directory")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(handler=_train)


def _export_encoder(args: argparse.Namespace) -> None:
    from rankstudy.experiment import export_encoder

    export_encoder(Path(args.model_dir), Path(args.embeddings), Path(args.out))


@subcommand("export-encoder", "write a trained model's fine-tuned encoder as a Hugging Face directory "
                              "(to warm-start other encoder models)")
def _export_encoder_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model-dir", required=True, help="trained model directory (config.json, model.pt)")
    p.add_argument("--embeddings", required=True)
    p.add_argument("--out", required=True, help="encoder directory to write")
    p.set_defaults(handler=_export_encoder)


def _pretrain_encoder(args: argparse.Namespace) -> None:
    import torch

    from rankstudy.config import from_dict
    from rankstudy.nn.study_encoder import StudyEncoderConfig, build_study_encoder

    torch.set_num_threads(max(1, args.threads))
    config = from_dict(StudyEncoderConfig, json.loads(args.config), "encoder")
    build_study_encoder(Path(args.collection), Path(args.vocab), Path(args.embeddings), config, args.seed,
                        Path(args.out))


@subcommand("pretrain-encoder", "build the study's own small BERT on a collection "
                                "(tokenizer, word-vector rows, optional masked-LM pre-training)")
def _pretrain_encoder_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collection", required=True, help="collection TSV (masked-LM text; WordPiece training)")
    p.add_argument("--vocab", required=True, help="vocabulary directory of the word vectors")
    p.add_argument("--embeddings", required=True, help="word vectors (embeddings.npy) aligned with the vocabulary")
    p.add_argument("--config", required=True, help="JSON of rankstudy.nn.study_encoder.StudyEncoderConfig")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="encoder directory to write")
    p.set_defaults(handler=_pretrain_encoder)


def _rerank(args: argparse.Namespace) -> None:
    from rankstudy.experiment import rerank_run

    rerank_run(Path(args.model_dir), Path(args.embeddings), Path(args.queries), Path(args.documents),
               Path(args.candidates), Path(args.out), args.tag, args.depth, args.batch_size, args.device, args.threads)


@subcommand("rerank", "score first-stage candidates with a trained model")
def _rerank_arguments(p: argparse.ArgumentParser) -> None:
    _scoring_arguments(p, batch_size=64)
    p.add_argument("--candidates", required=True, help="first-stage run")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--depth", type=int, required=True, help="candidates scored per query")
    p.set_defaults(handler=_rerank)


def _tk_table2(args: argparse.Namespace) -> None:
    from rankstudy.report.tk import table2

    table2(args.metrics, json.loads(args.rows), Path(args.out_prefix), args.depth, args.scaled, args.efficiency)


@subcommand("tk-table2", "the TK paper's Table 2 from metric CSVs")
def _tk_table2_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", nargs="+", required=True)
    p.add_argument("--rows", required=True, help="JSON list of {run, model, dataset, rerank, full, baseline}")
    p.add_argument("--efficiency", help="efficiency CSV: adds the docs/ms column (CPU) per model")
    p.add_argument("--depth", type=int, required=True, help="candidates of the re-rank task (caption)")
    p.add_argument("--scaled", default="", help="caption note on scaled-down settings")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_tk_table2)


def _tk_queries(args: argparse.Namespace) -> None:
    from rankstudy.report.tk import best_worst_queries

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
    from rankstudy.report.tk_view import render
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


def _regions(args: argparse.Namespace) -> None:
    from rankstudy.experiment import write_regions

    write_regions(Path(args.model_dir), Path(args.embeddings), Path(args.queries), Path(args.documents),
                  Path(args.run), Path(args.out), args.depth, args.batch_size, args.device, args.threads)


@subcommand("regions", "TKL's top regions in the top documents of a run (CSV)")
def _regions_arguments(p: argparse.ArgumentParser) -> None:
    _scoring_arguments(p, batch_size=32)
    p.add_argument("--run", required=True, help="the model's own run (its top documents are analysed)")
    p.add_argument("--out", required=True, help="CSV")
    p.add_argument("--depth", type=int, default=30)
    p.set_defaults(handler=_regions)


def _summary(args: argparse.Namespace) -> None:
    from rankstudy.report.summary import write_summary

    write_summary(args.metrics, args.out)


@subcommand("summary", "DVC's metrics.json and test.csv from the metric CSVs")
def _summary_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", default="results/metrics", help="folder of {dataset}/{system}.{split}.csv")
    p.add_argument("--out", default="summary", help="output folder")
    p.set_defaults(handler=_summary)


def _longdoc_report(args: argparse.Namespace) -> None:
    from rankstudy.report import longdoc

    spec, out = json.loads(args.spec), Path(args.out_prefix)
    if args.what == "table":
        longdoc.system_table(args.metrics, spec["rows"], spec["splits"], out, spec["caption"],
                             efficiency_csv=args.efficiency)
    elif args.what == "evidence":
        longdoc.evidence_table(spec["runs"], args.qrels, args.truth, out, spec["caption"], spec["boundary"],
                               spec["top"], spec["rel_threshold"])
    elif args.what == "fig1":
        from rankstudy.store import TokenStore

        store = TokenStore(args.store)
        lengths = dict(zip(store.ids, store.lengths(store.ids).tolist()))
        longdoc.length_figure(spec["runs"], args.qrels, lengths, out, spec["top"], rel_threshold=spec["rel_threshold"])
    elif args.what == "fig2":
        longdoc.max_length_figure(args.metrics, spec["points"], out)
    else:
        longdoc.region_figure(args.regions, out)


@subcommand("longdoc-report", "the TKL paper's tables and figures")
def _longdoc_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["table", "evidence", "fig1", "fig2", "fig3"])
    p.add_argument("--spec", default="{}", help="JSON: rows/splits/caption (table), runs/top/boundary (evidence, fig1), points (fig2)")
    p.add_argument("--metrics", nargs="*", default=[], help="metric CSVs (table, fig2)")
    p.add_argument("--efficiency", help="efficiency CSV: adds a docs/ms column (table)")
    p.add_argument("--qrels", help="test qrels (evidence, fig1)")
    p.add_argument("--truth", help="synthetic truth.json (evidence)")
    p.add_argument("--store", help="token store of the collection: document lengths (fig1)")
    p.add_argument("--regions", help="regions CSV (fig3)")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_longdoc_report)


def _socialformer_report(args: argparse.Namespace) -> None:
    from rankstudy.report import socialformer

    spec, out = json.loads(args.spec), Path(args.out_prefix)
    if args.what == "curves":
        from rankstudy.report.curves import learning_curves

        learning_curves(dict(zip(spec["labels"], args.logs, strict=True)), out, spec["metric"])
    elif args.what in ("table1", "table2"):
        build = socialformer.table1 if args.what == "table1" else socialformer.table2
        build(args.metrics, spec["rows"], out, spec["caption"], spec["columns"], spec.get("test", "wilcoxon"))
    elif args.what == "fig6":
        from rankstudy.store import TokenStore

        store = TokenStore(args.collection)
        lengths = dict(zip(store.ids, store.lengths(store.ids).tolist()))
        runs = {run["label"]: run for run in spec["runs"]}  # a list: JSON keeps its order
        socialformer.length_bucket_figure(args.metrics, runs, args.qrels, lengths, out, spec["measure"],
                                          spec["split"], spec["edges"], spec["rel_threshold"])
    else:
        import torch

        torch.set_num_threads(args.threads)
        graph, document = socialformer.figure_document(args.collection, args.queries, args.qrels, spec)
        if args.what == "fig4":
            socialformer.adjacency_figure(document, graph, out, spec["sparsity"])
        else:
            socialformer.circle_size_figure(document, graph, out, spec["sparsities"], spec["max_circles"],
                                            spec["partitions"])


@subcommand("socialformer-report", "the Socialformer paper's tables and figures")
def _socialformer_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["table1", "table2", "fig4", "fig5", "fig6", "curves"])
    p.add_argument("--spec", default="{}", help="JSON: rows/columns/caption (tables); runs [{label, dataset, "
                   "system}]/measure/split/edges/rel_threshold (fig6); model/length/sparsity or sparsities/... (fig4, fig5)")
    p.add_argument("--metrics", nargs="*", default=[], help="metric CSVs (tables, fig6)")
    p.add_argument("--qrels", help="qrels: the positive documents (fig6), the figure's document (fig4, fig5)")
    p.add_argument("--collection", help="WordPiece token store of the collection (fig4-6)")
    p.add_argument("--queries", help="WordPiece token store of the queries (fig4, fig5)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (fig4, fig5)")
    p.add_argument("--logs", nargs="*", default=[], help="runs' log.csv files, one per spec label (curves)")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_socialformer_report)


def _efficiency(args: argparse.Namespace) -> None:
    from rankstudy.efficiency import write_efficiency

    write_efficiency(json.loads(args.models), json.loads(args.setup), Path(args.out))


@subcommand("efficiency", "re-ranking throughput, training steps/s and peak memory of models")
def _efficiency_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help='JSON {name: {"model": class, ...settings}}')
    p.add_argument("--setup", required=True,
                   help='JSON {"batch", "doc_length", "query_length", "dim", "vocab", "repeats", "threads", "train_batch"}')
    p.add_argument("--out", required=True, help="CSV")
    p.set_defaults(handler=_efficiency)


def _truncation(args: argparse.Namespace) -> None:
    import torch

    from rankstudy.truncation.experiment import run_from_files

    # one thread, as the workflow's job (Snakemake sets OMP_NUM_THREADS to the rule's threads): run by hand
    # with torch's default (every core) Choppy gave other numbers than the workflow; on one thread two runs
    # side by side and the workflow's agree to the last digit
    torch.set_num_threads(max(1, args.threads))
    qid_lists = {part: path for part, path in (("train", args.train_qids), ("dev", args.dev_qids),
                                               ("test", args.test_qids)) if path}
    if qid_lists and len(qid_lists) != 3:
        raise StudyError("give all three of --train-qids, --dev-qids and --test-qids, or none")
    run_from_files(Path(args.run), Path(args.qrels), json.loads(args.config), args.seed,
                   Path(args.out) if args.out else None, qid_lists,
                   Path(args.grid_out) if args.grid_out else None)


@subcommand("truncation", "ranked-list truncation study (Choppy Table 1) on a run")
def _truncation_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", required=True, help="TREC run with scores")
    p.add_argument("--qrels", required=True)
    p.add_argument("--config", required=True, help="the truncation config section as JSON")
    p.add_argument("--seed", type=int, required=True)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", help="output directory of the study (every method, both metrics)")
    target.add_argument("--grid-out", help="only train Choppy over the d x heads grid (Fig. 2) and write this CSV")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the same numbers on every run)")
    p.add_argument("--train-qids", help="file with one train query id per line (else a seeded split)")
    p.add_argument("--dev-qids")
    p.add_argument("--test-qids")
    p.set_defaults(handler=_truncation)


def _choppy_report(args: argparse.Namespace) -> None:
    from rankstudy.report import choppy

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
    p.add_argument("--studies", nargs="+", required=True, help="truncation output directories")
    p.add_argument("--names", nargs="+", required=True, help="run-type name of each study")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_choppy_report)


def _claims(args: argparse.Namespace) -> None:
    from rankstudy.report.claims import scoreboard, write_scoreboard

    try:
        claims = json.loads(args.spec)["claims"]
    except (ValueError, KeyError, TypeError) as error:
        raise StudyError(f"--spec: expected JSON {{\"claims\": [...]}} ({error})") from None
    table = scoreboard(claims)
    write_scoreboard(table, Path(args.out_prefix))
    log.info("claims: %s", ", ".join(f"{n} {o}" for o, n in table["outcome"].value_counts().items()))


@subcommand("claims", "the claims scoreboard: each paper's claims tested on per-query values")
def _claims_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, help='JSON {"claims": [...]}: the claims resolved by the workflow (rule claims)')
    p.add_argument("--out-prefix", required=True, help="writes PREFIX.csv and PREFIX.md")
    p.set_defaults(handler=_claims)


def _check_expected(args: argparse.Namespace) -> None:
    from rankstudy import expected

    tables = args.tables or expected.tables_in(args.tables_dir, args.expected)
    if args.update:
        count = expected.update(args.expected, tables)
        print(f"wrote {count} expected cells of {len(tables)} tables to {args.expected}")
        return
    summary, drifts = expected.check(args.expected, tables, missing_ok=args.missing_ok)
    for line in drifts:
        print(line)
    print(summary)
    if args.out:
        from rankstudy.atomic import atomic_open

        with atomic_open(args.out) as out:
            out.write("".join(f"{line}\n" for line in drifts) + f"{summary}\n")
    if drifts:
        raise StudyError(f"{summary} (listed above)")


@subcommand("check-expected", "compare a finished run's table cells with the expected file")
def _check_expected_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expected", required=True, help="the expected file (YAML; docs/claims.md)")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--tables", nargs="+", help="the run's table CSVs (results/tables/NAME.csv)")
    given.add_argument("--tables-dir", help="the run's table folder: the tables the expected file pins (a new file: "
                       "every known table there)")
    p.add_argument("--update", action="store_true", help="rewrite the expected file from these tables")
    p.add_argument("--missing-ok", action="store_true", help="a missing expected file is reported, not an error")
    p.add_argument("--out", help="also write the drifted cells and the summary to this file")
    p.set_defaults(handler=_check_expected)


def _reproduction(args: argparse.Namespace) -> None:
    from rankstudy.report.reproduction import reproduction, write_reproduction

    comparable = not args.not_comparable
    table = reproduction(args.reported, args.tables_dir, comparable)
    write_reproduction(table, Path(args.out_prefix), comparable)
    log.info("reproduction: %s", ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
             if comparable else "this config's data is not comparable with the papers'")


@subcommand("reproduction", "the papers' reported table cells beside this run's")
def _reproduction_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reported", nargs="*", default=[], help="reported-cells files (config/paper/reported/*.yaml)")
    p.add_argument("--tables-dir", default="results/tables", help="the run's table folder (results/tables/NAME.csv)")
    p.add_argument("--not-comparable", action="store_true",
                   help="this config's data is not the papers' (the synthetic default): say so, compare nothing")
    p.add_argument("--out-prefix", required=True, help="writes PREFIX.csv and PREFIX.md")
    p.set_defaults(handler=_reproduction)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rankstudy", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_arguments) in SUBCOMMANDS.items():
        add_arguments(commands.add_parser(name, help=help_text))
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
