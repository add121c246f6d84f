"""The paper-scale configs (config/paper/*.yaml): an offline dry run of each lists the paper's jobs.

Each config is dry-run once in a fresh workflow copy that holds no data, no GloVe file and no BERT
directory, with ir_datasets pointed at an empty home and every proxy at a closed port, so anything
that tried to download or read those files would fail. The job lists must hold the paper's runs
with the paper's settings and nothing of the default synthetic study (the configs are
`standalone`: config/config.yaml is not merged into them).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from helpers import REPO
from test_workflow import BIN, ENV, job_counts, workflow_copy

PAPER_CONFIGS = ("tk", "tkl", "socialformer", "choppy")
# The project's budget for a dry run is 10 s, measured by bench/dry_run.py (bench/results/dry_run.md), not
# here: a timed test fails on a busy machine and passes on a fast one whatever the code does. The time is printed.
CLOSED_PORT = "http://127.0.0.1:9"


@dataclass
class Job:
    rule: str
    fields: dict[str, str] = field(default_factory=dict)  # input, output, wildcards, resources, ...
    shell: str = ""

    @property
    def outputs(self) -> list[str]:
        return self.fields.get("output", "").split(", ") if self.fields.get("output") else []

    @property
    def resources(self) -> dict[str, str]:
        pairs = (item.split("=", 1) for item in self.fields.get("resources", "").split(", ") if "=" in item)
        return dict(pairs)

    def json_arg(self, option: str) -> dict:
        """The JSON given to ``option`` in the job's command line."""
        words = shlex.split(self.shell)
        assert option in words, f"{self.rule}: no {option} in {self.shell[:200]}"
        return json.loads(words[words.index(option) + 1])


@dataclass
class DryRun:
    output: str
    seconds: float
    jobs: list[Job]

    def of(self, rule: str) -> list[Job]:
        return [job for job in self.jobs if job.rule == rule]

    def one(self, rule: str, output_part: str) -> Job:
        found = [job for job in self.of(rule) if any(output_part in path for path in job.outputs)]
        assert len(found) == 1, (rule, output_part, [job.outputs for job in self.of(rule)])
        return found[0]

    @property
    def outputs(self) -> set[str]:
        return {path for job in self.jobs for path in job.outputs}


def parse_jobs(output: str) -> list[Job]:
    """The jobs of a ``snakemake -n -p`` listing: rule name, indented fields, shell command."""
    jobs: list[Job] = []
    for line in output.splitlines():
        if match := re.match(r"^(?:local)?rule (\w+):$", line):
            jobs.append(Job(match.group(1)))
        elif jobs and (match := re.match(r"^    (\w+): (.*)$", line)):
            jobs[-1].fields[match.group(1)] = match.group(2)
        elif jobs and line.startswith("Shell command: "):
            jobs[-1].shell = line.removeprefix("Shell command: ")
    return jobs


def snakemake(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def offline_workflow(tmp_path_factory):
    """A workflow copy without data, GloVe or BERT files, and an environment without a network."""
    tmp = tmp_path_factory.mktemp("paper")
    work = workflow_copy(tmp)
    home = tmp / "ir_datasets_home"
    home.mkdir()
    env = dict(ENV, IR_DATASETS_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HTTP_PROXY=CLOSED_PORT, HTTPS_PROXY=CLOSED_PORT, ALL_PROXY=CLOSED_PORT,
               http_proxy=CLOSED_PORT, https_proxy=CLOSED_PORT, all_proxy=CLOSED_PORT)
    for absent in ("data", "text", "models", "runs", "results"):
        assert not (work / absent).exists(), absent
    return work, env, home


@pytest.fixture(scope="module")
def dry_runs(offline_workflow):
    work, env, _ = offline_workflow
    cache: dict[str, DryRun] = {}

    def run(name: str) -> DryRun:
        if name not in cache:
            start = time.perf_counter()
            result = snakemake(work, env, "-n", "-p", "--configfile", f"config/paper/{name}.yaml")
            seconds = time.perf_counter() - start
            output = result.stdout + result.stderr
            assert result.returncode == 0, output[-3000:]
            print(f"dry run of config/paper/{name}.yaml: {seconds:.1f} s")
            cache[name] = DryRun(output, seconds, parse_jobs(result.stdout))
        return cache[name]

    return run


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_the_dry_run_works_offline(dry_runs, offline_workflow, name):
    work, _, home = offline_workflow
    plan = dry_runs(name)
    assert len(plan.jobs) == job_counts(plan.output)["total"]  # the parser saw every job
    assert not any(home.iterdir()), "the dry run touched IR_DATASETS_HOME"
    assert not (work / "data").exists()


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_nothing_of_the_default_study_leaks_in(dry_runs, name):
    plan = dry_runs(name)
    assert "synthetic" not in plan.output
    datasets = {"tk": {"msmarco-passage", "msmarco-document"}, "tkl": {"msmarco-document"},
                "socialformer": {"msmarco-document"},
                "choppy": {"robust04", *(f"robust04-fold{fold}" for fold in range(1, 6))}}[name]
    assert {job.rule for job in plan.jobs if job.rule.startswith("dataset_")} == \
        {f"dataset_{dataset.replace('-', '_')}" for dataset in datasets}
    for job in plan.jobs:
        if job.rule.startswith("dataset_"):
            assert job.json_arg("--config")["source"] == "irds"
    # the default's second system (QL) would merge into first_stage.systems (Socialformer's Table 1 names its own)
    systems = {"bm25", "ql"} if name == "socialformer" else {"bm25"}
    assert {Path(path).name.split(".")[0] for job in plan.of("first_stage") for path in job.outputs} == systems


def test_tk_lists_the_table2_runs_with_the_paper_settings(dry_runs):
    plan = dry_runs("tk")
    counts = job_counts(plan.output)
    # p1 x 3 seeds, p2, d1, d3, knrm, conv_knrm (p3 ensembles p1, d2 reuses p1's models)
    assert counts["train"] == 8 and counts["ensemble"] == 2
    assert counts["tk_table2"] == counts["tk_table3_4"] == counts["tk_view"] == 1
    assert not {"choppy_study", "tkl_table", "tkl_regions"} & set(counts)
    for run in ("msmarco-passage/tk.p1.s42", "msmarco-passage/tk.p1.s44", "msmarco-passage/tk.p2.s42",
                "msmarco-passage/tk.p3.ens", "msmarco-document/tk.d1.s42", "msmarco-document/tk.d2.s43",
                "msmarco-document/tk-windowed.d3.s42", "msmarco-passage/knrm.knrm.s42",
                "msmarco-passage/conv_knrm.conv_knrm.s42"):
        assert f"runs/{run}.test.run" in plan.outputs, run
    # TREC DL's re-ranking subtask: the official candidates (scoreddocs) of dev and test, depth tuned up to 1,000;
    # training examples still come from BM25's train lists (the train split has no official ones)
    official = plan.one("official_candidates", "runs/msmarco-passage/official.test.run").shell
    assert "--ids msmarco-passage/trec-dl-2019/judged" in official and "--hits 1000" in official
    assert counts["official_candidates"] == 4
    rerank = plan.one("rerank_dev_test", "runs/msmarco-passage/tk.p1.s42.test.run")
    assert "runs/msmarco-passage/official.test.run" in rerank.fields["input"]
    # every depth from 1 to 1,000: the tuning can land on the notebook's d1 29, d2 60, d3 31
    assert "--depths 1 1000 1" in plan.one("tune_depth", "tk.p1.s42.depth.json").shell
    assert "runs/msmarco-passage/bm25.train.run" in plan.one("examples", "msmarco-passage").fields["input"]
    rows = plan.of("tk_table2")[0].json_arg("--rows")
    assert rows[0] == {"run": "official", "model": None, "dataset": "msmarco-passage", "rerank": "official",
                       "full": "official", "baseline": "official"}
    assert [row["run"] for row in rows if row["model"]] == ["p1", "p2", "p3", "d1", "d2", "d3", "knrm", "conv_knrm"]
    # p1 is the seed that validated best (the notebook's submitted run), chosen from the three seeds' logs
    assert next(row for row in rows if row["run"] == "p1")["rerank"] == "tk.p1.best"
    select = plan.one("select_seed", "runs/msmarco-passage/tk.p1.best.test.run").shell
    assert all(f"models/msmarco-passage/tk/p1/seed{seed}/log.csv" in select for seed in (42, 43, 44))
    # the ensemble's full task: its own depth, tuned on dev like every run's
    assert next(row for row in rows if row["run"] == "p3")["full"] == "tk.p3.ens-full"
    assert "runs/msmarco-passage/tk.p3.ens-full.test.run" in plan.outputs
    assert plan.one("tune_depth", "runs/msmarco-passage/tk.p3.ens.depth.json")
    # Tables 3-4: best and worst queries of the notebook's runs, p3 (the ensemble) and d3
    tables = plan.one("tk_table3_4", "tk_table3_4.csv").shell
    assert "msmarco-passage/tk.p3.ens.test.csv" in tables and "msmarco-document/tk-windowed.d3.s42.test.csv" in tables

    p1 = plan.one("train", "models/msmarco-passage/tk/p1/seed42/")
    assert p1.json_arg("--model-config") == {"layers": 2, "heads": 16, "head_size": 32, "ff_dim": 100,
                                               "train_embeddings": True,
                                               "document_position_offset": 500}  # the published code
    training = p1.json_arg("--train-config")
    assert training["device"] == "cuda" and training["batch_size"] == 64 and training["max_doc_length"] == 200
    assert training["learning_rates"] == {"embeddings": 1e-4, "contextualizer": 1e-4, "default": 1e-3}
    d3 = plan.one("train", "/d3/").json_arg("--train-config")
    assert (d3["max_doc_length"], d3["batch_size"], d3["max_steps"]) == (800, 64, 200_000)
    assert "--embeddings text/fasttext-doc/embeddings.npy" in plan.one("train", "/d3/").shell  # the notebook's fastText
    # the documents' vocabulary, trained on the passages (the `corpus` key)
    fasttext_doc = plan.one("embeddings", "text/fasttext-doc/").shell
    assert "--store text/fasttext-doc/msmarco-passage/collection --vocab text/fasttext-doc/vocab" in fasttext_doc
    glove = plan.one("embeddings", "text/glove/").json_arg("--config")
    assert glove == {"method": "glove", "dim": 300, "path": "data/glove/glove.42B.300d.txt"}
    for rule in ("train", "rerank_dev_test", "efficiency"):
        assert {job.resources.get("gpu") for job in plan.of(rule)} == {"1"}, rule
    assert "--hits 100" in plan.of("first_stage")[0].shell
    # TREC DL's passage convention: binary measures count grade >= 2 on the graded test queries only
    thresholds = {(dataset, split): {re.search(r"--rel-threshold (\d+)", job.shell).group(1)
                                     for job in plan.of("evaluate") if f"--dataset {dataset} " in job.shell
                                     and f"--split {split} " in job.shell}
                  for dataset in ("msmarco-passage", "msmarco-document") for split in ("dev", "test")}
    assert thresholds == {("msmarco-passage", "dev"): {"1"}, ("msmarco-passage", "test"): {"2"},
                          ("msmarco-document", "dev"): {"1"}, ("msmarco-document", "test"): {"1"}}


def test_tkl_lists_table1_at_2000_and_4000_tokens_and_the_ablations(dry_runs):
    plan = dry_runs("tkl")
    counts = job_counts(plan.output)
    # 5 baselines, TK 200, BERT[CLS], TKL 2k/4k, 2 saturation variants, TKL 500, TK 500, CONV-KNRM 2k
    assert counts["train"] == 14
    assert counts["tkl_table"] == 2 and counts["tkl_fig1"] == counts["tkl_fig2"] == counts["tkl_fig3"] == 1
    assert not {"tk_table2", "tk_table3_4", "tk_view", "tkl_evidence", "choppy_study"} & set(counts)
    for table in ("tkl_table1", "tkl_table2"):
        assert f"results/tables/{table}.csv" in plan.outputs
    for variant, model, tokens in (("tkl-2k", "tkl", 2000), ("tkl-4k", "tkl", 4000), ("tkl-log-2k", "tkl-log", 2000),
                                   ("tkl-linear-2k", "tkl-linear", 2000), ("tkl-500", "tkl", 500),
                                   ("tk-200", "tk", 200), ("doc-pacrr", "pacrr", 200)):
        job = plan.one("train", f"models/msmarco-document/{model}/{variant}/seed42/")
        assert job.json_arg("--train-config")["max_doc_length"] == tokens, variant
        assert f"runs/msmarco-document/{model}.{variant}.s42.test.run" in plan.outputs
    table1 = plan.one("tkl_table", "tkl_table1").json_arg("--spec")["rows"]
    assert [row["label"] for row in table1] == ["BM25", "MatchPyramid", "PACRR", "CO-PACRR", "KNRM", "CONV-KNRM",
                                                "BERT[CLS] (200)", "TK (200)", "TKL (2,000)", "TKL (4,000)"]  # paper's
    # the paper re-ranks the track's official BM25 top 100, which is Table 1's BM25 row
    assert table1[0]["system"] == "official" and "runs/msmarco-document/official.test.run" in \
        plan.one("rerank_dev_test", "runs/msmarco-document/tkl.tkl-2k.s42.test.run").fields["input"]
    assert "results/tables/tkl_regions.csv" in plan.outputs  # Fig. 3's shares after word 500
    bert = plan.one("train", "/doc-bert/")
    assert bert.json_arg("--model-config") == {"encoder": "data/pretrained/bert-base-uncased"}
    assert "--encoder data/pretrained/bert-base-uncased" in plan.one("store_collection", "text/bert/").shell
    tkl = plan.one("train", "/tkl-2k/")
    assert tkl.json_arg("--model-config") == {"layers": 2, "heads": 10, "ff_dim": 100, "train_embeddings": True}
    training = tkl.json_arg("--train-config")
    assert (training["batch_size"], training["max_steps"], training["validation_queries"]) == (32, 100_000, 2000)
    assert {job.resources.get("gpu") for job in plan.of("train") + plan.of("tkl_regions")} == {"1"}


def test_socialformer_lists_table1_the_ablations_and_the_figures(dry_runs):
    plan = dry_runs("socialformer")
    counts = job_counts(plan.output)
    # Socialformer node and edge, 7 baselines, MaxP and Socialformer (node, edge) at 512 tokens, 4 patterns left out,
    # random edges
    assert counts["train"] == 17 and counts["examples"] == 1
    assert counts["socialformer_table"] == 2
    assert counts["socialformer_fig4"] == counts["socialformer_fig5"] == counts["socialformer_fig6"] == 1
    assert not {"tk_table2", "tkl_table", "choppy_study"} & set(counts)
    assert "train/msmarco-document/groups.tsv" in plan.outputs
    assert "--kind groups" in plan.of("examples")[0].shell and "--negatives 7" in plan.of("examples")[0].shell
    node = plan.one("train", "/sf-node/")
    settings = node.json_arg("--model-config")
    assert settings["encoder"] == "data/pretrained/bert-base-uncased"
    assert (settings["graph"]["max_nodes"], settings["graph"]["max_circles"]) == (128, 16)
    training = node.json_arg("--train-config")
    assert (training["loss"], training["optimizer"], training["max_doc_length"]) == ("listwise", "adamw", 2048)
    assert training["learning_rates"] == {"encoder": 1.0e-5, "default": 1.0e-5}
    edge = plan.one("train", "/sf-edge/").json_arg("--model-config")
    assert edge["graph"]["partition"] == "edge"
    # Table 1's window column: passages of 128 tokens
    assert plan.one("train", "/sf-maxp/").json_arg("--model-config")["passage_length"] == 128
    random = plan.one("train", "/sf-random/").json_arg("--model-config")
    assert random["graph"]["weights"] == {"random": 1.0}
    # the paper re-ranks ANCE's top 100: pyserini's dense retrieval (index once, search dev and test)
    dense = plan.one("dense_index", "index/msmarco-document.ance").json_arg("--config")
    assert dense == {"batch_size": 64, "encoder": "data/pretrained/ance-msmarco-doc-firstp", "kind": "ance",
                     "max_length": 512}
    assert {job.outputs[0] for job in plan.of("dense_search")} == \
        {"runs/msmarco-document/ance.dev.run", "runs/msmarco-document/ance.test.run"}
    rerank = plan.one("rerank_dev_test", "runs/msmarco-document/socialformer.sf-node.s42.test.run")
    assert "runs/msmarco-document/ance.test.run" in rerank.fields["input"]
    # Table 1's window of 128 (64 each side); BigBird-ITC's blocks of 64 with 3 random blocks (192 keys) per query block
    assert plan.one("train", "/sf-longformer/").json_arg("--model-config")["window"] == 64
    bigbird = plan.one("train", "/sf-bigbird/").json_arg("--model-config")
    assert (bigbird["pattern"], bigbird["window"], bigbird["random_keys"]) == ("bigbird", 64, 192)
    assert plan.one("train", "/sf-node-512/").json_arg("--train-config")["max_doc_length"] == 512
    assert "runs/msmarco-document/ql.test.run" in plan.outputs  # Table 1's QL row
    for variant, model in (("sf-firstp", "firstp"), ("sf-parade", "parade"), ("sf-longformer", "longformer"),
                           ("sf-maxp-512", "maxp"), ("sf-edge-512", "socialformer-edge")):
        assert f"runs/msmarco-document/{model}.{variant}.s42.test.run" in plan.outputs
    assert {job.resources.get("gpu") for job in plan.of("train") + plan.of("rerank") + plan.of("rerank_dev_test")} == {"1"}


def test_choppy_lists_the_robust04_truncation_job(dry_runs):
    plan = dry_runs("choppy")
    counts = job_counts(plan.output)
    # BM25's lists, and DRMM's by 5-fold cross-validation: one dataset, training and test run per fold
    assert counts["train"] == counts["rerank"] == counts["examples"] == counts["store_collection"] == 5
    assert counts["index"] == 6 and counts["embeddings"] == 1 and counts["choppy_folds"] == 1
    assert counts["choppy_study"] == 2 * 10 and counts["choppy_pool"] == 2  # 10 splits
    assert plan.one("choppy_grid", "results/choppy/").fields["output"] == "results/choppy/bm25/grid.csv"  # Fig. 2: BM25
    assert counts["choppy_table1"] == counts["claims"] == 1  # claims: the Choppy paper's, on both lists
    assert "efficiency" not in counts and "tk_table2" not in counts
    assert "--hits 300" in plan.of("first_stage")[0].shell
    job = plan.one("choppy_study", "results/choppy/bm25/repeat0/")
    assert job.fields["input"] == "runs/robust04/bm25.test.run, data/robust04/qrels.test.txt"
    merge = plan.of("choppy_folds")[0]
    assert all(f"runs/robust04-fold{fold}/drmm.drmm-fold{fold}.s42.test.run" in merge.shell for fold in range(1, 6))
    assert plan.one("choppy_study", "results/choppy/drmm/repeat9/").fields["input"] == \
        "runs/folds/drmm/test.run, runs/folds/drmm/qrels.test.txt"
    fold3 = next(job for job in plan.jobs if job.rule == "dataset_robust04_fold3")
    fold3 = fold3.json_arg("--config")["irds"]["splits"]
    assert fold3["test"].endswith("/fold3") and fold3["dev"].endswith("/fold4")
    assert sorted(name[-1] for name in fold3["train"]) == ["1", "2", "5"]
    drmm = plan.one("train", "/drmm-fold2/")
    assert "--embeddings text/w2v/embeddings.npy" in drmm.shell
    assert "runs/robust04-fold2/drmm.drmm-fold2.s42.test.run" in plan.outputs
    job = plan.one("choppy_study", "results/choppy/bm25/repeat0/")
    settings = job.json_arg("--config")
    assert settings["n"] == 300 and settings["grid_d"] == [32, 64, 128, 256] and settings["grid_heads"] == [1, 2, 4, 8]
    # the paper's model, every other setting stated (none inherited from the CPU default's)
    assert settings["model"] == {"d_model": 128, "heads": 8, "layers": 3, "ff_layers": 1, "ff_dim": 128, "dropout": 0.1,
                                  "lr": 1e-3, "batch_size": 64, "epochs": 15, "patience": 15, "score_scaling": "list",
                                  "position_init_std": 0.02}
    assert settings["model_by_metric"] == {"dcg": {"epochs": 15, "patience": 15, "score_scaling": "train",
                                                   "batch_size": 16}}
    assert settings["repeats"] == 10 and settings["dev_fraction"] == 0
    assert settings["bicut"] == {"hidden": 128, "layers": 2, "dropout": 0.4, "epochs": 50}  # a multi-layer BiLSTM
    assert job.resources["gpu"] == "1"


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_each_paper_config_writes_its_reproduction_report(dry_runs, name):
    """results/reproduction.md from the paper's reported cells (config/paper/reported/NAME.yaml) and the
    config's tables, each of which the reported file names (so no reported table is silently missing)."""
    job = dry_runs(name).one("reproduction", "results/reproduction.csv")
    assert f"--reported config/paper/reported/{name}.yaml" in job.shell and "--not-comparable" not in job.shell
    tables = {Path(path).stem for path in job.fields["input"].split(", ") if path.startswith("results/tables/")}
    reported = yaml.safe_load((REPO / "config/paper/reported" / f"{name}.yaml").read_text())["tables"]
    assert set(reported) <= tables, (set(reported) - tables)


def test_the_slurm_profile_dry_run_submits_gpu_jobs(offline_workflow):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    work, env, _ = offline_workflow
    result = snakemake(work, env, "-n", "--workflow-profile", "profiles/slurm", "--configfile",
                       "config/paper/choppy.yaml")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    study = [job for job in parse_jobs(result.stdout) if job.rule == "choppy_study"]
    assert study and study[0].resources["gpu"] == "1"


def test_every_paper_config_is_standalone():
    for path in sorted((REPO / "config" / "paper").glob("*.yaml")):
        assert re.search(r"^standalone: true$", path.read_text(), re.M), path
