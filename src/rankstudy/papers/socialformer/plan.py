"""The Socialformer paper's outputs of a study (config ``socialformer``): its tables' rows, columns and
captions, the graph figures' model, Fig. 6's runs, the training curves, and which outputs the config
asks for."""

from __future__ import annotations

from typing import Any, Mapping

from rankstudy.config import ConfigError
from rankstudy.papers.section import DatasetPaper

CAPTIONS = {
    "table1": "Socialformer paper Table 1 on {data}: re-ranking the top {depth} BM25 candidates; dev: sparse "
              "judgments, test: dense; RR@k = MRR@k. document length: the tokens a system reads; window: its "
              "attention span or passage length. sig: the rows this one is significantly better than (paired "
              "{test}, p < 0.05). ",
    "table2": "Socialformer paper Table 2 on {data}: attention patterns left out, and random edges; change %: "
              "against the full model (row a). sig: the rows this one is significantly better than (paired "
              "{test}, p < 0.05). ",
}
SIGNIFICANCE_TESTS = {"wilcoxon": "Wilcoxon", "t": "t-test"}


class SocialformerOutputs(DatasetPaper):
    KEY = "socialformer"

    def columns(self, table: str) -> Mapping[str, list[str]]:
        """A table's {split: measures}: its own (``table2_columns``) or the shared ``columns``."""
        return self.section.get(f"{table}_columns") or self.section["columns"]

    def named_runs(self) -> list[str]:
        """Every run the Socialformer outputs name (tables, Fig. 6, the graph figures' model)."""
        section = self.section
        named = [row["run"] for key in ("table1", "table2") for row in section[key]]
        named += list(section["fig6"]["runs"].values())
        return named + ([section["graph_run"]] if "graph_run" in section else [])

    def check(self) -> None:
        if not self.active:
            return
        section, runs = self.section, self.plan.runs
        self.check_named_runs(self.named_runs())
        for table in ("table1", "table2"):
            for row in section[table]:
                for split in self.columns(table):
                    if split not in self.plan.eval_splits(self.dataset, row["run"]):
                        raise ConfigError(f"config: socialformer.{table} shows {split} columns, but run "
                                          f"{row['run']!r} is not evaluated on {split} (neural.runs.{row['run']}.splits)")
        for name in section["curves"].values():
            if name not in runs or "model" not in runs[name].spec:
                raise ConfigError(f"config: socialformer.curves names {name!r}, which is not a trained neural.runs entry")
        measures = [section["fig6"]["measure"]] + [measure for table in ("table1", "table2")
                                                   for measures in self.columns(table).values() for measure in measures]
        for measure in measures:
            if measure not in self.plan.config["evaluation"]["measures"]:
                raise ConfigError(f"config: socialformer uses measure {measure!r}, which is not in evaluation.measures")
        if "graph_run" in section and self.plan.models[self.graph_model]["model"] != "socialformer":
            raise ConfigError(f"config: socialformer.graph_run {section['graph_run']!r} is not a Socialformer run")

    def outputs(self) -> list[str]:
        if not self.active:
            return []
        outputs = [f"results/tables/socialformer_{table}.csv" for table in ("table1", "table2") if self.section[table]]
        if "graph_run" in self.section:
            outputs += ["results/figures/socialformer_fig4.png", "results/figures/socialformer_fig5.png"]
        if self.section["fig6"]["runs"]:
            outputs.append("results/figures/socialformer_fig6.png")
        if self.section["curves"]:
            outputs.append("results/figures/socialformer_curves.png")
        return outputs

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Table rows: the first-stage BM25 (and QL, when configured) first in Table 1, as in the paper, then
        the configured {label, run, length, window} entries."""
        first_stage = [{"label": label, "dataset": self.dataset, "system": system}
                       for label, system in (("BM25", "bm25"), ("QL", "ql"))
                       if system in self.plan.systems] if table == "table1" else []
        return first_stage + [{"label": row["label"], "dataset": self.dataset,
                               "system": self.plan.runs[row["run"]].system,
                               **{key: row[key] for key in ("length", "window") if key in row}}
                              for row in self.section[table]]

    def layout(self) -> dict[str, dict[str, list[str]]]:
        """The tables' row names and value columns: what a reported file (config/paper/reported) may name."""
        if not self.active:
            return {}
        layout = {}
        for table in ("table1", "table2"):
            if self.section[table]:
                spec = self.table_spec(table)
                layout[f"socialformer_{table}"] = {"rows": [row["label"] for row in spec["rows"]],
                                                   "columns": [f"{split} {m}" for split, m in spec["columns"]]}
        return layout

    def table_metrics(self, table: str) -> list[str]:
        return sorted({f"results/metrics/{self.dataset}/{row['system']}.{split}.csv"
                       for row in self.rows(table) for split in self.columns(table)})

    def table_spec(self, table: str) -> dict[str, Any]:
        section = self.section
        data = self.plan.data_description([self.dataset])
        caption = CAPTIONS[table].format(data=data, test=SIGNIFICANCE_TESTS[section["significance"]],
                                         depth=self.plan.rerank_depths(row["run"] for row in section[table]))
        columns = [[split, measure] for split, measures in self.columns(table).items()
                   for measure in measures]
        return {"rows": self.rows(table), "columns": columns, "test": section["significance"],
                "caption": caption + section["caption_note"]}

    def stores(self, run: str, split: str = "test") -> dict[str, str]:
        """WordPiece token stores with which a run's model reads the dataset."""
        emb = self.plan.runs[run].embeddings
        return {"collection": f"text/{emb}/{self.dataset}/collection", "queries": f"text/{emb}/{self.dataset}/queries.{split}"}

    @property
    def graph_model(self) -> str:
        """The neural.models entry of graph_run (Figs. 4-5 draw its graphs)."""
        return self.plan.runs[self.section["graph_run"]].model

    def graph_inputs(self) -> dict[str, Any]:
        """Files Figs. 4-5 read: graph_run's token stores of the test split, the encoder its model loads, qrels."""
        encoder = self.plan.encoder_build(self.plan.models[self.graph_model].get("encoder"))
        return {**self.stores(self.section["graph_run"]), "encoder": encoder,
                "qrels": f"data/{self.dataset}/qrels.test.txt"}

    def graph_spec(self, figure: str) -> dict[str, Any]:
        """Fig. 4 / Fig. 5 settings plus the graph_run's model settings (its graph, encoder)."""
        return {**self.section[figure], "model": self.plan.model_encoder(self.graph_model),
                "rel_threshold": self.plan.rel_threshold(self.dataset, "test")}

    def fig6_metrics(self) -> list[str]:
        split = self.section["fig6"]["split"]
        return sorted({f"results/metrics/{self.dataset}/{self.plan.runs[run].system}.{split}.csv"
                       for run in self.section["fig6"]["runs"].values()})

    def fig6_spec(self) -> dict[str, Any]:
        """Fig. 6 settings; runs as a list (the JSON's mapping keys are sorted, the series keep the config's
        order)."""
        fig6 = self.section["fig6"]
        runs = [{"label": label, "dataset": self.dataset, "system": self.plan.runs[run].system}
                for label, run in fig6["runs"].items()]
        return {"runs": runs, "measure": fig6["measure"], "split": fig6["split"], "edges": fig6["edges"],
                "rel_threshold": self.plan.rel_threshold(self.dataset, fig6["split"])}

    def curve_logs(self) -> list[str]:
        return [f"{self.plan.runs[run].model_dir(self.plan.runs[run].seeds[0])}/log.csv"
                for run in self.section["curves"].values()]

    def curves_spec(self) -> dict[str, Any]:
        metrics = {self.plan.runs[run].training["metric"] for run in self.section["curves"].values()}
        return {"labels": list(self.section["curves"]), "metric": " / ".join(sorted(metrics))}
