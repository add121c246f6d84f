"""Benchmark: test-set effectiveness of TK trained and re-ranking in bf16 against fp32 (issue 45), on the CPU.

The default study's TK run p1 in small, as tests/learning/test_tk_learns.py builds it: its synthetic passages
(seed 42), BM25 top 100, word2vec 64-d vectors on the passages (``--epochs``, default the test's 15; the study's
vectors see passages and documents), TK with 1 layer, 4 heads, ff 64 and frozen vectors, the study's training
settings (pairwise, 1,500 steps at most, validation every 250 on dev RR@10), one thread. Each seed trains twice,
at fp32 and at bf16 (``rankstudy.precision``: forward passes under bf16 autocast, the kernels, score heads and
losses in fp32); each model re-ranks the test queries' top 100 at its own precision, and the fp32 model once more
at bf16 (the precision's effect on scoring alone). Paired two-sided Wilcoxon tests on per-query nDCG@10 say
whether bf16 differs beyond noise.

    python bench/precision_effectiveness.py [--seeds 42 43] [--epochs 15]
                                            [--out bench/results/precision_effectiveness.md]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rankstudy.cpu_isa import pin_vector_isa

pin_vector_isa()  # the study's vector instructions (python -m rankstudy pins them too)

import torch  # noqa: E402
import yaml  # noqa: E402

from rankstudy import formats  # noqa: E402
from rankstudy.config import from_dict  # noqa: E402
from rankstudy.datasets.synthetic import SyntheticConfig, generate  # noqa: E402
from rankstudy.evaluate import aggregate, evaluate_run  # noqa: E402
from rankstudy.lucene import build_index, search  # noqa: E402
from rankstudy.models import build_model  # noqa: E402
from rankstudy.rerank import score_candidates  # noqa: E402
from rankstudy.runs import rerank_to_depth  # noqa: E402
from rankstudy.significance import wilcoxon_p  # noqa: E402
from rankstudy.store import TokenStore  # noqa: E402
from rankstudy.text.embeddings import train_embeddings  # noqa: E402
from rankstudy.text.vocab import build_vocabulary  # noqa: E402
from rankstudy.text.word_store import build_store  # noqa: E402
from rankstudy.train.examples import make_triples  # noqa: E402
from rankstudy.train.loop import TrainConfig, make_validator, train  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MEASURES = ["nDCG@10", "RR@10"]


def prepare(folder: Path, epochs: int) -> dict:
    """The study's passages, BM25 runs, vocabulary, token stores and word vectors."""
    study = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    data = generate(from_dict(SyntheticConfig, study["datasets"]["synthetic-passage"]["synthetic"]), seed=42)
    data.write(folder / "data")
    build_index(folder / "data" / "collection.tsv", folder / "index", threads=1)
    runs, queries = {}, {}
    vocab = build_vocabulary(folder / "data" / "collection.tsv", 5)
    build_store(folder / "data" / "collection.tsv", vocab, folder / "docs")
    for split in ("train", "dev", "test"):
        search(folder / "index", folder / "data" / f"queries.{split}.tsv", folder / f"bm25.{split}.run", "bm25",
               {"k1": 0.9, "b": 0.4}, hits=100, threads=1)
        runs[split] = formats.read_run(folder / f"bm25.{split}.run")
        build_store(folder / "data" / f"queries.{split}.tsv", vocab, folder / f"q.{split}", kind="queries")
        queries[split] = TokenStore(folder / f"q.{split}")
    docs = TokenStore(folder / "docs")
    vectors = train_embeddings(docs, vocab, "word2vec", 64, epochs, 5, seed=1)
    return {"data": data, "runs": runs, "queries": queries, "docs": docs, "vectors": vectors}


def per_query(run, qrels) -> dict[str, dict[str, float]]:
    rows = evaluate_run(run, qrels, MEASURES)
    return {measure: dict(zip(part["qid"], part["value"])) for measure, part in rows.groupby("measure")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--epochs", type=int, default=15, help="word2vec epochs (the learning test's 15)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "precision_effectiveness.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    study = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    training = {**study["neural"]["training"], "device": "cpu"}
    results, lines = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        inputs = prepare(Path(tmp), args.epochs)
        qrels = inputs["data"].qrels
        bm25 = per_query(inputs["runs"]["test"], qrels["test"])
        lines.append("| – | BM25 | – | – | – | – | "
                     + " | ".join(f"{sum(bm25[m].values()) / len(bm25[m]):.4f}" for m in MEASURES) + " | – |")
        triples = make_triples(qrels["train"], inputs["runs"]["train"], 1, 100, 20, seed=42)
        for seed in args.seeds:
            models = {}
            for precision in ("fp32", "bf16"):
                cfg = from_dict(TrainConfig, {**training, "precision": precision}, "training")
                torch.manual_seed(seed)
                model = build_model("tk", {"layers": 1, "heads": 4, "ff_dim": 64, "train_embeddings": False},
                                    inputs["vectors"])
                started = time.perf_counter()
                summary = train(model, triples, inputs["queries"]["train"], inputs["docs"],
                                make_validator(inputs["runs"]["dev"], qrels["dev"], inputs["queries"]["dev"],
                                               inputs["docs"], cfg), cfg, Path(tmp) / f"{precision}.s{seed}", seed)
                models[precision] = (model, summary, time.perf_counter() - started)
            scored = {(trained, scoring): score_candidates(models[trained][0], inputs["runs"]["test"],
                                                           inputs["queries"]["test"], inputs["docs"], 100, 64, 30,
                                                           200, "cpu", progress=False, precision=scoring)
                      for trained, scoring in (("fp32", "fp32"), ("bf16", "bf16"), ("fp32", "bf16"))}
            for key, scores in scored.items():
                results[(seed, *key)] = per_query(rerank_to_depth(inputs["runs"]["test"], scores, 100), qrels["test"])
            for trained, scoring in scored:
                values, summary = results[(seed, trained, scoring)], models[trained][1]
                p = wilcoxon_p(values["nDCG@10"], results[(seed, "fp32", "fp32")]["nDCG@10"])
                means = " | ".join(f"{sum(values[m].values()) / len(values[m]):.4f}" for m in MEASURES)
                lines.append(f"| {seed} | {trained} | {scoring} | {summary['best_step']} "
                             f"| {summary['best_metric']:.4f} | {models[trained][2] / 60:.1f} | {means} "
                             f"| {'–' if (trained, scoring) == ('fp32', 'fp32') else f'{p:.3g}'} |")
    header = ["# TK trained and scored in bf16 against fp32, on the CPU", "",
              f"`python bench/precision_effectiveness.py --seeds {' '.join(map(str, args.seeds))} --epochs "
              f"{args.epochs}`; torch "
              f"{torch.__version__}, {torch.backends.cpu.get_cpu_capability()} kernels, one thread; the default "
              "study's passages (250 test queries), TK p1's model and training settings (word2vec on the passages "
              "only). p: paired two-sided Wilcoxon on per-query nDCG@10 against the fp32 model scored in fp32.", "",
              "| seed | trained | scored | best step | dev RR@10 | training min | test nDCG@10 | test RR@10 | p |",
              "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    args.out.write_text("\n".join(header + lines) + "\n")
    print("\n".join(header + lines))


if __name__ == "__main__":
    main()
