"""The TK paper's outputs of a study (config ``neural``: ``table2_runs``, ``query_tables``): Table 2's rows,
Tables 3-4's runs and the interpretability view's run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rankstudy.config import ConfigError
from rankstudy.papers.section import Study
from rankstudy.report.columns import TK_DEV_MEASURES, TK_MEASURES, TK_TEST_MEASURES


@dataclass(frozen=True)
class TKOutputs:
    plan: Study

    def check(self) -> None:
        for key in ("table2_runs", "query_tables"):
            for name in self.plan.config["neural"].get(key, []):
                if name not in self.plan.runs:
                    raise ConfigError(f"config: neural.{key} names {name!r}, which is not a key of neural.runs")
        for entry in self.plan.config["neural"].get("learning_curve", []):
            run = self.plan.runs.get(entry["run"])
            if run is None or run.base != entry["run"] or run.is_ensemble:
                raise ConfigError(f"config: neural.learning_curve names {entry['run']!r}, which is not a trained run "
                                  "of neural.runs")
        for name in self.references:
            if name not in self.plan.systems:
                raise ConfigError(f"config: neural.table2_references names {name!r}, which is not a first_stage "
                                  "system")
        missing = [m for m in TK_MEASURES if m not in self.plan.config["evaluation"]["measures"]]
        if self.table2_runs and missing:
            raise ConfigError(f"config: the TK Table 2 (neural.table2_runs) shows {', '.join(missing)}: add "
                              f"{'it' if len(missing) == 1 else 'them'} to evaluation.measures")

    @property
    def table2_runs(self) -> list[str]:
        """neural.table2_runs (default: every run)."""
        return self.plan.config["neural"].get("table2_runs", list(self.plan.runs))

    @property
    def references(self) -> list[str]:
        """neural.table2_references: first-stage systems shown as reference rows (e.g. a zero-shot re-scorer)."""
        return self.plan.config["neural"].get("table2_references", [])

    def first_stage_label(self, system: str) -> str:
        """A first-stage system as the tables name it: its ``label``, else BM25, QL, or the config's name."""
        if system not in self.plan.systems:
            return system
        spec = self.plan.systems[system]
        return spec.get("label") or {"bm25": "BM25", "ql": "QL"}.get(spec["model"], system)

    def table2_rows(self) -> list[dict[str, Any]]:
        """Table 2: the re-ranked first stage per evaluated dataset and its reference systems (re-rank task only),
        then the runs of Table 2 (each by the system that stands for it: ``Run.system``; ``-full``: the depth tuned
        on dev)."""
        rows, datasets = [], []
        for name in self.table2_runs:
            run = self.plan.runs[name]
            for dataset in run.datasets:
                first_stage = self.plan.rerank_system(dataset)
                if dataset not in datasets:
                    datasets.append(dataset)
                    rows.append({"run": self.first_stage_label(first_stage), "model": None, "dataset": dataset,
                                 "rerank": first_stage, "full": first_stage, "baseline": first_stage})
                    rows += [{"run": self.first_stage_label(system), "model": None, "dataset": dataset,
                              "rerank": system, "full": None, "baseline": first_stage} for system in self.references]
                rows.append({"run": name, "model": run.model, "dataset": dataset, "rerank": run.system,
                             "full": f"{run.system}-full", "baseline": first_stage})
        return rows

    def caption_datasets(self) -> list[str]:
        """The datasets Table 2's caption counts: those it evaluates, then those its runs trained on (a folded
        dataset stands for its folds)."""
        names = [row["dataset"] for row in self.table2_rows()]
        names += [self.plan.runs[name].train for name in self.table2_runs if self.plan.runs[name].datasets]
        return [name for name in dict.fromkeys(names) if name in self.plan.datasets]

    def layout(self) -> dict[str, dict[str, list[str]]]:
        """Table 2's row names and value columns: what a reported file (config/paper/reported) may name."""
        rows = self.table2_rows()
        if not rows:
            return {}
        columns = [f"dev {m}" for m in TK_DEV_MEASURES] + [
            f"test {task} {m}" for task in ("full", "re-rank") for m in TK_TEST_MEASURES] + self.plan.speed_columns()
        return {"tk_table2": {"rows": [f"{row['dataset']} | {row['run']}" for row in rows], "columns": columns}}

    def table2_metrics(self) -> list[str]:
        paths = set()
        for row in self.table2_rows():
            run = row["run"] if row["model"] else None  # a first-stage row: the dataset's dev and test
            for system in filter(None, (row["rerank"], row["full"])):
                paths.update(f"results/metrics/{row['dataset']}/{system}.{split}.csv"
                             for split in self.plan.eval_splits(row["dataset"], run))
        return sorted(paths)

    @property
    def tradeoff(self) -> bool:
        """Whether the study draws the trade-off figure: neural.tradeoff_figure, with Table 2 and a docs/ms column."""
        return bool(self.plan.config["neural"].get("tradeoff_figure") and self.plan.measures_speed
                    and self.table2_rows())

    def learning_curve(self) -> dict[str, list[dict[str, Any]]]:
        """neural.learning_curve's points (every seed of each {series, run} on each dataset the run is evaluated
        on, with the run's training queries: its training.train_queries, None = all of its examples') and the
        baselines (the first stage each dataset's runs re-rank); empty without entries."""
        points = []
        for entry in self.plan.config["neural"].get("learning_curve", []):
            run = self.plan.runs[entry["run"]]
            for dataset, seed in ((d, s) for d in run.datasets for s in run.seeds):
                points.append({"series": entry["series"], "queries": run.training.get("train_queries"),
                               "dataset": dataset, "system": f"{run.model}.{entry['run']}.s{seed}",
                               "examples": f"train/{run.train}/{run.example_kind}.tsv"})
        datasets = dict.fromkeys(point["dataset"] for point in points)
        baselines = [{"label": self.first_stage_label(self.plan.rerank_system(d)), "dataset": d,
                      "system": self.plan.rerank_system(d)} for d in datasets]
        return {"points": points, "baselines": baselines} if points else {}

    def learning_curve_inputs(self) -> dict[str, list[str]]:
        """The learning curve's metric files (test split) and the examples files that count 'all' queries."""
        curve = self.learning_curve()
        if not curve:
            return {}
        rows = curve["points"] + curve["baselines"]
        return {"metrics": sorted({f"results/metrics/{r['dataset']}/{r['system']}.test.csv" for r in rows}),
                "examples": sorted({point["examples"] for point in curve["points"]})}

    def view_run(self) -> dict[str, str] | None:
        """The interpretability view's run: the first TK run of Table 2 that trained its own models (re-rank
        task; its best-validated seed where the run selects one, else its first seed); None without one. A run
        trained on query folds has no one model to view."""
        for name in self.table2_runs:
            run = self.plan.runs[name]
            if (run.base == name and self.plan.models[run.model]["model"] == "tk" and run.datasets
                    and run.train not in self.plan.folds.parents):
                return {"run": name, "dataset": run.datasets[0], "system": run.system}
        return None

    def view_inputs(self) -> dict[str, Any]:
        """Files the interpretability view reads: the view run's models (the seeds it chooses from), their
        text, the test split and both runs of it."""
        view = self.view_run()
        run, data = self.plan.runs[view["run"]], f"data/{view['dataset']}"
        return {"models": [f"{run.model_dir(seed)}/model.pt" for seed in run.view_seeds],
                "embeddings": f"text/{run.embeddings}/embeddings.npy", "vocab": f"text/{run.embeddings}/vocab",
                "collection": f"{data}/collection.tsv", "queries": f"{data}/queries.test.tsv",
                "qrels": f"{data}/qrels.test.txt",
                "first_stage": f"runs/{view['dataset']}/{self.plan.rerank_system(view['dataset'])}.test.run",
                "neural": f"runs/{view['dataset']}/{view['system']}.test.run"}

    def query_tables(self) -> list[dict[str, str]]:
        """Tables 3-4: neural.query_tables' runs that are in Table 2 and evaluated somewhere, each on its first
        dataset (re-rank task)."""
        return [{"run": name, "dataset": self.plan.runs[name].datasets[0], "system": self.plan.runs[name].system}
                for name in self.plan.config["neural"].get("query_tables", [])
                if name in self.table2_runs and self.plan.runs[name].datasets]
