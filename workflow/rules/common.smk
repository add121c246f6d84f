import json
import os
import shlex

from snakemake.utils import min_version, validate

from rankstudy.study import StudyPlan, checks as study_checks, system_run

min_version("9.0")


validate(config, "../schemas/config.schema.yaml")

# what the config asks for, validated (rankstudy.study; tested there)
PLAN = StudyPlan.from_config(config)
PLAN_RUNS = PLAN.runs
DATASETS = config["datasets"]
FIRST_STAGE = config["first_stage"]
SYSTEMS = FIRST_STAGE["systems"]
dataset_splits = PLAN.dataset_splits
rel_threshold = PLAN.rel_threshold
system_splits = PLAN.system_splits
eval_splits = PLAN.eval_splits
neural_systems = PLAN.neural_systems
truncation_names = PLAN.truncation_names


wildcard_constraints:
    dataset=r"[A-Za-z0-9_-]+",
    split=r"[A-Za-z0-9_-]+",


# Lucene systems search the index; official ones are an irds split's own candidate lists (scoreddocs)
LUCENE_SYSTEMS = [name for name, spec in SYSTEMS.items() if spec["model"] in ("bm25", "ql")]
OFFICIAL_SYSTEMS = [name for name, spec in SYSTEMS.items() if spec["model"] == "official"]
# dense systems: pyserini's dense retrieval over a FAISS index of the collection (rankstudy.dense)
DENSE_SYSTEMS = [name for name, spec in SYSTEMS.items() if spec["model"] == "dense"]
DENSE_KEYS = ("encoder", "kind", "pooling", "l2_norm", "max_length", "batch_size")


def dense_config(system):
    """The DenseConfig JSON of a dense system (its encoder settings, no first-stage keys)."""
    return as_json({key: value for key, value in SYSTEMS[system].items() if key in DENSE_KEYS})


def irds_split_ids(dataset, split):
    """The ir_datasets id(s) of an irds dataset's split."""
    ids = DATASETS[dataset]["irds"]["splits"][split]
    return [ids] if isinstance(ids, str) else ids


def first_stage_metrics():
    return [
        f"results/metrics/{dataset}/{system}.{split}.csv"
        for dataset in FIRST_STAGE["datasets"]
        for system in SYSTEMS
        for split in system_splits(system, dataset)
    ]


def as_json(value):
    return json.dumps(value, sort_keys=True)


def gpus(device):
    """The ``gpu`` resource of a job that trains or scores on ``device``: 1 for cuda[:n], 0 for cpu
    and auto (auto uses a GPU only where the job finds one). docs/cluster.md."""
    return 1 if str(device).startswith("cuda") else 0


# ---- neural runs -------------------------------------------------------------------------
NEURAL = config["neural"]
EMBEDDINGS = NEURAL["embeddings"]
ENCODERS = NEURAL["encoders"]
RUNS = NEURAL["runs"]
# the first-stage system whose candidates the runs re-rank (training examples come from bm25's train lists)
RERANK_FROM = PLAN.rerank_from
encoder_location = PLAN.encoder_location
encoder_build = PLAN.encoder_build


def is_wordpiece(emb):
    """Text of this entry is a pre-trained encoder's WordPiece ids (no vocabulary, no word vectors)."""
    return EMBEDDINGS[emb].get("method") == "wordpiece"


def embeddings_corpus(emb):
    """The datasets whose collections train a word-vector set (default: its vocabulary's dataset)."""
    return EMBEDDINGS[emb].get("corpus") or [EMBEDDINGS[emb]["dataset"]]


def vocab_input(wildcards):
    return [] if is_wordpiece(wildcards.emb) else f"text/{wildcards.emb}/vocab"


def store_encoder_input(wildcards):
    return encoder_build(EMBEDDINGS[wildcards.emb]["encoder"]) if is_wordpiece(wildcards.emb) else []


def store_tokens_arg(wildcards, input):
    if is_wordpiece(wildcards.emb):
        return f"--encoder {shlex.quote(encoder_location(EMBEDDINGS[wildcards.emb]['encoder']))}"
    return f"--vocab {input.vocab}"


def base_run(variant):
    """The run that trained the model a run uses (itself, or the run it reuses/ensembles)."""
    return PLAN_RUNS[variant].base


def run_seeds(variant):
    return list(PLAN_RUNS[variant].seeds)


def run_model(variant):
    return PLAN_RUNS[variant].model


def run_embeddings(variant):
    return PLAN_RUNS[variant].embeddings


def training_settings(variant):
    return dict(PLAN_RUNS[variant].training)


def encoder_dir(variant, seed):
    return PLAN_RUNS[variant].encoder_dir(seed)


model_encoder = PLAN.model_encoder
encoder_input = PLAN.encoder_inputs


def tuning_depths(variant):
    return PLAN_RUNS[variant].tuning_depths(NEURAL["rerank"]["depths"])


def full_task_depth(wildcards, input):
    """apply-depth's depth: tuned on dev (the depth JSON), else the run's fixed rerank_depth."""
    if input.depth:
        return f"--depth-json {input.depth}"
    return f"--depth {RUNS[system_run(wildcards.system)]['rerank_depth']}"


def model_dir(variant, seed):
    return PLAN_RUNS[variant].model_dir(seed)


def run_datasets(variant):
    return list(PLAN_RUNS[variant].datasets)


def neural_metrics():
    return [f"results/metrics/{dataset}/{system}.{split}.csv"
            for dataset, system in neural_systems() for split in eval_splits(dataset, system_run(system))]


def first_stage_label(system):
    """A first-stage system as the tables name it: BM25, QL, or the config's name (official candidates)."""
    return {"bm25": "BM25", "ql": "QL"}.get(SYSTEMS[system]["model"], system) if system in SYSTEMS else system


def table2_rows():
    """Table 2: the re-ranked first stage per evaluated dataset, then the runs of neural.table2_runs (default:
    all; each as run_system names it)."""
    rows, datasets = [], []
    for variant in NEURAL.get("table2_runs", list(RUNS)):
        for dataset in run_datasets(variant):
            if dataset not in datasets:
                datasets.append(dataset)
                rows.append({"run": first_stage_label(RERANK_FROM), "model": None, "dataset": dataset,
                             "rerank": RERANK_FROM, "full": RERANK_FROM, "baseline": RERANK_FROM})
            system = run_system(variant)
            rows.append({"run": variant, "model": run_model(variant), "dataset": dataset, "rerank": system,
                         "full": f"{system}-full", "baseline": RERANK_FROM})
    return rows


def table2_metrics():
    return sorted({f"results/metrics/{row['dataset']}/{system}.{split}.csv" for row in table2_rows()
                   for system in (row["rerank"], row["full"]) if system
                   for split in eval_splits(row["dataset"], None if system == RERANK_FROM else system_run(system))})


# The long chain word vectors -> study encoder -> warm start (encoder_from) -> the runs that start from it:
# its jobs go first when cores are free, or the warm start waits behind independent runs and the
# Socialformer runs finish last, one core idle (bench/results/study_time.md).
CHAIN_PRIORITY = 10


def chain_priority(variant):
    """Scheduling priority of a run's training: CHAIN_PRIORITY for runs that other runs start from."""
    return CHAIN_PRIORITY if PLAN_RUNS[variant].starts_others else 0


def selects_best_seed(variant):
    return PLAN_RUNS[variant].selects_best_seed


def example_kind(variant):
    return PLAN_RUNS[variant].example_kind


def view_seeds(variant):
    return list(PLAN_RUNS[variant].view_seeds)


def run_system(variant):
    return PLAN_RUNS[variant].system


def _tk_queries_run():
    """The interpretability view uses the first TK run of Table 2 (re-rank task; its best-validated seed
    where the run selects one, else its first seed); none when Table 2 has no TK run."""
    for variant in NEURAL.get("table2_runs", list(RUNS)):
        spec = RUNS[variant]
        if "ensemble" not in spec and "reuse" not in spec and NEURAL["models"][run_model(variant)]["model"] == "tk" \
                and run_datasets(variant):
            return {"variant": variant, "dataset": run_datasets(variant)[0], "system": run_system(variant)}
    return None


TK_QUERIES = _tk_queries_run()


def _query_tables():
    """The TK paper's Tables 3-4: neural.query_tables' runs that are in Table 2 and evaluated somewhere,
    each on its first dataset (re-rank task; the system that stands for the run: run_system)."""
    table2 = NEURAL.get("table2_runs", list(RUNS))
    return [{"run": variant, "dataset": run_datasets(variant)[0], "system": run_system(variant)}
            for variant in NEURAL.get("query_tables", []) if variant in table2 and run_datasets(variant)]


QUERY_TABLES = _query_tables()


# ---- long documents (TKL paper) -------------------------------------------------------------
LONGDOC = config["longdoc"]


def longdoc_active():
    """The study has long-document outputs when its dataset is part of the study."""
    return "dataset" in LONGDOC and LONGDOC["dataset"] in FIRST_STAGE["datasets"]


def longdoc_rows(key):
    """Table rows: BM25 first, then the configured {label, run} entries."""
    dataset = LONGDOC["dataset"]
    return [{"label": "BM25", "dataset": dataset, "system": "bm25"}] + [
        {"label": row["label"], "dataset": dataset, "system": run_system(row["run"]),
         "model": row.get("speed", run_model(row["run"]))}
        for row in LONGDOC[key]]


def longdoc_metrics(systems, splits=("dev", "test")):
    return sorted({f"results/metrics/{LONGDOC['dataset']}/{system}.{split}.csv" for system in systems for split in splits})


def longdoc_outputs():
    if not longdoc_active():
        return []
    outputs = [f"results/tables/tkl_{name}.csv" for name in ("table1", "table2") if LONGDOC[
        "table1" if name == "table1" else "saturation"]]
    if LONGDOC["compare"]:
        outputs.append("results/figures/tkl_fig1.png")
        if DATASETS[LONGDOC["dataset"]]["source"] == "synthetic":
            outputs.append("results/tables/tkl_evidence.csv")
    if LONGDOC["lengths"]:
        outputs.append("results/figures/tkl_fig2.png")
    if "regions" in LONGDOC:
        outputs.append("results/figures/tkl_fig3.png")
    return outputs


# ---- ranked-list truncation ----------------------------------------------------------------
TRUNCATION = config["truncation"]


def truncation_inputs(name):
    """{run, qrels} paths of a truncation run type (a workflow run or external files)."""
    spec = TRUNCATION["runs"][name]
    if "run" in spec:
        return {"run": spec["run"], "qrels": spec["qrels"]}
    split = spec.get("split", "test")
    if "folds" in spec:
        return {"run": f"runs/folds/{name}/{split}.run", "qrels": f"runs/folds/{name}/qrels.{split}.txt"}
    return {"run": f"runs/{spec['dataset']}/{spec['system']}.{split}.run",
            "qrels": f"data/{spec['dataset']}/qrels.{split}.txt"}


def truncation_grid():
    """Whether the config asks for Fig. 2's d x heads grid."""
    return bool(TRUNCATION.get("grid_d")) and bool(TRUNCATION.get("grid_heads"))


def truncation_qid_args(name):
    """The qid-list options of an external run type, paths shell-quoted (they come from the config)."""
    spec = TRUNCATION["runs"][name]
    return " ".join(f"--{part}-qids {shlex.quote(spec[f'{part}_qids'])}" for part in ("train", "dev", "test")
                    if f"{part}_qids" in spec)


def rerank_depths(variants):
    """'N' or 'N-M': the candidates the runs re-rank (a run's rerank_depth, else neural.rerank.depth)."""
    depths = sorted({RUNS[variant].get("rerank_depth", NEURAL["rerank"]["depth"]) for variant in variants})
    return str(depths[0]) if len(depths) == 1 else f"{depths[0]}-{depths[-1]} (per run)"


TKL_TABLES = {"table1": ("table1", "Table 1"), "table2": ("saturation", "Table 2 (saturation ablation)")}
TKL_CAPTION = ("TKL paper {what} on {dataset}: re-ranking the top {depth} BM25 candidates; test: dense judgments, "
               "dev: sparse. sig: the rows this one is significantly better than (paired Wilcoxon, p < 0.05). "
               "docs/ms: throughput at the paper's dimensions (results/efficiency.csv). ")


def tkl_table_spec(table):
    key, what = TKL_TABLES[table]
    caption = TKL_CAPTION.format(what=what, dataset=LONGDOC["dataset"],
                                 depth=rerank_depths(row["run"] for row in LONGDOC[key]))
    return as_json({"rows": longdoc_rows(key), "splits": ["test", "dev"], "caption": caption + LONGDOC["caption_note"]})


def longdoc_test_runs():
    return {label: f"runs/{LONGDOC['dataset']}/{run_system(run)}.test.run" for label, run in LONGDOC["compare"].items()}


def longdoc_run_settings(variant):
    """Store paths and lengths with which a run's model reads the long-document dataset."""
    emb, dataset = run_embeddings(variant), LONGDOC["dataset"]
    return {"queries": f"text/{emb}/{dataset}/queries.test", "documents": f"text/{emb}/{dataset}/collection",
            "embeddings": f"text/{emb}/embeddings.npy", "model": f"{model_dir(variant, run_seeds(variant)[0])}/model.pt"}


def tkl_evidence_spec():
    caption = f"Relevant test documents ranked in the top 10 by each system, by where their evidence starts " \
              f"(synthetic truth). {LONGDOC['caption_note']}"
    return as_json({"runs": longdoc_test_runs(), "boundary": LONGDOC["evidence_boundary"], "top": 10,
                    "rel_threshold": rel_threshold(LONGDOC["dataset"], "test"), "caption": caption})


# ---- Socialformer paper -----------------------------------------------------------------------
SOCIAL = config["socialformer"]


def socialformer_active():
    """The study has the Socialformer outputs when their dataset is part of the study."""
    return "dataset" in SOCIAL and SOCIAL["dataset"] in FIRST_STAGE["datasets"]


def socialformer_columns(table):
    return study_checks.socialformer_columns(SOCIAL, table)


def socialformer_rows(table):
    """Table rows: the first-stage BM25 (and QL, when configured) first in Table 1, as in the paper, then the
    configured {label, run, length, window} entries."""
    dataset = SOCIAL["dataset"]
    first_stage = [{"label": label, "dataset": dataset, "system": system}
                   for label, system in (("BM25", "bm25"), ("QL", "ql")) if system in SYSTEMS] if table == "table1" else []
    return first_stage + [{"label": row["label"], "dataset": dataset, "system": run_system(row["run"]),
                    **{key: row[key] for key in ("length", "window") if key in row}} for row in SOCIAL[table]]


def socialformer_metrics(table):
    return sorted({f"results/metrics/{SOCIAL['dataset']}/{row['system']}.{split}.csv"
                   for row in socialformer_rows(table) for split in socialformer_columns(table)})


SOCIAL_CAPTIONS = {
    "table1": "Socialformer paper Table 1 on {dataset}: re-ranking the top {depth} BM25 candidates; dev: sparse "
              "judgments, test: dense; RR@k = MRR@k. document length: the tokens a system reads; window: its "
              "attention span or passage length. sig: the rows this one is significantly better than (paired "
              "{test}, p < 0.05). ",
    "table2": "Socialformer paper Table 2 on {dataset}: attention patterns left out, and random edges; change %: "
              "against the full model (row a). sig: the rows this one is significantly better than (paired "
              "{test}, p < 0.05). ",
}
SIGNIFICANCE_TESTS = {"wilcoxon": "Wilcoxon", "t": "t-test"}


def socialformer_table_spec(table):
    caption = SOCIAL_CAPTIONS[table].format(dataset=SOCIAL["dataset"], test=SIGNIFICANCE_TESTS[SOCIAL["significance"]],
                                            depth=rerank_depths(row["run"] for row in SOCIAL[table]))
    columns = [[split, measure] for split, measures in socialformer_columns(table).items() for measure in measures]
    return as_json({"rows": socialformer_rows(table), "columns": columns, "test": SOCIAL["significance"],
                    "caption": caption + SOCIAL["caption_note"]})


def socialformer_stores(variant, split="test"):
    """WordPiece token stores with which a run's model reads the Socialformer dataset."""
    emb, dataset = run_embeddings(variant), SOCIAL["dataset"]
    return {"collection": f"text/{emb}/{dataset}/collection", "queries": f"text/{emb}/{dataset}/queries.{split}"}


def socialformer_graph_spec(figure):
    """Fig. 4 / Fig. 5 settings plus the graph_run's model settings (its graph, encoder)."""
    model = model_encoder(run_model(SOCIAL["graph_run"]))
    return as_json({**SOCIAL[figure], "model": model, "rel_threshold": rel_threshold(SOCIAL["dataset"], "test")})


def socialformer_fig6_metrics():
    split = SOCIAL["fig6"]["split"]
    return sorted({f"results/metrics/{SOCIAL['dataset']}/{run_system(run)}.{split}.csv"
                   for run in SOCIAL["fig6"]["runs"].values()})


def socialformer_fig6_spec():
    """Fig. 6 settings; runs as a list (as_json sorts mapping keys, the series keep the config's order)."""
    fig6, dataset = SOCIAL["fig6"], SOCIAL["dataset"]
    runs = [{"label": label, "dataset": dataset, "system": run_system(run)} for label, run in fig6["runs"].items()]
    return as_json({"runs": runs, "measure": fig6["measure"], "split": fig6["split"], "edges": fig6["edges"],
                    "rel_threshold": rel_threshold(dataset, fig6["split"])})


def socialformer_outputs():
    if not socialformer_active():
        return []
    outputs = [f"results/tables/socialformer_{table}.csv" for table in ("table1", "table2") if SOCIAL[table]]
    if "graph_run" in SOCIAL:
        outputs += ["results/figures/socialformer_fig4.png", "results/figures/socialformer_fig5.png"]
    if SOCIAL["fig6"]["runs"]:
        outputs.append("results/figures/socialformer_fig6.png")
    if SOCIAL["curves"]:
        outputs.append("results/figures/socialformer_curves.png")
    return outputs


def socialformer_curve_logs():
    return [f"{model_dir(run, run_seeds(run)[0])}/log.csv" for run in SOCIAL["curves"].values()]


def socialformer_curves_spec():
    runs = list(SOCIAL["curves"].values())
    metrics = {training_settings(run)["metric"] for run in runs}
    return as_json({"labels": list(SOCIAL["curves"]), "metric": " / ".join(sorted(metrics))})


# ---- expected results (docs/claims.md) ------------------------------------------------------------


def headline_tables():
    """The table CSVs this config writes (the ones rule all asks for)."""
    tables = ["results/tables/first_stage.csv"]
    tables += ["results/tables/tk_table2.csv"] if table2_rows() else []
    tables += [path for path in longdoc_outputs() + socialformer_outputs() if path.startswith("results/tables/")]
    tables += ["results/tables/choppy_table1.csv"] if truncation_names() else []
    return tables


# ---- the reproduction report (docs/claims.md) ----------------------------------------------------
REPRODUCTION = {"reported": [], "comparable": True, **config["reproduction"]}
