"""The TKL paper's outputs of a study (config ``tkl``): its tables' rows and captions, the runs its
figures compare, and which outputs the config asks for."""

from __future__ import annotations

from typing import Any, Iterable

from rankstudy.papers.section import DatasetPaper
from rankstudy.report.columns import REGIONS_AFTER, SPEED_NOTE, TKL_MEASURES

# table wildcard -> (config key of its rows, its name in the caption)
TABLES = {"table1": ("table1", "Table 1"), "table2": ("saturation", "Table 2 (saturation ablation)")}
CAPTION = ("TKL paper {what} on {data}: re-ranking the top {depth} BM25 candidates{judgments}. sig: the rows this "
           "one is significantly better than (paired Wilcoxon, p < 0.05). {speed}")
# what the synthetic generator makes (docs/synthetic.md); a real dataset's judgments are counted from its files
SYNTHETIC_JUDGMENTS = "; test: dense judgments, dev: sparse"


class TKLOutputs(DatasetPaper):
    KEY = "tkl"

    def named_runs(self) -> list[str]:
        """Every run the TKL outputs name (tables, Fig. 2, comparison, regions)."""
        section = self.section
        named = [row["run"] for key in ("table1", "saturation", "lengths") for row in section[key]]
        return named + list(section["compare"].values()) + ([section["regions"]] if "regions" in section else [])

    def check(self) -> None:
        if self.active:
            self.check_named_runs(self.named_runs())

    def outputs(self) -> list[str]:
        if not self.active:
            return []
        outputs = [f"results/tables/tkl_{table}.csv" for table, (key, _) in TABLES.items() if self.section[key]]
        if self.section["compare"]:
            outputs.append("results/figures/tkl_fig1.png")
            if self.plan.datasets[self.dataset]["source"] == "synthetic":
                outputs.append("results/tables/tkl_evidence.csv")
        if self.section["lengths"]:
            outputs.append("results/figures/tkl_fig2.png")
        if "regions" in self.section:
            outputs += ["results/figures/tkl_fig3.png", "results/tables/tkl_regions.csv"]
        return outputs

    def metrics(self, systems: Iterable[str], splits: Iterable[str] = ("dev", "test")) -> list[str]:
        splits = tuple(splits)
        return sorted({f"results/metrics/{self.dataset}/{system}.{split}.csv" for system in systems for split in splits})

    def rows(self, key: str) -> list[dict[str, Any]]:
        """Table rows: BM25 first (the candidates the runs re-rank: the study's BM25, or the track's official BM25
        top 100 in the paper config), then the configured {label, run} entries (``speed``: the efficiency model
        whose docs/ms the row shows, default the run's model)."""
        runs = self.plan.runs
        return [{"label": "BM25", "dataset": self.dataset, "system": self.plan.rerank_system(self.dataset)}] + [
            {"label": row["label"], "dataset": self.dataset, "system": runs[row["run"]].system,
             "model": row.get("speed", runs[row["run"]].model)}
            for row in self.section[key]]

    def layout(self) -> dict[str, dict[str, list[str]]]:
        """The tables' row names and value columns: what a reported file (config/paper/reported) may name."""
        if not self.active:
            return {}
        columns = [f"{split} {m}" for split in self.table_spec("table1")["splits"] for m in TKL_MEASURES]
        layout = {f"tkl_{table}": {"rows": [row["label"] for row in self.rows(key)],
                                   "columns": columns + self.plan.speed_columns()}
                  for table, (key, _) in TABLES.items() if self.section[key]}
        if "regions" in self.section:
            from rankstudy.models.tkl import TKLConfig  # torch: only when asked, never while the DAG is built

            model = self.plan.models[self.plan.runs[self.section["regions"]].model]
            regions = model.get("top_regions", TKLConfig.top_regions)
            layout["tkl_regions"] = {"rows": [str(r) for r in range(1, regions + 1)],
                                     "columns": [f"share after {REGIONS_AFTER}"]}
        return layout

    def table_metrics(self, table: str) -> list[str]:
        return self.metrics(row["system"] for row in self.rows(TABLES[table][0]))

    def table_spec(self, table: str) -> dict[str, Any]:
        key, what = TABLES[table]
        synthetic = self.plan.datasets[self.dataset]["source"] == "synthetic"
        caption = CAPTION.format(what=what, data=self.plan.data_description([self.dataset]),
                                 judgments=SYNTHETIC_JUDGMENTS if synthetic else "",
                                 speed=SPEED_NOTE if self.plan.measures_speed else "",
                                 depth=self.plan.rerank_depths(row["run"] for row in self.section[key]))
        return {"rows": self.rows(key), "splits": ["test", "dev"], "caption": caption + self.section["caption_note"]}

    def test_runs(self) -> dict[str, str]:
        """Fig. 1's and the evidence table's runs: {label: test run file} of ``compare``."""
        return {label: f"runs/{self.dataset}/{self.plan.runs[run].system}.test.run"
                for label, run in self.section["compare"].items()}

    def run_stores(self, run: str) -> dict[str, str]:
        """The token stores, word vectors and model (its first seed's) with which a run's model reads the
        dataset's test split: those its re-ranking of that split reads."""
        inputs = self.plan.rerank_inputs(self.dataset, run, self.plan.runs[run].seeds[0], "test")
        return {key: inputs[key] for key in ("queries", "documents", "embeddings", "model")}

    def evidence_spec(self) -> dict[str, Any]:
        caption = ("Relevant test documents ranked in the top 10 by each system, by where their evidence starts "
                   f"(synthetic truth). {self.section['caption_note']}")
        return {"runs": self.test_runs(), "boundary": self.section["evidence_boundary"], "top": 10,
                "rel_threshold": self.plan.rel_threshold(self.dataset, "test"), "caption": caption}

    def fig1_spec(self) -> dict[str, Any]:
        return {"runs": self.test_runs(), "top": self.section["top"],
                "rel_threshold": self.plan.rel_threshold(self.dataset, "test")}

    def fig2_metrics(self) -> list[str]:
        return self.metrics([self.plan.runs[point["run"]].system for point in self.section["lengths"]], ["test"])

    def fig2_spec(self) -> dict[str, Any]:
        return {"points": [{"model": point["model"], "length": point["length"], "dataset": self.dataset,
                            "system": self.plan.runs[point["run"]].system} for point in self.section["lengths"]]}
