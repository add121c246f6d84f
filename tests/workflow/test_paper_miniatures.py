"""The paper configs run, not only plan: each config/paper/NAME.yaml with its miniature
(config/paper/miniature/NAME.yaml, given after it) executes end to end on a CPU.

The miniature changes sizes only, so its dry run lists the paper config's jobs, rule by rule and output by
output (checked without running anything). The slow test runs it on miniature inputs in the real formats
(tests/workflow/paper_miniature.py: an IR_DATASETS_HOME under ir_datasets' file names, a GloVe text file, a
bert-base-uncased-shaped directory), offline, and checks what the paper config promises: every job
succeeds, every table names the paper's rows and columns, every claim is judged, and every legible reported
cell of config/paper/reported/NAME.yaml stands beside a produced cell.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import REPO, config_file
from paper_miniature import ROBUST04_NO_RELEVANT, bert_directory, irds_home, prepare
from test_paper_configs import CLOSED_PORT, parse_jobs
from test_workflow import BIN, ENV, workflow_copy

# the papers with a miniature, and what each reads from outside the workflow
MINIATURES = {"tk": dict(datasets=("msmarco-passage", "msmarco-document"), glove=True, bert=False),
              "tkl": dict(datasets=("msmarco-document",), glove=True, bert=True),
              "socialformer": dict(datasets=("msmarco-document",), glove=False, bert=True, ance=True),
              "choppy": dict(datasets=("disks45",), glove=False, bert=False)}
# paper configs without a miniature yet; a new paper config must come with one
NOT_YET: set[str] = set()
# the keys a miniature may set (patterns; * one name): sizes, threads and the device, never a run, model kind,
# table or claim (Choppy's: its epochs, BiCut's width and the lists' length it reads; the d x heads grid of Fig. 2
# and the repeats stay)
SIZE_KEYS = ("first_stage.threads", "first_stage.systems.*.device", "first_stage.systems.*.batch_size",
             "neural.threads", "neural.device", "neural.training", "neural.examples", "neural.rerank.batch_size",
             "neural.efficiency.setup", "neural.efficiency.models.*.batch", "neural.embeddings.*.bucket",
             "neural.runs.*.training.max_steps", "choppy.n", "choppy.device", "choppy.model.epochs",
             "choppy.model_by_metric.*.epochs", "choppy.bicut.epochs", "choppy.bicut.hidden")


def miniature(name: str) -> Path:
    return REPO / "config" / "paper" / "miniature" / f"{name}.yaml"


def _size_key(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) and path.count(".") == pattern.count(".") for pattern in SIZE_KEYS)


def _key_paths(tree: dict, prefix: str = "") -> set[str]:
    """The dotted keys of ``tree``, down to a size key or a leaf."""
    paths = set()
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if not _size_key(path) and isinstance(value, dict):
            paths |= _key_paths(value, path + ".")
        else:
            paths.add(path)
    return paths


def offline_env(home: Path) -> dict[str, str]:
    """The test environment with ir_datasets at ``home`` and no network (every proxy a closed port)."""
    return dict(ENV, IR_DATASETS_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                HTTP_PROXY=CLOSED_PORT, HTTPS_PROXY=CLOSED_PORT, ALL_PROXY=CLOSED_PORT,
                http_proxy=CLOSED_PORT, https_proxy=CLOSED_PORT, all_proxy=CLOSED_PORT)


def miniature_workflow(tmp: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A fresh workflow copy under ``tmp`` with the miniature inputs of paper config ``name``, and its offline
    environment."""
    work = workflow_copy(tmp)
    prepare(work, tmp / "ir_datasets_home", **MINIATURES[name])
    return work, offline_env(tmp / "ir_datasets_home")


def snakemake(work: Path, env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=timeout)


def configfiles(name: str) -> list[str]:
    return ["--configfile", f"config/paper/{name}.yaml", f"config/paper/miniature/{name}.yaml"]


@pytest.fixture(scope="module")
def dry_work(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("miniature-dry")
    home = tmp / "ir_datasets_home"
    home.mkdir()
    return workflow_copy(tmp), offline_env(home)


def test_every_paper_config_has_a_miniature():
    papers = {path.stem for path in (REPO / "config" / "paper").glob("*.yaml")}
    assert papers - NOT_YET == {path.stem for path in (REPO / "config" / "paper" / "miniature").glob("*.yaml")}
    assert papers - NOT_YET == set(MINIATURES)


@pytest.mark.parametrize("name", sorted(MINIATURES))
def test_the_miniature_changes_sizes_only(name):
    keys = _key_paths(yaml.safe_load(miniature(name).read_text()))
    assert all(_size_key(key) for key in keys), sorted(key for key in keys if not _size_key(key))


@pytest.mark.parametrize("name", sorted(MINIATURES))
def test_the_miniature_lists_the_paper_configs_jobs(dry_work, name):
    """Rule by rule the same jobs with the same outputs: a rule, run, table or figure the paper config gains
    is one its miniature runs too."""
    work, env = dry_work
    plans = {}
    for label, files in (("paper", ["--configfile", f"config/paper/{name}.yaml"]), ("miniature", configfiles(name))):
        result = snakemake(work, env, "-n", "-p", *files)
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        plans[label] = parse_jobs(result.stdout)
    paper, mini = plans["paper"], plans["miniature"]
    assert Counter(job.rule for job in mini) == Counter(job.rule for job in paper)
    assert {path for job in mini for path in job.outputs} == {path for job in paper for path in job.outputs}
    for job in mini:  # no GPU asked for: the miniature runs on a CPU
        assert job.resources.get("gpu", "0") == "0", job.rule


def test_every_encoder_model_of_a_paper_config_builds_on_a_bert_base_shaped_encoder(tmp_path):
    """A model checks its settings against its encoder (positions, passage lengths) when a job builds it, hours
    into a cluster run; here every paper config's encoder models are built on a random BERT with
    bert-base-uncased's 512 positions (FirstP's passage_length 509 left no room for a query)."""
    import numpy as np

    from rankstudy.efficiency import MEASUREMENT_KEYS
    from rankstudy.models import build_model

    encoder = str(bert_directory(tmp_path / "bert", {"word"}, seed=0, hidden=8, layers=1))
    built = 0
    for path in sorted((REPO / "config" / "paper").glob("*.yaml")):
        neural = yaml.safe_load(path.read_text()).get("neural", {})
        entries = {**neural.get("models", {}), **neural.get("efficiency", {}).get("models", {})}
        for settings in entries.values():
            if str(settings.get("encoder", "")).endswith("bert-base-uncased"):
                config = {k: v for k, v in settings.items() if k != "model" and k not in MEASUREMENT_KEYS}
                build_model(settings["model"], {**config, "encoder": encoder}, np.zeros((10, 4), np.float32))
                built += 1
    assert built >= 15


def test_ir_datasets_reads_the_robust04_miniature_offline(tmp_path):
    """The Choppy miniature's Robust04 as its dataset jobs read it: disks45's documents from the local copy (its
    TrecDocs raises after reading them when the globs match another number of files than 2,295), the topics
    and the qrels, and each of Huston & Croft's five folds with topics to train, validate and test on."""
    home = tmp_path / "ir_datasets_home"
    built = irds_home(home, seed=7, datasets=("disks45",))["disks45"]
    script = """if True:
        import json, ir_datasets
        robust = ir_datasets.load("disks45/nocr/trec-robust-2004")
        folds = {k: sorted(q.query_id for q in ir_datasets.load(f"disks45/nocr/trec-robust-2004/fold{k}").queries_iter())
                 for k in range(1, 6)}
        print(json.dumps({"docs": [d.doc_id for d in robust.docs_iter()], "folds": folds,
                          "queries": {q.query_id: q.default_text() for q in robust.queries_iter()},
                          "relevant": sorted({q.query_id for q in robust.qrels_iter() if q.relevance > 0})}))"""
    result = subprocess.run([sys.executable, "-c", script], env=offline_env(home), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    read = json.loads(result.stdout)
    assert sorted(read["docs"]) == sorted(docid for docid, _ in built.docs)  # every one read, and no other
    assert read["queries"] == built.queries["test"]
    assert all(len(topics) >= 5 for topics in read["folds"].values()), read["folds"]
    assert sorted(topic for topics in read["folds"].values() for topic in topics) == sorted(read["queries"])
    assert set(read["queries"]) - set(read["relevant"]) == {ROBUST04_NO_RELEVANT}  # as in Robust04: topic 672


def _reported(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / "paper" / "reported" / f"{name}.yaml").read_text())


def _own_rows(name: str) -> set[tuple[str, str]]:
    """(table, row) of every row the paper config's tables write (StudyPlan.table_layout)."""
    from rankstudy.study.plan import StudyPlan

    settings = config_file(REPO / "config" / "paper" / f"{name}.yaml")
    return {(table, row) for table, spec in StudyPlan.from_config(settings).table_layout().items()
            for row in spec["rows"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MINIATURES))
def test_the_miniature_runs_end_to_end(paper_miniature_run, name):
    run = paper_miniature_run(name)  # every job succeeded (conftest.py)
    work, env = run.work, run.env
    print(f"miniature of config/paper/{name}.yaml: {run.seconds:.0f} s")
    # the jobs as the run announced them (the same blocks as a dry run's, on stderr): no second DAG build
    jobs = parse_jobs(run.stderr)
    assert len(jobs) == int(re.search(r"^total\s+(\d+)$", run.stderr, re.MULTILINE).group(1))
    outputs = {path for job in jobs for path in job.outputs}
    missing = sorted(path for path in outputs if not (work / path).exists())
    assert not missing, missing[:20]
    again = snakemake(work, env, "-n", *configfiles(name))
    assert "Nothing to be done" in again.stdout + again.stderr

    # the claims scoreboard judges every claim of the paper config
    claims = yaml.safe_load((REPO / "config" / "paper" / f"{name}.yaml").read_text())["claims"]
    board = pd.read_csv(work / "results" / "claims.csv")
    assert set(board["id"]) == {claim["id"] for claim in claims}  # a claim against a list of runs: a row per run
    assert set(board["outcome"]) <= {"holds", "fails"}, board[["id", "outcome", "note"]].to_string()

    # every table the reported file names, with the paper's rows and columns; every legible cell compared
    reported = _reported(name)["tables"]
    for table, spec in reported.items():
        assert (work / "results" / "tables" / f"{table}.csv").is_file(), table
    report = pd.read_csv(work / "results" / "reproduction.csv", keep_default_na=False)
    legible = report[report["status"] != "not reported"]
    assert len(legible) == sum(value is not None for spec in reported.values() for row in spec["rows"].values()
                               for value in row), "a reported cell is missing from the report"
    # a CPU measures no GPU throughput: a reported GPU column (TKL's docs/ms) stays "not run", and the table has the
    # CPU's in its place (report.tables.docs_per_ms: the GPU's where the benchmark measured one)
    gpu = legible["column"].str.endswith("(GPU)")
    # a reported file may also name rows of another config that reads it (Choppy's: the -source run types of
    # config/choppy-robust04.yaml, the lists' own train/test split); the paper config does not write them
    rows = _own_rows(name)
    own = pd.Series([(table, row) in rows for table, row in zip(legible["table"], legible["row"])], index=legible.index)
    assert set(legible.loc[~own, "status"]) <= {"not run"}
    mine = legible[own & ~gpu]
    assert not mine.empty, "no reported row is one the paper config's tables write"
    assert set(mine["status"]) == {"compared"}, mine[mine["status"] != "compared"].to_string()
    assert set(legible.loc[gpu, "status"]) <= {"not run"}
    for table, column in set(zip(legible.loc[gpu, "table"], legible.loc[gpu, "column"])):
        produced = pd.read_csv(work / "results" / "tables" / f"{table}.csv")
        assert produced[column.removesuffix("(GPU)") + "(CPU)"].notna().any(), (table, column)
