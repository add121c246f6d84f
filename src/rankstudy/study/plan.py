"""``StudyPlan``: what a config asks the workflow to build, as one object the rules read (issue 17)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from itertools import product
from typing import Any, Iterable, Mapping

from rankstudy.datasets.folds import ROLES as FOLD_ROLES
from rankstudy.datasets.local import splits as local_splits
from rankstudy.papers.choppy.plan import ChoppyOutputs
from rankstudy.papers.socialformer.plan import SocialformerOutputs
from rankstudy.papers.tk.plan import TKOutputs
from rankstudy.papers.tkl.plan import TKLOutputs
from rankstudy.report.columns import speed_column
from rankstudy.study.checks import check_plan, check_references
from rankstudy.study.claims import resolve_claims
from rankstudy.study.folds import Folds, alternatives
from rankstudy.study.runs import Run, plan_runs, system_run
from rankstudy.study.stages import FirstStage, Teachers, Text

SYNTHETIC_SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class StudyPlan:
    config: Mapping[str, Any]  # schema-validated
    runs: Mapping[str, Run]  # neural.runs, inheritance resolved
    claims: tuple[Mapping[str, Any], ...] = ()  # one row per (claim, B), names resolved to files (study.claims)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StudyPlan:
        """The plan of a schema-validated config; a ConfigError names what the config gets wrong."""
        check_references(config)
        plan = cls(config=config, runs=plan_runs(config))
        check_plan(plan)
        return replace(plan, claims=tuple(resolve_claims(plan)))

    # ---- sections ------------------------------------------------------------------------------
    @property
    def datasets(self) -> Mapping[str, Mapping[str, Any]]:
        return self.config["datasets"]

    @property
    def studied(self) -> list[str]:
        """The datasets the study runs (first_stage.datasets)."""
        return self.config["first_stage"]["datasets"]

    @property
    def systems(self) -> Mapping[str, Mapping[str, Any]]:
        """The first-stage systems (first_stage.systems)."""
        return self.config["first_stage"]["systems"]

    @property
    def rerank(self) -> Mapping[str, Any]:
        """neural.rerank: the first-stage system re-ranked, the depth, the batch size, the tuned depths' grid."""
        return self.config["neural"]["rerank"]

    def rerank_options(self, run: str) -> str:
        """The rerank command's scoring options: neural.rerank's batch size and whether documents are encoded once
        for all their queries, and the run's ``query_length`` (the query tokens it reads instead of its training's)."""
        reuse = " --reuse-documents" if self.rerank.get("reuse_documents") else ""
        length = self.runs[run].spec.get("query_length")
        return f"--batch-size {self.rerank['batch_size']}{reuse}" + (f" --max-query-length {length}" if length else "")

    @property
    def rerank_from(self) -> str:
        """The first-stage system whose candidates the neural runs re-rank (training examples come from bm25)."""
        return self.rerank["first_stage"]

    def rerank_system(self, dataset: str) -> str:
        """The first-stage system re-ranked on a dataset (a fold: its parent's): the dataset's ``rerank_from``, else
        neural.rerank.first_stage (e.g. a test year's given BM25 top 100 beside the training queries' own BM25)."""
        return self.datasets[self.folds.parent(dataset) or dataset].get("rerank_from", self.rerank_from)

    @property
    def models(self) -> Mapping[str, Mapping[str, Any]]:
        return self.config["neural"]["models"]

    @property
    def encoders(self) -> Mapping[str, Mapping[str, Any]]:
        """neural.encoders: the study's own, built by rule pretrain_encoder."""
        return self.config["neural"]["encoders"]

    # ---- settings the rules read (they read the config through the plan only) -----------------------
    @property
    def seed(self) -> int:
        """The one seed of data generation, sampling and training."""
        return self.config["seed"]

    @property
    def measures(self) -> list[str]:
        """evaluation.measures: what every metric file holds."""
        return self.config["evaluation"]["measures"]

    @property
    def threads(self) -> int:
        """neural.threads: the torch threads (and thread request) of every training, scoring and Choppy job."""
        return self.config["neural"]["threads"]

    @property
    def device(self) -> str:
        """neural.device: auto, cpu or cuda[:n]."""
        return self.config["neural"]["device"]

    @property
    def precision(self) -> str:
        """neural.precision: fp32, bf16 or tf32 (rankstudy.precision)."""
        return self.config["neural"]["precision"]

    @property
    def examples(self) -> Mapping[str, Any]:
        """neural.examples: training triples and groups (per_query, negatives_depth, group_negatives)."""
        return self.config["neural"]["examples"]

    @property
    def efficiency(self) -> Mapping[str, Any]:
        """neural.efficiency: the throughput benchmark's setup and models."""
        return self.config["neural"]["efficiency"]

    @property
    def caption_note(self) -> str:
        """neural.caption_note: what the config scales down, in the neural tables' captions."""
        return self.config["neural"]["caption_note"]

    @property
    def expected(self) -> str:
        """The file of this config's expected table cells (rule check_expected); '' for no check."""
        return self.config["expected"]

    @property
    def reproduction(self) -> Mapping[str, Any]:
        """The reproduction report's settings: the papers' reported-cell files, whether the data is comparable."""
        return self.config["reproduction"]

    # ---- the shared stages and the papers' outputs (one object each) --------------------------------
    @cached_property
    def first_stage(self) -> FirstStage:
        return FirstStage(self)

    @cached_property
    def text(self) -> Text:
        return Text(self)

    @cached_property
    def folds(self) -> Folds:
        return Folds(self)

    @cached_property
    def teachers(self) -> Teachers:
        return Teachers(self)

    @cached_property
    def tk(self) -> TKOutputs:
        return TKOutputs(self)

    @cached_property
    def tkl(self) -> TKLOutputs:
        return TKLOutputs(self)

    @cached_property
    def socialformer(self) -> SocialformerOutputs:
        return SocialformerOutputs(self)

    @cached_property
    def choppy(self) -> ChoppyOutputs:
        return ChoppyOutputs(self)

    @property
    def measures_speed(self) -> bool:
        """Whether the tables have a docs/ms column: neural.efficiency is enabled and names models to measure."""
        return self.efficiency.get("enabled", True) and bool(self.efficiency["models"])

    @property
    def speed_column(self) -> str:
        """The tables' docs/ms column: the efficiency benchmark runs on neural.device."""
        return speed_column(self.device)

    def speed_columns(self) -> list[str]:
        """The docs/ms column of TK's and TKL's tables, where the config measures speed."""
        return [self.speed_column] if self.measures_speed else []

    def table_layout(self) -> dict[str, dict[str, list[str]]]:
        """{table: {rows, columns}}: the row names and value columns of the paper tables this config writes."""
        return {**self.tk.layout(), **self.tkl.layout(), **self.socialformer.layout(), **self.choppy.layout()}

    def headline_tables(self) -> list[str]:
        """The table CSVs this config writes (those check-expected and the reproduction report read)."""
        tables = ["results/tables/first_stage.csv"] if self.studied else []  # none for given lists only
        tables += ["results/tables/tk_table2.csv"] if self.tk.table2_rows() else []
        return tables + [path for path in self.tkl.outputs() + self.socialformer.outputs() + self.choppy.outputs()
                         if path.startswith("results/tables/")]

    # ---- datasets and systems ------------------------------------------------------------------
    def data_description(self, names: Iterable[str]) -> str:
        """What the datasets are, for a caption: their names and where they come from."""
        def described(name: str) -> str:
            spec = self.datasets[name]
            if spec["source"] == "synthetic":
                return f"{name} (the study's synthetic data, docs/synthetic.md; not the paper's)"
            where = f"local files in {spec['local']['path']}" if spec["source"] == "local" else "ir_datasets"
            return f"{name} ({where}; {self.folds.description(name)})" if "folds" in spec else f"{name} ({where})"

        return " and ".join(described(name) for name in dict.fromkeys(names))

    def dataset_splits(self, name: str) -> list[str]:
        """The splits a dataset provides, known when the DAG is built (a fold dataset: train, dev, test)."""
        if self.folds.parent(name):
            return list(FOLD_ROLES)
        dataset = self.datasets[name]
        if dataset["source"] == "synthetic":
            return list(SYNTHETIC_SPLITS)
        if dataset["source"] == "local":
            return local_splits(dataset["local"])
        return list(dataset[dataset["source"]]["splits"])

    def rel_threshold(self, name: str, split: str) -> int:
        """Lowest relevant grade on a dataset's split: the dataset's (per split or for all), else evaluation's; a
        fold dataset's splits have its parent's folded split's."""
        parent = self.folds.parent(name)
        if parent:
            return self.rel_threshold(parent, self.folds.split(parent))
        default = self.config["evaluation"]["rel_threshold"]
        threshold = self.datasets[name].get("rel_threshold", default)
        return threshold.get(split, default) if isinstance(threshold, dict) else threshold

    def train_min_grade(self, name: str) -> int:
        """Lowest train grade of a training positive: the dataset's (a fold's: its parent's) train_min_grade,
        else its train split's relevance threshold."""
        spec = self.datasets[self.folds.parent(name) or name]
        return spec.get("train_min_grade", self.rel_threshold(name, "train"))

    def has_official(self, dataset: str) -> bool:
        """Whether a dataset has candidate lists of its own: an irds split's scoreddocs, or a local folder's
        given run (``local.candidates``)."""
        spec = self.datasets[dataset]
        return spec["source"] == "irds" or (spec["source"] == "local" and "candidates" in spec["local"])

    def system_splits(self, system: str, dataset: str) -> list[str]:
        """The splits of a dataset a first-stage system runs on (its ``splits``, else all); official candidates
        exist only for datasets that have their own (``has_official``); a fold dataset has every split where its
        parent's folded split has the system's lists."""
        parent = self.folds.parent(dataset)
        if parent:
            return list(FOLD_ROLES) if self.folds.split(parent) in self.system_splits(system, parent) else []
        spec = self.systems[system]
        if spec["model"] == "official" and not self.has_official(dataset):
            return []
        wanted = spec.get("splits")
        return [split for split in self.dataset_splits(dataset) if wanted is None or split in wanted]

    def eval_splits(self, dataset: str, run: str | None = None) -> list[str]:
        """A neural run's evaluation splits of a dataset: dev and test (dev only where it has one), or the
        run's own ``splits`` (e.g. test only, for an ablation whose table shows test columns); a dataset with
        folds only its folded split, which the held-out folds make up."""
        wanted = self.runs[run].spec.get("splits", ("dev", "test")) if run else ("dev", "test")
        splits = [self.folds.split(dataset)] if "folds" in self.datasets[dataset] else self.dataset_splits(dataset)
        return [split for split in ("dev", "test") if split in splits and split in wanted]

    def neural_systems(self) -> list[tuple[str, str]]:
        """(dataset, system) pairs of every neural run to evaluate on dev and test."""
        return [(dataset, system) for run in self.runs.values() for dataset in run.datasets for system in run.systems]

    def training_first_stages(self) -> set[str]:
        """The first-stage systems a training reads: the validation candidates of every dataset a run trains on
        (its training examples' negatives are BM25's)."""
        return {self.rerank_system(dataset) for run in self.runs for dataset in self.train_datasets(run)}

    def train_datasets(self, run: str) -> list[str]:
        """The datasets a run's models train on, one model each: its train dataset, or that dataset's folds."""
        train = self.runs[run].train
        return self.folds.names(train) if train in self.folds.parents else [train]

    def learning_audit(self) -> list[dict[str, Any]]:
        """The learning audit's entries (report/learning.py): every seed of every trained run, on the test split
        of the dataset it trained on (where the study evaluates it there; with folds: each fold's model on its
        held-out queries; a run trained on a dataset it does not evaluate, e.g. MS MARCO's training queries: each
        dataset it is evaluated on), against the candidates' first stage."""
        entries = []
        for name, run in self.runs.items():
            if run.base != name or run.is_ensemble or not run.datasets:
                continue
            # (evaluated dataset, the dataset its model trained on: None = the run's own train dataset)
            own = run.train in run.datasets
            pairs = [(d, d) for d in self.train_datasets(name)] if own else [(d, None) for d in run.datasets]
            synthetic = self.datasets[run.train]["source"] == "synthetic"
            # word vectors (not a word-piece encoder's) on synthetic data: do they hold its synonymy?
            method = self.config["neural"]["embeddings"][run.embeddings].get("method")
            word_vectors = synthetic and method != "wordpiece"
            for (dataset, trained_on), seed in product(pairs, run.seeds):
                system = f"{run.model}.{name}.s{seed}"
                entries.append({"run": name, "seed": seed, "dataset": dataset, "system": system,
                                "first_stage": self.rerank_system(dataset),
                                "log": f"{run.model_dir(seed, trained_on)}/log.csv",
                                "metrics": f"results/metrics/{dataset}/{system}.test.csv",
                                "first_stage_metrics":
                                    f"results/metrics/{dataset}/{self.rerank_system(dataset)}.test.csv",
                                "qrels": f"data/{dataset}/qrels.test.txt",
                                "truth": f"data/{dataset}/truth.json" if synthetic else None,
                                "length": run.training["max_doc_length"],
                                "vectors": {"name": run.embeddings, "vocab": f"text/{run.embeddings}/vocab",
                                            "embeddings": f"text/{run.embeddings}/embeddings.npy"}
                                if word_vectors else None})
        return entries

    def seed_groups(self) -> list[dict[str, Any]]:
        """The trained runs with several seeds, per dataset they are tested on (the learning audit's runs): their
        seeds' test run and metric files, the first seed first (the replicability measures across seeds,
        report/replicability.py)."""
        groups: dict[tuple[str, str], dict[str, Any]] = {}
        for entry in self.learning_audit():
            group = groups.setdefault((entry["run"], entry["dataset"]), {
                "run": entry["run"], "dataset": entry["dataset"], "split": "test", "seeds": []})
            group["seeds"].append({"seed": entry["seed"], "run": f"runs/{entry['dataset']}/{entry['system']}.test.run",
                                   "metrics": entry["metrics"]})
        return [group for group in groups.values() if len(group["seeds"]) > 1]

    def seed_group_inputs(self) -> list[str]:
        return sorted({seed[key] for group in self.seed_groups() for seed in group["seeds"]
                       for key in ("run", "metrics")})

    def learning_audit_inputs(self) -> list[str]:
        """Every file the learning audit reads."""
        keys = ("log", "metrics", "first_stage_metrics", "qrels", "truth")
        entries = self.learning_audit()
        files = {entry[key] for entry in entries for key in keys if entry[key]}
        vectors = {path for entry in entries if entry["vectors"]
                   for path in (entry["vectors"]["vocab"], entry["vectors"]["embeddings"])}
        return sorted(files | vectors)

    def idle_runs(self) -> list[str]:
        """A warning for each run the config defines that no target will produce: it evaluates none of the
        datasets the study runs (first_stage.datasets), and no run that does stands on it. A run whose
        ``evaluate`` is empty is switched off on purpose (the default's p2, which the extended config runs): no
        warning."""
        needed = {name for run in self.runs.values() if run.datasets for name in (run.base, run.encoder_from)}
        warnings = []
        for name, run in self.runs.items():
            if run.datasets or name in needed or run.spec.get("evaluate") == []:
                continue
            reason = (f"it trains on {run.train!r}, which first_stage.datasets does not run"
                      if run.train not in self.studied
                      else f"it evaluates none of first_stage.datasets ({', '.join(self.studied)}); "
                           f"its evaluate: {list(run.spec.get('evaluate', []))}")
            warnings.append(f"neural.runs.{name} will not run: {reason}")
        return warnings

    def rerank_depths(self, runs: Iterable[str]) -> str:
        """'N' or 'N-M (per run)': the candidates the runs re-rank (a run's rerank_depth, else neural.rerank.depth),
        as the captions state it."""
        depths = sorted({self.rerank_depth(run) for run in runs})
        return str(depths[0]) if len(depths) == 1 else f"{depths[0]}-{depths[-1]} (per run)"

    # ---- models and encoders -------------------------------------------------------------------
    def encoder_location(self, name: str) -> str:
        """The directory (or packaged name, e.g. ``minilm``) loaded for an ``encoder`` name: a study encoder is
        built to encoders/NAME."""
        return f"encoders/{name}" if name in self.encoders else name

    def encoder_build(self, name: str | None) -> list[str]:
        """Inputs of a job that loads encoder ``name``: the study encoder's directory, if it is one."""
        return [self.encoder_location(name)] if name in self.encoders else []

    def model_encoder(self, model: str) -> dict[str, Any]:
        """``neural.models[model]`` without its ``model`` key, its ``encoder`` resolved to a location."""
        settings = {key: value for key, value in self.models[model].items() if key != "model"}
        if "encoder" in settings:
            settings["encoder"] = self.encoder_location(settings["encoder"])
        return settings

    def model_settings(self, run: str, seed: int | str) -> dict[str, Any]:
        """The settings a run's model is built with: its model entry, the encoder warm-started from the
        run's ``encoder_from`` where it has one."""
        settings = self.model_encoder(self.runs[run].model)
        warm_start = self.runs[run].encoder_dir(seed)
        if warm_start:
            settings["encoder"] = warm_start
        return settings

    def training_settings(self, run: str) -> dict[str, Any]:
        """The TrainConfig settings of a run's training: neural.training, the run's overrides, the device and
        precision, and the relevance threshold of the dev split it validates on (the train dataset's, or its
        folds')."""
        return {**self.runs[run].training, "rel_threshold": self.rel_threshold(self.train_datasets(run)[0], "dev")}

    def encoder_inputs(self, run: str, seed: int | str) -> list[str]:
        """The encoder directories a run's model loads: its warm start, else its study encoder."""
        warm_start = self.runs[run].encoder_dir(seed)
        return [warm_start] if warm_start else self.encoder_build(self.models[self.runs[run].model].get("encoder"))

    def query_store(self, emb: str, dataset: str, split: str) -> str:
        """The token store of a split's queries (a fold's: its parent's folded split, read by query id)."""
        source, source_split = self.folds.text_source(dataset, split)
        return f"text/{emb}/{source}/queries.{source_split}"

    def collection_store(self, emb: str, dataset: str) -> str:
        """The token store of a dataset's collection (a fold's: its parent's)."""
        return f"text/{emb}/{self.folds.collection_source(dataset)}/collection"

    def train_inputs(self, dataset: str, run: str, seed: int | str) -> dict[str, Any]:
        """Files a run's training reads (rule train): its text, examples, dev candidates, encoder."""
        emb = self.runs[run].embeddings
        return {"embeddings": f"text/{emb}/embeddings.npy",
                "examples": f"train/{dataset}/{self.runs[run].example_kind}.tsv",
                "train_queries": self.query_store(emb, dataset, "train"),
                "documents": self.collection_store(emb, dataset),
                "dev_queries": self.query_store(emb, dataset, "dev"),
                "dev_run": f"runs/{dataset}/{self.rerank_system(dataset)}.dev.run",
                "dev_qrels": f"data/{dataset}/qrels.dev.txt",
                "encoder": self.encoder_inputs(run, seed)}

    def rerank_depth(self, run: str) -> int:
        """How many candidates a run re-ranks: its ``rerank_depth``, else neural.rerank.depth."""
        return self.runs[run].spec.get("rerank_depth", self.rerank["depth"])

    def tuning_depths(self, run: str) -> list[int]:
        """[start, stop, step] of the depths a run's full task tunes on dev: neural.rerank.depths, up to its depth."""
        return self.runs[run].tuning_depths(self.rerank["depths"])

    def neural_metrics(self) -> list[str]:
        """The metric files of every system of every neural run, on each split it is evaluated on."""
        return [f"results/metrics/{dataset}/{system}.{split}.csv" for dataset, system in self.neural_systems()
                for split in self.eval_splits(dataset, system_run(system))]

    def rerank_inputs(self, dataset: str, run: str, seed: int | str, split: str) -> dict[str, Any]:
        """Files a run's re-ranking of a split reads (rule rerank): model (on a fold of the run's dataset: the
        model trained on that fold), text, candidates, encoder."""
        emb, own = self.runs[run].embeddings, self.folds.parent(dataset) == self.runs[run].train
        return {"model": f"{self.runs[run].model_dir(seed, dataset if own else None)}/model.pt",
                "embeddings": f"text/{emb}/embeddings.npy",
                "queries": self.query_store(emb, dataset, split), "documents": self.collection_store(emb, dataset),
                "candidates": f"runs/{dataset}/{self.rerank_system(dataset)}.{split}.run",
                "encoder": self.encoder_inputs(run, seed)}

    def rerank_split_inputs(self, dataset: str, run: str, seed: int | str, splits: list[str]) -> dict[str, Any]:
        """``rerank_inputs`` of one job that re-ranks several splits with the model loaded once (rule rerank:
        one split; rerank_dev_test: dev and test): the queries and candidates as lists, in ``splits``' order."""
        per_split = [self.rerank_inputs(dataset, run, seed, split) for split in splits]
        return {**per_split[0], "queries": [inputs["queries"] for inputs in per_split],
                "candidates": [inputs["candidates"] for inputs in per_split]}

    def dev_test_patterns(self) -> dict[str, str]:
        """Wildcard patterns of rule rerank_dev_test: the runs and the datasets of every (dataset, run) that
        ``eval_splits`` evaluates on dev and test (not ensembles, which re-rank nothing). Whether it does is a
        property of the run (its ``splits``) and one of the dataset (its splits, no folds), so every run of the first
        pattern evaluated on a dataset of the second re-ranks both splits, in one job."""
        both = [(dataset, name) for name, run in self.runs.items() if not run.is_ensemble
                for dataset in run.datasets if self.eval_splits(dataset, name) == ["dev", "test"]]
        return {"run": alternatives(sorted({name for _, name in both})),
                "dataset": alternatives(sorted({dataset for dataset, _ in both}))}

    # ---- claims --------------------------------------------------------------------------------
    def claim_inputs(self) -> list[str]:
        """The files of every claim row this config can evaluate."""
        paths = []
        for row in self.claims:
            if not row["not_run"]:
                paths += [ref["path"] for ref in (row["a"], row["b"]) if "path" in ref]
                paths += [seed["path"] for ref in (row["a"], row["b"]) for seed in ref.get("seeds", {}).values()]
                paths += [row["subset"][key] for key in ("qrels", "truth") if "subset" in row]
        return sorted(set(paths))
