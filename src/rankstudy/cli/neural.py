"""Subcommands: the text pipeline, training examples, training, re-ranking, depth tuning, ensembles, the throughput benchmark."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from rankstudy.errors import StudyError
from rankstudy.subcommands import scoring_arguments, subcommand

log = logging.getLogger("rankstudy")


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

        count = build_store(Path(args.input), Vocabulary.load(args.vocab), Path(args.out), kind=args.kind,
                            min_coverage=args.min_coverage)
    log.info("wrote %s: token store of %d %s texts", args.out, count, args.kind)


@subcommand("store", "encode an id<TAB>text file into a token store")
def _store_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True)
    p.add_argument("--kind", required=True, choices=["collection", "queries"])
    tokens = p.add_mutually_exclusive_group(required=True)
    tokens.add_argument("--vocab", help="vocabulary directory (BlingFire words)")
    tokens.add_argument("--encoder", help="pre-trained encoder whose WordPiece ids to store: 'minilm' or a directory")
    p.add_argument("--out", required=True, help="store directory")
    p.add_argument("--min-coverage", type=float, default=0.0,
                   help="least share of the text's tokens the vocabulary must know (--vocab; default 0: no check)")
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
                  per_query=args.per_query, seed=args.seed, negatives_from=args.negatives_from)
    if args.kind == "triples":
        made = examples.make_triples(qrels, run, judged_negatives=args.judged_negatives, **common)
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
    p.add_argument("--negatives-from", choices=["candidates", "training_documents"], default="candidates",
                   help="training_documents: only candidates that some training query judges relevant (a collection "
                   "split by document: the held-out queries' documents are never negatives)")
    p.add_argument("--judged-negatives", action="store_true",
                   help="triples only: each document judged 0 (a given negative) makes one triple first")
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


def _merge_runs(args: argparse.Namespace) -> None:
    from rankstudy.formats import read_run, write_run
    from rankstudy.runs import merge_disjoint

    write_run(args.out, merge_disjoint([read_run(path) for path in args.runs], args.runs), args.tag)


@subcommand("merge-runs", "one run from runs of disjoint queries (query folds' held-out runs)")
def _merge_runs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs", nargs="+", required=True, help="each fold's held-out run")
    p.add_argument("--out", required=True)
    p.add_argument("--tag", required=True)
    p.set_defaults(handler=_merge_runs)


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


def _teacher_vectors(args: argparse.Namespace) -> None:
    import torch

    from rankstudy.config import from_dict
    from rankstudy.train.teachers import TeacherConfig, vectorize

    torch.set_num_threads(max(1, args.threads))
    cfg = from_dict(TeacherConfig, json.loads(args.config), "teacher")
    vectorize(cfg, Path(args.collection), [Path(path) for path in args.queries], Path(args.out))


@subcommand("teacher-vectors", "encode a collection and its queries once with a distillation teacher")
def _teacher_vectors_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the teacher's settings as JSON (train.teachers.TeacherConfig)")
    p.add_argument("--collection", required=True)
    p.add_argument("--queries", nargs="+", required=True, help="query files (e.g. the train and dev splits)")
    p.add_argument("--out", required=True, help="vectors directory (documents/, queries/)")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(handler=_teacher_vectors)


def _teacher_triples(args: argparse.Namespace) -> None:
    from rankstudy.config import from_dict
    from rankstudy.formats import read_qrels, read_run
    from rankstudy.train import teachers
    from rankstudy.train.examples import read_triples

    given = read_triples(args.triples)
    teacher = teachers.load_teacher([Path(folder) for folder in args.vectors], args.scales, given)
    mining = from_dict(teachers.MiningConfig, json.loads(args.mining), "teacher mining")
    summary = teachers.score_triples(teacher, given, read_qrels(args.qrels), mining, args.rel_threshold, args.seed,
                                     Path(args.out))
    summary["validation"] = teachers.validate_teacher(teacher, read_run(args.dev_run), read_qrels(args.dev_qrels),
                                                      args.validation_depth, args.metric, args.rel_threshold)
    log.info("teacher validation: %s", summary["validation"])
    teachers.write_summary(Path(args.summary), summary)


@subcommand("teacher-triples", "score training triples with a teacher (Margin-MSE targets), mining harder negatives")
def _teacher_triples_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vectors", nargs="+", required=True, help="teacher-vectors directories (several: an ensemble)")
    p.add_argument("--scales", nargs="+", type=float, required=True, help="each member's score scale")
    p.add_argument("--triples", required=True, help="the given triples (qid, positive, negative)")
    p.add_argument("--qrels", required=True, help="train qrels (positives; judged passages are never mined)")
    p.add_argument("--mining", required=True, help="mining settings as JSON (train.teachers.MiningConfig)")
    p.add_argument("--dev-run", required=True, help="first-stage run of the dev queries (the teacher's validation)")
    p.add_argument("--dev-qrels", required=True)
    p.add_argument("--metric", default="RR@10")
    p.add_argument("--validation-depth", type=int, default=30)
    p.add_argument("--rel-threshold", type=int, default=1)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True, help="scored triples")
    p.add_argument("--summary", required=True, help="JSON: the teacher's margins and validation")
    p.set_defaults(handler=_teacher_triples)


def _train(args: argparse.Namespace) -> None:
    from rankstudy.experiment import train_model

    train_model(args.model, json.loads(args.model_config), json.loads(args.train_config), Path(args.embeddings),
                Path(args.examples), Path(args.train_queries), Path(args.documents), Path(args.dev_queries),
                Path(args.dev_run), Path(args.dev_qrels), Path(args.out), args.seed, args.threads)


@subcommand("train", "train a neural ranker (resumes from checkpoint.pt)")
def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="the model's class: a name of rankstudy.models.MODELS (docs/neural.md), e.g. tk")
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
    from rankstudy.text.study_encoder import StudyEncoderConfig, build_study_encoder

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
    p.add_argument("--config", required=True, help="JSON of rankstudy.text.study_encoder.StudyEncoderConfig")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True, help="encoder directory to write")
    p.set_defaults(handler=_pretrain_encoder)


def _rerank(args: argparse.Namespace) -> None:
    from rankstudy.experiment import rerank_run

    if not len(args.queries) == len(args.candidates) == len(args.out):
        raise StudyError(f"rerank: --queries, --candidates and --out name one file per split each; got "
                         f"{len(args.queries)}, {len(args.candidates)} and {len(args.out)}")
    splits = [tuple(map(Path, split)) for split in zip(args.queries, args.candidates, args.out)]
    rerank_run(Path(args.model_dir), Path(args.embeddings), Path(args.documents), splits, args.tag, args.depth,
               args.batch_size, args.device, args.threads, args.precision, args.reuse_documents,
               args.max_query_length)


@subcommand("rerank", "score first-stage candidates with a trained model (one split, or several with the model "
                      "loaded once: the i-th --queries, --candidates and --out belong together)")
def _rerank_arguments(p: argparse.ArgumentParser) -> None:
    scoring_arguments(p, batch_size=64, several_queries=True)
    p.add_argument("--candidates", required=True, nargs="+", help="first-stage run(s)")
    p.add_argument("--out", required=True, nargs="+", help="re-ranked run(s)")
    p.add_argument("--tag", required=True)
    p.add_argument("--depth", type=int, required=True, help="candidates scored per query")
    # rankstudy.precision.PRECISIONS, spelled out: importing it would load torch for every command's --help
    p.add_argument("--precision", choices=("fp32", "bf16", "tf32"), default="fp32",
                   help="fp32, bf16 (autocast; kernels and scores in fp32) or tf32 (CUDA only): rankstudy.precision")
    p.add_argument("--reuse-documents", action="store_true",
                   help="a model that encodes a document without its query (TK, TKL) encodes each document once "
                        "for every query that ranks it (rankstudy.rerank.score_by_document)")
    p.add_argument("--max-query-length", type=int, default=None,
                   help="query tokens read (default: the length the model was trained at)")
    p.set_defaults(handler=_rerank)


def _efficiency(args: argparse.Namespace) -> None:
    from rankstudy.efficiency import write_efficiency

    write_efficiency(json.loads(args.models), json.loads(args.setup), Path(args.out))


@subcommand("efficiency", "re-ranking throughput, training steps/s and peak memory of models")
def _efficiency_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", required=True, help='JSON {name: {"model": class, ...settings}}')
    p.add_argument("--setup", required=True,
                   help='JSON {"batch", "doc_length", "query_length", "dim", "vocab", "repeats", "threads", '
                        '"train_batch", "precision" (optional, default fp32)}')
    p.add_argument("--out", required=True, help="CSV")
    p.set_defaults(handler=_efficiency)
