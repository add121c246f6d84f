"""The Snakemake workflow: DAG contents, lint, config validation, and an end-to-end run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers import REPO, assert_drawn

BIN = Path(sys.executable).parent
ENV = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def workflow_copy(tmp_path: Path) -> Path:
    """A fresh working directory holding the workflow (no outputs of other runs)."""
    work = tmp_path / "study"
    work.mkdir()
    for name in ("Snakefile", "workflow", "config", "profiles", "environment.yml", "requirements.lock"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    shutil.copy(REPO / "tests" / "config" / "tiny.yaml", work / "tiny.yaml")
    return work


# files whose content does not depend on where or when a job ran (efficiency.csv and tk_table2, which holds its
# docs/ms column, are timings): a run resumed after kills or run through Slurm must equal a local run in these
DETERMINISTIC = ["data/**/*", "runs/**/*.run", "runs/**/*.json", "results/metrics/**/*.csv",
                 "results/tables/first_stage.csv", "results/tables/tk_table3_4.csv",
                 "results/tables/choppy_table1.csv", "results/choppy/**/*.csv"]


def assert_same_deterministic_files(reference: Path, work: Path, context=None) -> int:
    """Every DETERMINISTIC file that both directories hold is byte-identical; returns how many were compared."""
    compared = 0
    for pattern in DETERMINISTIC:
        for expected in sorted(reference.glob(pattern)):
            relative = expected.relative_to(reference)
            if expected.is_file() and (work / relative).exists():
                assert (work / relative).read_bytes() == expected.read_bytes(), (relative, context)
                compared += 1
    return compared


def local_dataset_config(work: Path, tmp_path: Path, name: str, qrels: str) -> Path:
    """A two-document local dataset ``name`` and ``work/{name}.yaml`` that runs only it."""
    local = tmp_path / name
    local.mkdir()
    (local / "collection.tsv").write_text("d1\tapple banana\nd2\tcherry\n")
    (local / "queries.tsv").write_text("1\tapple\n")
    (local / "qrels.txt").write_text(qrels)
    (work / f"{name}.yaml").write_text(
        f"datasets:\n  {name}:\n    source: local\n    local:\n"
        f"      path: {local}\n      splits:\n        test: {{queries: queries.tsv, qrels: qrels.txt}}\n"
        f"first_stage:\n  datasets: [{name}]\n"
    )
    return local


def snakemake(work: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), *args], cwd=work, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def job_counts(output: str) -> dict[str, int]:
    table = output[output.index("Job stats:"):]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_dry_run_lists_the_study_jobs(tmp_path):
    result = snakemake(workflow_copy(tmp_path), "-n", "--cores", "2")
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout + result.stderr)
    assert counts == {
        # first stage: 3 datasets (passages, documents, the Choppy study's lists) x 2 systems (bm25, ql) x 3 splits
        "dataset_synthetic_passage": 1, "dataset_synthetic_doc": 1, "dataset_synthetic_lists": 1, "index": 3,
        "first_stage": 18,
        "first_stage_table": 1,
        # text: word2vec (it reads the passages and the documents: the documents' store of its vocabulary) and the
        # study encoder's stores (both datasets: the Socialformer runs' warm-start cross-encoder trains on the
        # passages); the study encoder. p2's fastText is the extended config's (nothing in the default uses it)
        "vocabulary": 1, "embeddings": 2, "store_collection": 4, "store_queries": 12, "pretrain_encoder": 1,
        # triples for both datasets, listwise groups for the Socialformer runs
        "examples": 3,
        # TK paper: p1 x 3 seeds, d1, d3, knrm (d2 reuses p1's models on documents; p2 and conv_knrm: extended);
        # TKL paper: 3 baselines + BERT[CLS], TKL 2k/4k, 2 saturation variants; Socialformer paper: the
        # passage cross-encoder (exported as the others' encoder), node, FirstP, MaxP, PARADE, 5 ablations
        # (config/extended.yaml adds the other rows); Choppy paper: DRMM
        "train": 6 + 8 + 10 + 1, "export_encoder": 1,
        # re-ranking dev and test in one job: TK runs (p1 x 3, d1, d2 x 3, d3, knrm), TKL runs (8),
        # Socialformer runs (5), DRMM; the 5 Socialformer ablations re-rank test only (splits: [test]), so they
        # tune no depth; the ensemble p3 and p1's best-validated seed tune their own depths for their full tasks
        "rerank_dev_test": 9 + 8 + 5 + 1, "rerank": 5,
        "tune_depth": 9 + 8 + 5 + 2 + 1, "full_task": 18 + 16 + 15 + 4 + 2, "ensemble": 2,
        "select_seed": 2, "evaluate": 18 + 38 + 32 + 30 + 6 + 4,
        "tk_table2": 1, "tk_table3_4": 1, "tk_view": 1, "efficiency": 1,
        # TKL paper: Tables 1-2, the evidence table, Figs. 1-3 (Fig. 3 from TKL's regions)
        "tkl_table": 2, "tkl_evidence": 1, "tkl_fig1": 1, "tkl_fig2": 1, "tkl_regions": 1, "tkl_fig3": 1,
        # Socialformer paper: Tables 1-2, Figs. 4-6, learning curves
        "socialformer_table": 2, "socialformer_fig4": 1, "socialformer_fig5": 1, "socialformer_fig6": 1,
        "socialformer_curves": 1,
        # Choppy paper: BM25, DRMM and TK-ensemble lists, Table 1, Fig. 1 and Fig. 2's grid (the paper's BM25 lists)
        "choppy_study": 3, "choppy_pool": 3, "choppy_grid": 1, "choppy_table1": 1, "choppy_fig1": 1, "choppy_fig2": 1,
        # the claims scoreboard, the reproduction report (synthetic data: not comparable), the
        # expected-results check (docs/claims.md) and the learning audit of every trained run
        "claims": 1, "reproduction": 1, "check_expected": 1, "learning_audit": 1,
        "all": 1, "total": 346,
    }


def test_preparation_then_the_warm_start_chain_are_scheduled_first(tmp_path):
    """Preparation (datasets to training examples) goes first, then the jobs the Socialformer runs wait on
    (study encoder -> ce-passage -> its export), then every other training; re-ranking, evaluation, reports and
    Choppy's jobs last."""
    result = snakemake(workflow_copy(tmp_path), "-n", "--cores", "2", "--verbose")
    assert result.returncode == 0, result.stderr
    by_priority = {}
    for job in re.split(r"\n\n", result.stdout + result.stderr):
        priority = re.search(r"^\s+priority: (\d+)", job, re.M)
        rule = re.search(r"^(?:local)?rule (\w+):", job, re.M)
        if priority and rule and priority.group(1) != "0":
            output = re.search(r"^\s+output: ([^,\n]+)", job, re.M).group(1)
            by_priority.setdefault(int(priority.group(1)), set()).add((rule.group(1), output))
    assert set(by_priority) == {1, 10, 20}
    # every training but ce-passage's (the warm-start chain, at 10)
    trainings = re.findall(r"^(?:local)?rule train:", result.stdout + result.stderr, re.M)
    assert {rule for rule, _ in by_priority[1]} == {"train"} and len(by_priority[1]) == len(trainings) - 1
    assert by_priority[10] == {("pretrain_encoder", "encoders/study"), ("export_encoder", "models/encoders/ce-passage.s42"),
                               ("train", "models/synthetic-passage/ce_passage/ce-passage/seed42/model.pt")}
    preparation = {rule for rule, _ in by_priority[20]}
    assert preparation == {"dataset_synthetic_passage", "dataset_synthetic_doc", "dataset_synthetic_lists", "index",
                           "first_stage", "vocabulary", "store_collection", "store_queries", "embeddings", "examples"}


def test_the_extended_config_adds_the_rows_beyond_the_default(tmp_path):
    """config/extended.yaml, merged over the default: 5 TKL and 5 Socialformer runs more, each trained once and
    evaluated on dev and test, in the tables the default leaves them out of; and two more seeds (43, 44) of the 19
    runs a claim names (p1 has three already), each re-ranking both tasks (the 5 test-only runs tune no depth)."""
    work = workflow_copy(tmp_path)
    result = snakemake(work, "-n", "--cores", "2", "--configfile", "config/extended.yaml")
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout + result.stderr)
    assert (counts["train"], counts["rerank_dev_test"], counts["rerank"], counts["tune_depth"], counts["choppy_study"],
            counts["total"]) == (27 + 10 + 2 * 19, 25 + 10 + 2 * (19 - 5), 5 + 2 * 5, 27 + 10 + 2 * (19 - 5), 3, 765)
    for run in ("tk-500", "tkl-500", "conv_knrm-1k", "doc-matchpyramid", "doc-co_pacrr",
                "sf-edge", "sf-idcm", "sf-longformer", "sf-bigbird", "sf-qds"):
        assert re.search(rf"models/synthetic-doc/[\w-]+/{run}/seed42/model.pt", result.stdout), run
    for run in ("tkl-2k", "sf-random"):
        assert re.search(rf"models/synthetic-doc/[\w-]+/{run}/seed44/model.pt", result.stdout), run


def test_the_architecture_diagram_is_the_current_rule_graph():
    sys.path.insert(0, str(REPO / "scripts"))
    from rulegraph import START, diagram

    documented = (REPO / "docs" / "architecture.md").read_text()
    assert START + "\n" + diagram() + "\n" in documented, \
        "the rule graph changed: python scripts/rulegraph.py --write docs/architecture.md"


def test_lint_is_clean(tmp_path):
    result = snakemake(workflow_copy(tmp_path), "--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


def test_a_local_collection_config(tmp_path):
    work = workflow_copy(tmp_path)
    local_dataset_config(work, tmp_path, "mini", "1 0 d1 1\n")
    result = snakemake(work, "-n", "--cores", "2", "--configfile", "mini.yaml")
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout + result.stderr)
    # only what it configures: BM25 and QL on its one split (no efficiency benchmark, no claims scoreboard of
    # the default study: none of its claims can be evaluated here); the expected file is the default's
    # (inherited: docs/claims.md), absent here, so check_expected only reports it; the reproduction report says
    # this data is not the papers'
    assert counts == {"dataset_mini": 1, "index": 1, "first_stage": 2, "evaluate": 2, "first_stage_table": 1,
                      "reproduction": 1, "check_expected": 1, "all": 1, "total": 10}
    # run (no pinned cells of its own), its captions and reports describe its own data, never the default's
    # synthetic collections (issue 43)
    with open(work / "mini.yaml", "a") as config:
        config.write('expected: ""\n')
    result = snakemake(work, "--cores", "2", "--configfile", "mini.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    written = [path for path in (work / "results").rglob("*") if path.suffix in (".md", ".tex", ".csv")]
    assert len(written) >= 4 and not [path for path in written if "synthetic" in path.read_text().lower()]


def test_a_test_only_collection_with_neural_runs(tmp_path):
    """A local dataset with a test split only: training on it, or tuning a depth on it, is refused at
    config check; a model trained elsewhere re-ranks it at a fixed rerank_depth."""
    work = workflow_copy(tmp_path)
    local_dataset_config(work, tmp_path, "mini", "1 0 d1 1\n")
    base = "first_stage:\n  datasets: [synthetic-passage, mini]\nneural:\n  runs:\n"
    cases = {
        "train": ("    mini-tk: {model: tk, embeddings: w2v, train: mini, evaluate: [mini]}\n",
                  r"neural.runs.mini-tk trains on dataset 'mini', which has no 'train' and no 'dev' split"),
        "tune": ("    mini-p1: {reuse: p1, evaluate: [mini]}\n",
                 r"neural.runs.mini-p1 is not evaluated on a 'dev' split of 'mini' .* `rerank_depth`"),
    }
    datasets = (work / "mini.yaml").read_text().split("first_stage:")[0]
    for name, (runs, message) in cases.items():
        (work / f"{name}.yaml").write_text(datasets + base + runs)
        result = snakemake(work, "-n", "--cores", "1", "--configfile", f"{name}.yaml")
        assert result.returncode != 0 and re.search(message, result.stdout + result.stderr), result.stderr[-2000:]
        assert "MissingInputException" not in result.stdout + result.stderr
    (work / "fixed.yaml").write_text(datasets + base + "    mini-p1: {reuse: p1, evaluate: [mini], rerank_depth: 20}\n")
    targets = [f"results/metrics/mini/tk.mini-p1.s42{full}.test.csv" for full in ("", "-full")]
    result = snakemake(work, *targets, "-n", "-p", "--cores", "1", "--configfile", "fixed.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    counts = job_counts(output)
    assert counts["rerank"] == 1 and counts["full_task"] == 1 and "tune_depth" not in counts  # p1 trains on synthetic
    assert "apply-depth --first-stage runs/mini/bm25.test.run --neural runs/mini/tk.mini-p1.s42.test.run --depth 20" \
        in output
    # p1's vocabulary (synthetic words) must know half of mini's tokens: the store step, before any model, checks it
    assert ("store --input data/mini/collection.tsv --kind collection --vocab text/w2v/vocab --min-coverage 0.5"
            in output)


def trec_dl_folder(path: Path, queries: int = 6) -> Path:
    """A tiny folder in the layout of config/trec-dl-passages.yaml: passages, queries, full judgments (some of
    passages without text), BM25's lists."""
    path.mkdir()
    (path / "collection.tsv").write_text("".join(f"p{i}\tpassage {i} about topic {i % queries}\n" for i in range(18)))
    (path / "queries.tsv").write_text("".join(f"{q}\ttopic {q}\n" for q in range(queries)))
    (path / "qrels.full.txt").write_text("".join(f"{q} 0 p{q} 3\n{q} 0 p{q + queries} 1\n{q} 0 unseen{q} 2\n"
                                                 for q in range(queries)))
    (path / "bm25.run").write_text("".join(f"{q} Q0 p{d} {r + 1} {9 - r} bm25\n" for q in range(queries)
                                           for r, d in enumerate((q, q + queries, q + 2 * queries))))
    return path


def test_the_trec_dl_config_runs_query_folds_on_any_folder_of_its_layout(tmp_path):
    """config/trec-dl-passages.yaml on another folder of the layout, by its path alone: the folder's BM25 lists
    (official route), 5 fold datasets, one model per fold and run, each dataset's run merged from the folds."""
    work = workflow_copy(tmp_path)
    folder = trec_dl_folder(tmp_path / "dl-tiny")
    text = (work / "config" / "trec-dl-passages.yaml").read_text()
    assert text.count("resources/data/trec-dl20-passage-top100") == 1
    (work / "tiny-dl.yaml").write_text(text.replace("resources/data/trec-dl20-passage-top100", str(folder)))
    result = snakemake(work, "-n", "-p", "--cores", "2", "--configfile", "tiny-dl.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    counts = job_counts(output)
    assert counts.pop("total") == sum(counts.values())
    runs, folds = 4, 5  # TK, KNRM, BERT[CLS], the bi-encoder
    assert counts == {
        "dataset_trec_dl_passages": 1, "official_candidates": 1, "folds_trec_dl_passages": 1,
        "fold_candidates": folds * 3,  # each fold's train, dev and test lists of BM25
        "dense_index": 1, "dense_search": 1,  # the zero-shot MiniLM re-scorer
        "vocabulary": 1, "embeddings": 2, "store_collection": 2, "store_queries": 2,  # w2v and MiniLM's WordPiece
        "examples": folds, "train": runs * folds, "rerank": runs * folds, "fold_merge": runs, "full_task": runs,
        # the dataset: BM25, the re-scorer, each run's two tasks; each fold: BM25 and each run (learning audit)
        "evaluate": 2 + 2 * runs + folds * (1 + runs),
        "first_stage_table": 1, "tk_table2": 1, "learning_audit": 1, "all": 1}
    assert "official-candidates --run data/trec-dl-passages/candidates.run" in output
    assert ("official-candidates --run runs/trec-dl-passages/bm25.test.run --queries "
            "data/trec-dl-passages-fold3/queries.train.tsv") in output
    assert ("merge-runs --runs " + " ".join(f"runs/trec-dl-passages-fold{i}/bi_encoder.bi.s42.test.run"
                                             for i in range(1, 6))) in output
    assert "--model-dir models/trec-dl-passages-fold2/tk/tk/seed42" in output  # fold 2's test by fold 2's model


def msmarco_sample_folder(path: Path, queries: int = 12) -> Path:
    """A tiny folder in the layout of the MS MARCO training sample: queries, a relevant passage each, a few given
    negatives."""
    path.mkdir()
    (path / "collection.tsv").write_text("".join(f"m{i}\tanswer {i} about subject {i}\n" for i in range(queries)))
    (path / "queries.tsv").write_text("".join(f"t{q}\tsubject {q}\n" for q in range(queries)))
    (path / "qrels.txt").write_text("".join(f"t{q} 0 m{q} 1\n" for q in range(queries)))
    (path / "negatives.tsv").write_text("".join(f"t{q}\tm{q + 1}\n" for q in range(3)))
    return path


MSMARCO_PATHS = ("resources/data/msmarco-passage-train-sample", "resources/data/trec-dl20-passage-top100",
                 "resources/data/trec-dl21-passage-top100")


def msmarco_config(work: Path, tmp_path: Path, extra: str = "") -> tuple[Path, Path, Path]:
    """config/msmarco-passages.yaml on tiny folders, by their paths alone (``extra``: a second config file)."""
    folders = (msmarco_sample_folder(tmp_path / "sample"), trec_dl_folder(tmp_path / "year-x"),
               trec_dl_folder(tmp_path / "year-y", queries=4))
    text = (work / "config" / "msmarco-passages.yaml").read_text()
    for path, folder in zip(MSMARCO_PATHS, folders):
        assert text.count(path) == 1  # one path a folder: the anchors carry it to the pool
        text = text.replace(path, str(folder))
    (work / "tiny-msmarco.yaml").write_text(text)
    (work / "smaller.yaml").write_text(extra)
    return folders


def test_the_msmarco_config_trains_on_one_folder_and_tests_on_any_two_of_the_trec_dl_layout(tmp_path):
    """config/msmarco-passages.yaml: one Lucene BM25 over the pooled passages for the training queries' negatives
    and validation lists; each test folder's given BM25 lists re-ranked by the models trained once."""
    work = workflow_copy(tmp_path)
    msmarco_config(work, tmp_path)
    result = snakemake(work, "-n", "-p", "--cores", "2", "--configfile", "tiny-msmarco.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    counts = job_counts(output)
    assert counts.pop("total") == sum(counts.values())
    trained, tests = 6, 2  # TK (two seeds), KNRM, CONV-KNRM, BERT[CLS], the bi-encoder
    assert counts == {
        "dataset_msmarco_train": 1, "dataset_dl_test_a": 1, "dataset_dl_test_b": 1,
        "index": 1, "first_stage": 2, "official_candidates": tests, "dense_index": tests, "dense_search": tests,
        # MiniLM's input table (a vocabulary) and MiniLM's word pieces; 3 datasets, 4 query splits
        "vocabulary": 1, "embeddings": 2, "store_collection": 2 * 3, "store_queries": 2 * 4, "examples": 1,
        # the two teachers' vectors of the pool and queries; the BM25 and mined triples scored by their ensemble
        "teacher_vectors": 2, "teacher_triples": 1,
        "train": trained, "rerank": trained * tests, "full_task": trained * tests,
        # the training pool's BM25 (train, dev); each test folder's BM25, MiniLM and each run's two tasks
        "evaluate": 2 + tests * (2 + 2 * trained),
        "efficiency": 1, "first_stage_table": 1, "tk_table2": 1, "tk_tradeoff": 1, "tk_view": 1,
        "learning_audit": 1, "claims": 1, "reproduction": 1, "all": 1}
    assert ("examples --qrels data/msmarco-train/qrels.train.txt --candidates runs/msmarco-train/bm25.train.run"
            in output)
    assert "--judged-negatives" in output
    assert "--dev-run runs/msmarco-train/bm25.dev.run" in output
    assert ("rerank --model-dir models/msmarco-train/tk/tk/seed43 --embeddings text/minilm-table/embeddings.npy "
            "--queries text/minilm-table/dl-test-b/queries.test --documents text/minilm-table/dl-test-b/collection "
            "--candidates runs/dl-test-b/bm25-given.test.run") in output
    assert "encoder_table" in output
    assert ("teacher-triples --vectors teachers/msmarco-train/minilm teachers/msmarco-train/splade --triples "
            "train/msmarco-train/triples.tsv") in output
    assert "--examples train/msmarco-train/teacher.ensemble.tsv" in output  # the distilled runs' examples

    # the extended variant adds TK on word2vec, BERT[CLS]'s second seed and the learning curve's nine runs
    extended = snakemake(work, "-n", "--cores", "2", "--configfile", "tiny-msmarco.yaml",
                         "config/msmarco-passages-extended.yaml")
    assert extended.returncode == 0, extended.stderr[-3000:]
    more = job_counts(extended.stdout + extended.stderr)
    # ... and TK trained with the pairwise hinge, with each teacher alone (their own scored triples), with its
    # vectors fine-tuned and with a higher rate
    assert more["train"] == trained + 2 + 9 + 3 + 2 and more["tk_learning_curve"] == 1 and more["teacher_triples"] == 3
    assert more["vocabulary"] == 2 and more["embeddings"] == 3  # word2vec's


@pytest.mark.slow
def test_the_msmarco_config_runs_end_to_end_and_its_captions_describe_the_folders(tmp_path):
    """The config and its extended variant on tiny folders with their sizes shrunk (steps, validation, benchmark,
    the learning curve's queries): every job runs, the claims are judged, Table 2's caption counts the queries and
    passages of the folders it was given, and the learning curve has each model's points."""
    work = workflow_copy(tmp_path)
    sample, year_x, year_y = msmarco_config(work, tmp_path, """
datasets: {msmarco-train: {local: {held_out: {queries: 3}}}}
neural:
  embeddings: {w2v: {dim: 16, epochs: 2, vocab_min_count: 1}}
  models: {tk-300: {heads: 2}}
  training: {max_steps: 4, validate_every: 2, validation_queries: null}
  runs:
    bert: {training: {max_steps: 2, validate_every: 2, batch_size: 2}}
    bi: {training: {max_steps: 2, validate_every: 2, batch_size: 2}}
    tk-1k: {training: {loss: margin_mse, teacher: {scores: ensemble}, train_queries: 2}}
    tk-2k: {training: {loss: margin_mse, teacher: {scores: ensemble}, train_queries: 4}}
    tk-4k: {training: {loss: margin_mse, teacher: {scores: ensemble}, train_queries: 6}}
    knrm-1k: {training: {loss: margin_mse, teacher: {scores: ensemble}, train_queries: 2}}
    knrm-2k: {training: {loss: margin_mse, teacher: {scores: ensemble}, train_queries: 4}}
    knrm-4k: {training: {loss: margin_mse, teacher: {scores: ensemble}, train_queries: 6}}
    bert-1k: {training: {max_steps: 2, validate_every: 2, batch_size: 2, train_queries: 2}}
    bert-2k: {training: {max_steps: 2, validate_every: 2, batch_size: 2, train_queries: 4}}
    bert-4k: {training: {max_steps: 2, validate_every: 2, batch_size: 2, train_queries: 6}}
  efficiency:
    setup: {batch: 4, doc_length: 16, query_length: 4, dim: 16, vocab: 100, repeats: 1, threads: 1, train_batch: 2}
    models:
      tk-300: {heads: 2}
      bert_cat: {batch: 2, train_batch: 2, doc_length: 16}
      bi_encoder: {batch: 2, train_batch: 2, doc_length: 16}
""")
    result = snakemake(work, "--cores", "2", "--configfile", "tiny-msmarco.yaml",
                       "config/msmarco-passages-extended.yaml", "smaller.yaml", timeout=1500)
    assert result.returncode == 0, result.stderr[-4000:]
    caption = (work / "results" / "tables" / "tk_table2.md").read_text().split("\n\n")[0]
    assert str(year_x) in caption and str(year_y) in caption and str(sample) in caption
    assert "dl-test-a: 6 test queries, 18 documents" in caption
    assert "dl-test-b: 4 test queries, 18 documents" in caption
    # the sample's 12 passages and the test folders' 18 (the same ids in both tiny folders) pooled
    assert "msmarco-train: 9 train queries, 3 dev queries, 30 documents" in caption
    assert "2020" not in caption and "2021" not in caption
    table = pd.read_csv(work / "results" / "tables" / "tk_table2.csv")
    assert set(table["dataset"]) == {"dl-test-a", "dl-test-b"} and "docs/ms (CPU)" in table.columns
    claims = pd.read_csv(work / "results" / "claims.csv")
    assert len(claims) == 9 and not claims["outcome"].str.contains("not run").any()
    assert (work / "results" / "figures" / "tk_tradeoff.png").is_file()
    assert set(table["run"]) >= {"tk", "tk-w2v", "knrm", "bert"}
    curve = pd.read_csv(work / "results" / "tables" / "learning_curve.csv")
    points = curve.dropna(subset=["training queries"])
    assert {(series, int(queries)) for series, queries in zip(points["series"], points["training queries"])} == {
        (series, queries) for series in ("TK", "KNRM", "BERT[CLS]") for queries in (2, 4, 6, 9)}
    assert (work / "results" / "figures" / "learning_curve.png").is_file()


EVIL = "x; touch PWNED #"


@pytest.mark.parametrize("config, target, value", [
    (f"choppy:\n  runs:\n    ext: {{run: '{EVIL}run', qrels: '{EVIL}qrels'}}\n",
     "results/choppy/ext/results.csv", f"{EVIL}run"),
    (f"choppy:\n  runs:\n    ext: {{run: r.txt, qrels: q.txt, train_qids: '{EVIL}', dev_qids: d, test_qids: t}}\n",
     "results/choppy/ext/grid.csv", EVIL),
    (f"neural:\n  embeddings:\n    evil: {{method: wordpiece, encoder: '{EVIL}'}}\n",
     "text/evil/synthetic-passage/collection", EVIL),
])
def test_config_values_reach_the_shell_quoted(tmp_path, config, target, value):
    """A config value pasted into a rule's shell command is one argument, never shell syntax: each
    command printed by the dry run is split as the shell would and must hold the value as one word."""
    work = workflow_copy(tmp_path)
    for name in (f"{EVIL}run", f"{EVIL}qrels", "r.txt", "q.txt", EVIL, "d", "t"):
        (work / name).write_text("1 Q0 d1 1 1.0 x\n")
    (work / "evil.yaml").write_text(config)
    result = snakemake(work, target, "-n", "-p", "--cores", "1", "--configfile", "evil.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    commands = [line for line in (result.stdout + result.stderr).splitlines()
                if "python -m rankstudy" in line and "PWNED" in line]
    assert commands  # the value does reach a command
    for command in commands:
        command = command[command.index("python -m rankstudy"):]
        assert value in shlex.split(command, comments=True), command
    assert not (work / "PWNED").exists()


@pytest.mark.parametrize("config", [
    "choppy:\n  runs:\n    'a;touch PWNED': {run: r.txt, qrels: q.txt}\n",
    "choppy:\n  runs:\n    ext: {dataset: 'synthetic-passage;touch PWNED', system: bm25}\n",
    "neural:\n  runs:\n    'p9 $(touch PWNED)': {reuse: p1}\n",
    "neural:\n  models:\n    'tk`touch PWNED`': {model: tk}\n",
    "neural:\n  embeddings:\n    'e;touch PWNED': {method: wordpiece, encoder: minilm}\n",
    "datasets:\n  x:\n    source: local\n    local: {path: p, splits: {'test;touch PWNED': {queries: q, qrels: r}}}\n",
])
def test_names_that_become_paths_must_match_the_schema_pattern(tmp_path, config):
    work = workflow_copy(tmp_path)
    (work / "evil.yaml").write_text(config)
    result = snakemake(work, "-n", "--cores", "1", "--configfile", "evil.yaml")
    assert result.returncode != 0 and "does not match" in result.stdout + result.stderr, result.stderr[-2000:]
    assert not (work / "PWNED").exists()


def claim_config(**keys):
    """A config with one claim (config claims:), its keys changed or added by the test."""
    claim = {"id": "x", "paper": "TKL", "source": "paper", "statement": "s", "dataset": "synthetic-doc",
             "measure": "nDCG@10", "a": "{run: tkl-2k}", "b": "{run: d1}", **keys}
    return "claims:\n  - {" + ", ".join(f"{key}: {value}" for key, value in claim.items()) + "}\n"


@pytest.mark.parametrize("config, message", [
    ("first_stage:\n  systems:\n    bm25: {model: bm25, k1: high}\n", r"'high' is not of type 'number'"),
    ("first_stage:\n  systems:\n    ql: {model: ql, k1: 0.9}\n", r"k1"),
    ("evalution:\n  measures: [AP]\n", r"'evalution' was unexpected"),
    ("first_stage:\n  datasets: [nowhere]\n", r"first_stage.datasets names 'nowhere'"),
    ("datasets:\n  x:\n    source: local\n", r"'local' is a required property"),
    # issue 16: typos and values out of range stop the dry run, naming the key
    ("neural:\n  training:\n    max_step: 5\n", r"'max_step' was unexpected"),
    ("neural:\n  runs:\n    p1:\n      training: {patiense: 2}\n", r"'patiense' was unexpected"),
    ("neural:\n  runs:\n    p1:\n      training: {max_steps: -3}\n", r"-3 is less than the minimum of 1"),
    ("choppy:\n  model: {epochs: -1}\n", r"-1 is less than the minimum of 1"),
    ("choppy:\n  bicut: {epoch: 3}\n", r"'epoch' was unexpected"),
    ("longdoc:\n  top: 30\n", r"section 'longdoc' is now called tkl"),  # renamed sections name the new key
    ("neural:\n  runs:\n    p1: {seeds: [-1]}\n", r"-1 is less than the minimum of 0"),
    ("datasets:\n  synthetic-passage:\n    rel_threshold: {test: 0}\n",
     r"On instance\['datasets'\]\['synthetic-passage'\]\['rel_threshold'\]"),
    # claims (docs/claims.md): the schema refuses a malformed claim; the workflow names the claim of a bad name
    # (the checks across sections, claims included, are tested on the plan itself: test_study_plan.py)
    (claim_config(colour="red"), r"'colour' was unexpected"),
    (claim_config(direction="maybe"), r"'maybe' is not one of \['better', 'not_worse', 'bounds'\]"),
    (claim_config(b="{run: d1, system: bm25}"), r"is not valid under any of the given schemas"),
    (claim_config(b="{run: nowhere}"), r"claims: claim 'x': run 'nowhere' is not a key of neural.runs"),
])
def test_a_bad_config_fails_with_a_clear_message(tmp_path, config, message):
    work = workflow_copy(tmp_path)
    (work / "bad.yaml").write_text(config)
    result = snakemake(work, "-n", "--cores", "1", "--configfile", "bad.yaml")
    assert result.returncode != 0
    assert re.search(message, result.stdout + result.stderr), result.stdout + result.stderr


@pytest.mark.slow
def test_the_tiny_study_runs_end_to_end(tiny_study):
    work = tiny_study  # run once per session (conftest.py), shared with test_slurm and test_dvc
    table = (work / "results" / "tables" / "first_stage.md").read_text()
    for dataset in ("synthetic-passage", "synthetic-doc"):
        for system in ("bm25", "ql"):
            for split in ("train", "dev", "test"):
                assert re.search(rf"\| {dataset}\s+\| {split}\s+\| {system}\s+\|", table), (dataset, system, split)
    results = work / "results"
    assert "| p1 " in (results / "tables" / "tk_table2.md").read_text()
    tables3_4 = (results / "tables" / "tk_table3_4.md").read_text()
    assert tables3_4.count("| best ") == 10 and "| Table 4 " in tables3_4  # p1 on passages, d3 on documents
    assert "top document" in (results / "tk_view.html").read_text()
    assert "docs_per_ms" in (results / "efficiency.csv").read_text()
    audit = pd.read_csv(results / "tables" / "learning.csv")  # one row per trained run and seed
    assert {"p1", "d1", "knrm"} <= set(audit["run"]) and audit["best validation"].notna().all()
    choppy = (results / "tables" / "choppy_table1.md").read_text()
    assert "| Choppy " in choppy and "| Oracle " in choppy and "| BiCut " in choppy
    assert "cut sd (F1)" in choppy and "p vs Greedy-k (F1)" in choppy and "Choppy d=16, 2 heads, 1 layers" in choppy
    histogram = pd.read_csv(results / "figures" / "choppy_fig1.csv")
    assert {"run", "metric", "method", "1", "2-5"} <= set(histogram.columns)
    for figure in ("choppy_fig1", "choppy_fig2"):
        assert_drawn(results / "figures" / f"{figure}.png", results / "figures" / f"{figure}.pdf")
    table1 = (results / "tables" / "tkl_table1.md").read_text()
    for row in ("BM25", "PACRR", "CO-PACRR", "MatchPyramid", "BERT[CLS] (200)", "TKL (2,000)", "TKL (4,000)"):
        assert f"| {row} " in table1, row
    assert "| embedding " in (results / "tables" / "tkl_table2.md").read_text()
    assert "token 200 or later" in (results / "tables" / "tkl_evidence.md").read_text()
    for figure in ("tkl_fig1", "tkl_fig2", "tkl_fig3"):
        assert_drawn(results / "figures" / f"{figure}.png", results / "figures" / f"{figure}.pdf")
    # the study encoder, saved as a Hugging Face directory (masked-LM pre-trained for 3 steps)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "study_encoder.json"):
        assert (work / "encoders" / "study" / name).is_file(), name
    assert len((work / "encoders" / "study" / "pretrain.csv").read_text().splitlines()) == 1 + 3
    # the Socialformer-paper runs start from the passage cross-encoder's exported encoder
    encoder = "models/encoders/ce-passage.s7"
    for name in ("config.json", "tokenizer.json", "score_head.pt"):  # the cross-encoder's head goes along
        assert (work / encoder / name).is_file(), name
    settings = json.loads((work / "models/synthetic-doc/socialformer/sf-node/seed7/config.json").read_text())
    assert settings["model_settings"]["encoder"] == encoder
    assert "| Socialformer (node) " in (results / "tables" / "socialformer_table1.md").read_text()
    curves = (results / "figures" / "socialformer_curves.csv").read_text()
    assert "BERT[CLS] warm start (passages)," in curves and "Socialformer (node)," in curves
    # the claims scoreboard: every default claim evaluated or "not run" (the ablations tiny.yaml leaves out)
    claims = pd.read_csv(results / "claims.csv")
    assert {"tk-beats-bm25", "tkl-gain-late", "sf-patterns", "choppy-f1-tk", "oracle-dcg-bm25"} <= set(claims["id"])
    assert set(claims["outcome"]) <= {"holds", "fails", "not run"}
    assert set(claims[claims["id"] == "sf-patterns"]["outcome"]) == {"not run"}
    assert set(claims[claims["id"].str.startswith("oracle-")]["outcome"]) == {"holds"}  # true by construction
    assert (results / "claims.md").read_text().startswith("Claims scoreboard: ")
    # synthetic data: the reproduction report compares nothing with the papers and says why
    assert "not comparable" in (results / "reproduction.md").read_text()
    # the test's workflow copy has no tests/config/expected/: reported, not failed (the next test checks it)
    assert (results / "check_expected.txt").read_text().startswith("no expectations: ")
    for rule in ("index", "first_stage", "evaluate", "report", "train", "rerank"):
        assert any((work / "logs" / rule).rglob("*.log")), rule
    assert list((work / "benchmarks" / "anserini").glob("index.*.json"))
    # the study's time, reported at its end (the Snakefile's onsuccess): every job's benchmark file summed
    time_report = (work / "logs" / "study_time.md").read_text()
    jobs = len(list((work / "benchmarks").rglob("*.tsv")))
    assert f"| **study** | all | {jobs} | **" in time_report and "No speed comparison" in time_report
    assert re.search(r"Goal: 15 job-minutes: \*\*(within|over)\*\*", time_report), time_report[:600]
    assert "Critical path (" in time_report  # the run's own Snakemake log
    # a second run has nothing to do
    again = snakemake(work, "-n", "--cores", "2", "--configfile", "tiny.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr
    report = snakemake(work, "--cores", "1", "--configfile", "tiny.yaml", "--report", "results/report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    assert (work / "results" / "report.html").stat().st_size > 10_000
    assert "1. Claims" in (work / "results" / "report.html").read_text()


@pytest.mark.slow
def test_the_tiny_study_matches_its_expected_results(tiny_study):
    """Every headline table cell of the tiny run as pinned (CPU runs are deterministic; after an intended
    change: python -m rankstudy check-expected --expected tests/config/expected/tiny.yaml --tables-dir
    results/tables --update on a tiny run, docs/claims.md)."""
    result = subprocess.run([sys.executable, "-m", "rankstudy", "check-expected", "--expected",
                             str(REPO / "tests" / "config" / "expected" / "tiny.yaml"),
                             "--tables-dir", str(tiny_study / "results" / "tables")],
                            capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "within tolerance" in result.stdout


@pytest.mark.slow
def test_bad_input_fails_the_run_cleanly(tmp_path):
    work = workflow_copy(tmp_path)
    local = local_dataset_config(work, tmp_path, "broken", "1 0 d1 1\n1 0 d2 two\n")
    result = snakemake(work, "--cores", "1", "--configfile", "broken.yaml")
    assert result.returncode != 0
    log = (work / "logs" / "data" / "broken.log").read_text()
    assert f"{local / 'qrels.txt'}:2: expected an integer relevance grade" in log
    assert "Traceback" not in log
    assert not (work / "data" / "broken").exists() or not any((work / "data" / "broken").iterdir())


def test_choppy_on_an_external_run_by_config_alone(tmp_path):
    work = workflow_copy(tmp_path)
    (tmp_path / "run.txt").write_text("1 Q0 d1 1 2.0 x\n1 Q0 d2 2 1.0 x\n")
    (tmp_path / "qrels.txt").write_text("1 0 d1 1\n")
    text = (work / "config" / "choppy-external.yaml").read_text()
    text = text.replace("path/to/run.txt", str(tmp_path / "run.txt")).replace("path/to/qrels.txt", str(tmp_path / "qrels.txt"))
    (work / "external.yaml").write_text(text)
    result = snakemake(work, "results/tables/choppy_table1.md", "-n", "--cores", "1", "--configfile", "external.yaml")
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout + result.stderr)
    assert counts == {"choppy_study": 1, "choppy_pool": 1, "choppy_table1": 1, "total": 3}


def test_choppy_on_the_papers_lists_over_repeated_splits(tmp_path):
    """config/choppy-robust04.yaml, its lists' folder swapped for a tiny one: 10 random splits of the BM25 and the
    DRMM lists (repeat r: seed 42 + r), 3 training seeds on the lists' own split, each pooled, and the paper's
    claims and Table 1 cells beside them; no first stage, nothing of the default study."""
    work = workflow_copy(tmp_path)
    lists = tmp_path / "lists"
    lists.mkdir()
    for name in ("bm25.run", "drmm.run", "qrels.txt", "bm25.train.qids", "bm25.test.qids", "drmm.train.qids",
                 "drmm.test.qids"):
        (lists / name).write_text("1\n")
    text = (work / "config" / "choppy-robust04.yaml").read_text()
    assert text.count("resources/data/robust04-runs/") == 12
    (work / "robust04.yaml").write_text(text.replace("resources/data/robust04-runs/", f"{lists}/"))
    result = snakemake(work, "-n", "-p", "--cores", "2", "--configfile", "robust04.yaml")
    assert result.returncode == 0, result.stderr
    counts = job_counts(result.stdout + result.stderr)
    assert counts == {"choppy_study": 2 * 10 + 2 * 3, "choppy_pool": 4, "choppy_table1": 1, "choppy_fig1": 1,
                      "claims": 1, "reproduction": 1, "all": 1, "total": 35}
    commands = [line for line in result.stdout.splitlines() if "rankstudy choppy-study" in line]
    assert sum("--repeat 9 " in command for command in commands) == 2  # bm25, drmm
    source = [command for command in commands if "/bm25.train.qids" in command]
    assert len(source) == 3 and all("/bm25.test.qids" in command and "--dev-qids" not in command for command in source)
    settings = json.loads(shlex.split(commands[0])[shlex.split(commands[0]).index("--config") + 1])
    assert settings["model"]["ff_layers"] == 1 and settings["model"]["batch_size"] == 64  # the paper's
    assert settings["model"]["lr"] == 1e-3 and settings["dev_fraction"] == 0 and settings["repeats"] == 10


@pytest.mark.slow
def test_a_changed_input_retrains_through_snakemake(tmp_path):
    """Issue 16: after an upstream change Snakemake reruns `train`, deleting model.pt and log.csv; the
    job must train on the new examples (not 'resume' the finished checkpoint) and write both again."""
    work = workflow_copy(tmp_path)
    model = "models/synthetic-passage/knrm/knrm/seed7"
    result = snakemake(work, f"{model}/model.pt", "--cores", "2", "--configfile", "tiny.yaml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    before = json.loads((work / model / "config.json").read_text()).get("inputs")
    (work / "changed.yaml").write_text("neural:\n  examples:\n    negatives_depth: 20\n")
    again = snakemake(work, f"{model}/model.pt", "--cores", "2", "--configfile", "tiny.yaml", "changed.yaml")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    counts = job_counts(again.stdout + again.stderr)
    assert counts.get("examples") == 1 and counts.get("train") == 1, counts
    assert (work / model / "log.csv").is_file()
    assert json.loads((work / model / "config.json").read_text())["inputs"]["examples"] != before["examples"]
    assert "training starts afresh" in (work / "logs/train/synthetic-passage/knrm.knrm.s7.log").read_text()
