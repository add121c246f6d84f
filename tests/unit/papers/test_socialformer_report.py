"""Socialformer paper outputs: Tables 1-2 (letters, % change), Figs. 4-6 (graphs of a real stored
document, circle sizes, metric by positive-document length), the CLI and the config section."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from helpers import REPO, assert_drawn, metric_csv

from rankstudy.cli import main
from rankstudy.errors import StudyError
from rankstudy.formats import read_qrels, write_qrels
from rankstudy.models.socialformer import SocialGraphConfig
from rankstudy.papers.socialformer.report import (GraphDocument, adjacency_figure, bucket_labels, choose_document,
                                           circle_size_figure, figure_document, length_bucket_figure,
                                           positive_lengths, table1, table2)
from rankstudy.store import TokenStore, build_store_with

MEASURES = ("RR@100", "RR@10", "nDCG@100", "nDCG@10")
COLUMNS = [["dev", "RR@100"], ["dev", "RR@10"], ["test", "nDCG@100"], ["test", "nDCG@10"]]


def system_csvs(path, systems):
    """Metric CSVs (dev and test) of systems given as name -> per-query values."""
    return [metric_csv(path / f"{name}.{split}.csv", name, split, values, MEASURES)
            for name, values in systems.items() for split in ("dev", "test")]


def test_table1_means_letters_and_length_columns(tmp_path):
    base = {str(q): float(v) for q, v in enumerate(np.random.default_rng(0).random(40))}
    csvs = system_csvs(tmp_path, {"bm25": base, "sf": {q: v + 0.2 for q, v in base.items()}})
    rows = [{"label": "BM25", "dataset": "d", "system": "bm25"},
            {"label": "Socialformer", "dataset": "d", "system": "sf", "length": 2048, "window": "128"}]
    table = table1(csvs, rows, tmp_path / "t1", "the caption")  # default: the paper's columns
    assert list(table.columns[:6]) == ["", "system", "document length", "window", "dev RR@100", "dev RR@100 sig"]
    assert list(table["document length"]) == ["", "2,048"] and list(table["window"]) == ["", "128"]
    assert table.loc[1, "test nDCG@10"] == pytest.approx(np.mean(list(base.values())) + 0.2)
    for split, measure in COLUMNS:
        assert list(table[f"{split} {measure} sig"]) == ["", "a"]
    assert (tmp_path / "t1.md").read_text().startswith("the caption")
    assert "2,048" in (tmp_path / "t1.tex").read_text()


def test_table2_percent_change_against_the_full_model(tmp_path):
    base = {str(q): 0.5 + 0.4 * float(v) for q, v in enumerate(np.random.default_rng(1).random(30))}
    systems = {"full": base, "no_sd": {q: v * 0.9 for q, v in base.items()}, "same": dict(base)}
    rows = [{"label": label, "dataset": "d", "system": name}
            for label, name in (("full model", "full"), ("w/o static distance", "no_sd"), ("random", "same"))]
    table = table2(system_csvs(tmp_path, systems), rows, tmp_path / "t2", "cap", COLUMNS)
    for split, measure in COLUMNS:
        name = f"{split} {measure}"
        assert list(table[f"{name} change %"]) == pytest.approx([0.0, -10.0, 0.0])
        assert list(table[f"{name} sig"]) == ["b", "", "b"]  # a 10 % loss on every query is significant
    assert list(table.columns[2:5]) == ["dev RR@100", "dev RR@100 sig", "dev RR@100 change %"]
    zero = {q: 0.0 for q in base}
    table = table2(system_csvs(tmp_path, {"z": zero, "same": base}),
                   [{"label": "full", "dataset": "d", "system": "z"}, {"label": "x", "dataset": "d", "system": "same"}],
                   tmp_path / "t2z", "cap", COLUMNS[:1])
    assert table["dev RR@100 change %"].isna().all()  # no % change against a zero


def test_bucket_labels_and_positive_lengths():
    assert bucket_labels([512, 1024, 2048]) == ["<512", "512-1,024", "1,024-2,048", ">=2,048"]
    qrels = {"graded": {"short": 2, "long": 1}, "tie": {"a": 2, "b": 2}, "none": {"x": 0}}
    lengths = {"short": 100, "long": 5000, "a": 700, "b": 3000, "x": 50}
    assert positive_lengths(qrels, lengths, rel_threshold=1) == {"graded": 100, "tie": 3000}
    assert positive_lengths(qrels, lengths, rel_threshold=2) == {"graded": 100, "tie": 3000}
    with pytest.raises(StudyError, match="relevant document long has no length"):
        positive_lengths(qrels, {"short": 1, "a": 1, "b": 1})


def test_fig6_means_by_positive_document_length(tmp_path):
    lengths = [100, 511, 512, 1023, 1024, 2047, 2048, 9000]  # two per bucket, on both sides of each edge
    qrels = {str(i): {f"d{i}": 1} for i in range(len(lengths))}
    qrels["8"] = {"d8": 0}  # judged, not relevant: left out
    write_qrels(tmp_path / "qrels.txt", qrels)
    doc_lengths = {f"d{i}": n for i, n in enumerate(lengths)} | {"d8": 700}
    parade = {str(i): i / 10 for i in range(9)}
    social = {q: v + 0.05 for q, v in parade.items()}
    csvs = [metric_csv(tmp_path / f"{s}.csv", s, "test", values, MEASURES)
            for s, values in (("parade", parade), ("sf", social))]
    runs = {"PARADE": {"dataset": "d", "system": "parade"}, "Socialformer": {"dataset": "d", "system": "sf"}}
    table = length_bucket_figure(csvs, runs, tmp_path / "qrels.txt", doc_lengths, tmp_path / "fig6")
    assert list(table["bucket"]) == ["<512", "512-1,024", "1,024-2,048", ">=2,048"]
    assert list(table["queries"]) == [2, 2, 2, 2]
    assert list(table["PARADE"]) == pytest.approx([0.05, 0.25, 0.45, 0.65])
    assert list(table["Socialformer"]) == pytest.approx([0.10, 0.30, 0.50, 0.70])
    assert pd.read_csv(tmp_path / "fig6.csv").shape == (4, 4)
    assert_drawn(tmp_path / "fig6.png", tmp_path / "fig6.pdf")
    fewer = metric_csv(tmp_path / "few.csv", "few", "test", {"0": 0.1}, MEASURES)
    with pytest.raises(StudyError, match="different queries"):
        length_bucket_figure([*csvs, fewer], {**runs, "few": {"dataset": "d", "system": "few"}},
                             tmp_path / "qrels.txt", doc_lengths, tmp_path / "f")
    with pytest.raises(StudyError, match="increasing"):
        length_bucket_figure(csvs, runs, tmp_path / "qrels.txt", doc_lengths, tmp_path / "f", edges=[1024, 512])


def write_store(path, texts: dict[str, list[int]], kind="collection"):
    """A token store of the given id sequences (what the WordPiece stores hold)."""
    tsv = path.with_suffix(".tsv")
    tsv.write_text("".join(f"{i}\t{' '.join(map(str, ids))}\n" for i, ids in texts.items()))
    build_store_with(tsv, lambda batch: [[int(t) for t in text.split()] for text in batch], path, kind)
    return TokenStore(path)


@pytest.fixture
def stores(tmp_path):
    """Queries 1, 2 (ids 7, 8 / 9); documents of 300-600 tokens of filler ids 1000-1999."""
    rng = np.random.default_rng(3)

    def filler(n):
        return [int(t) for t in rng.integers(1000, 2000, n)]

    docs = {"no_query_term": filler(400), "short": filler(150) + [7] + filler(149),
            "long_enough": [8] + filler(449), "longer": filler(300) + [7] + filler(299), "other_query": filler(500)}
    queries = {"1": [7, 8], "2": [9]}
    write_qrels(tmp_path / "qrels.txt", {"1": {name: 1 for name in ("no_query_term", "short", "long_enough", "longer")},
                                         "2": {"other_query": 2}, "3": {"short": 1}})
    return (write_store(tmp_path / "collection", docs), write_store(tmp_path / "queries", queries, "queries"),
            tmp_path / "qrels.txt")


def test_choose_document_prefers_query_terms_then_the_least_cut_off(stores):
    collection, queries, qrels_path = stores
    qrels = read_qrels(qrels_path)
    assert choose_document(qrels, collection, queries, 400) == ("1", "long_enough")  # 450 >= 400, shortest such
    assert choose_document(qrels, collection, queries, 500) == ("1", "longer")  # the only one with 500
    assert choose_document(qrels, collection, queries, 700) == ("1", "longer")  # none reaches 700: the longest
    assert choose_document(qrels, collection, queries, 300, rel_threshold=2) == ("2", "other_query")  # no term in it


def graph_document(n=300, centrality=True, seed=0) -> GraphDocument:
    rng = np.random.default_rng(seed)
    tokens = torch.from_numpy(rng.integers(1, 60, n))
    idf = torch.rand(60, generator=torch.Generator().manual_seed(0))
    weights = torch.rand(n, generator=torch.Generator().manual_seed(1)) if centrality else None
    return GraphDocument("q", "d", torch.tensor([3, 5]), tokens, n + 10, idf, weights)


@pytest.mark.parametrize("with_centrality", [True, False])
def test_fig4_one_panel_per_pattern_at_the_asked_density(tmp_path, with_centrality):
    document = graph_document(centrality=with_centrality)
    summary = adjacency_figure(document, SocialGraphConfig(), tmp_path / "fig4", sparsity=0.9)
    panels = ["static distance", "static centrality", "dynamic distance"] + (["dynamic centrality"] if with_centrality
                                                                            else []) + ["combined"]
    assert list(summary["panel"]) == panels
    assert summary["density"].to_numpy() == pytest.approx(0.1, abs=0.01)  # 44,850 pairs: sd of the density ~ 0.0014
    assert summary["expected density"].to_numpy() == pytest.approx(0.1, rel=1e-4)
    assert ("dynamic_centrality" in summary.loc[len(panels) - 1, "patterns"]) == with_centrality
    edges = pd.read_csv(tmp_path / "fig4.edges.csv")
    assert ((edges["i"] < edges["j"]) & (edges["j"] < 300) & (edges["i"] >= 0)).all()
    assert edges.groupby("panel", sort=False).size().reindex(panels).tolist() == summary["edges"].tolist()
    static = edges[edges["panel"] == "static distance"]
    far = (static["j"] - static["i"]) >= 100
    assert far.mean() < 0.4  # distance decays: a pattern-free graph would have 44 % of its pairs this far apart
    assert_drawn(tmp_path / "fig4.png", tmp_path / "fig4.pdf")


def test_fig4_needs_the_centrality_it_is_told_to_use(tmp_path):
    with pytest.raises(StudyError, match="dynamic centrality"):
        adjacency_figure(graph_document(centrality=False), SocialGraphConfig(weights={"dynamic_centrality": 1.0}),
                         tmp_path / "f")


def test_fig5_circle_sizes_by_sparsity_and_partition(tmp_path):
    document = graph_document(n=400)
    graph = SocialGraphConfig(max_nodes=32)
    table = circle_size_figure(document, graph, tmp_path / "fig5", sparsities=(0.99, 0.9), max_circles=8)
    assert len(table) == 2 * 2 * 8 and list(table.columns) == ["partition", "sparsity", "circle", "nodes", "density"]
    for (mode, sparsity), part in table.groupby(["partition", "sparsity"]):
        sizes = part["nodes"].to_numpy()
        assert list(part["circle"]) == list(range(1, 9))
        assert np.all(np.diff(sizes) <= 0) and sizes.max() <= 32
        assert part["density"].iloc[0] == pytest.approx(1 - sparsity, abs=0.01)
    node_dense = table[(table["partition"] == "node") & (table["sparsity"] == 0.9)]["nodes"]
    assert node_dense.iloc[0] == 32  # 40 neighbours on average: the first circle is full
    assert node_dense.sum() <= 400  # node-level circles are disjoint
    sparse = table[table["sparsity"] == 0.99].groupby("partition")["nodes"].max()
    assert (sparse < 32).all()  # ~4 neighbours per node: small circles
    assert (tmp_path / "fig5.png").exists() and (tmp_path / "fig5.pdf").exists()


def test_figure_document_and_cli(stores, tmp_path):
    collection, queries, qrels = stores
    spec = {"model": {"graph": {"max_nodes": 16}}, "length": 400, "dynamic_centrality": False, "rel_threshold": 1}
    graph, document = figure_document(collection.path, queries.path, qrels, spec)
    assert (document.qid, document.docid) == ("1", "long_enough")
    assert document.tokens.shape == (400,) and document.full_length == 450 and document.centrality is None
    assert document.query.tolist() == [7, 8] and graph.max_nodes == 16
    assert float(document.idf[7]) == pytest.approx(np.log(5 / 2))  # id 7 is in 2 of the 5 documents
    assert document.idf.numel() > int(document.tokens.max())
    with pytest.raises(StudyError, match="unknown key"):
        figure_document(collection.path, queries.path, qrels, {**spec, "model": {"graph": {"circles": 3}}})
    with pytest.raises(StudyError, match="both qid and docid"):
        figure_document(collection.path, queries.path, qrels, {**spec, "qid": "1"})

    args = ["socialformer-report", "fig5", "--collection", str(collection.path), "--queries", str(queries.path),
            "--qrels", str(qrels), "--out-prefix", str(tmp_path / "cli5"),
            "--spec", json.dumps({**spec, "qid": "2", "docid": "other_query", "sparsities": [0.95],
                                  "max_circles": 4, "partitions": ["edge"]})]
    assert main(args) == 0
    written = pd.read_csv(tmp_path / "cli5.csv")
    assert len(written) == 4 and set(written["partition"]) == {"edge"}
    args[1], args[-1] = "fig4", json.dumps({**spec, "qid": "1", "docid": "nope", "sparsity": 0.9})
    assert main(args) == 2  # unknown document: a clear error, no traceback


def test_cli_tables(tmp_path):
    values = {str(q): q / 10 for q in range(10)}
    csvs = system_csvs(tmp_path, {"bm25": values, "sf": values})
    spec = {"rows": [{"label": "BM25", "dataset": "d", "system": "bm25"},
                     {"label": "SF", "dataset": "d", "system": "sf", "length": 2048, "window": 128}],
            "columns": COLUMNS, "caption": "cap"}
    for table in ("table1", "table2"):
        assert main(["socialformer-report", table, "--metrics", *map(str, csvs), "--spec", json.dumps(spec),
                     "--out-prefix", str(tmp_path / table)]) == 0
    assert "document length" in pd.read_csv(tmp_path / "table1.csv").columns
    assert "dev RR@10 change %" in pd.read_csv(tmp_path / "table2.csv").columns


def test_example_config_section_validates_with_defaults():
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    example = yaml.safe_load((REPO / "tests/config/socialformer_example.yaml").read_text())
    config = {"socialformer": example["socialformer"]}
    validate(config, str(REPO / "workflow/schemas/config.schema.yaml"))
    section = config["socialformer"]
    assert section["columns"] == {"dev": ["RR@100", "RR@10"], "test": ["nDCG@100", "nDCG@10"]}
    assert section["fig4"]["sparsity"] == 0.9 and section["fig5"]["max_circles"] == 32
    assert section["fig5"]["sparsities"] == [0.99, 0.97, 0.95, 0.93] and section["fig6"]["edges"] == [512, 1024, 2048]
    with pytest.raises(WorkflowError):
        validate({"socialformer": {"fig5": {"sparsity": 0.9}}}, str(REPO / "workflow/schemas/config.schema.yaml"))


def test_fig4_with_the_encoders_dynamic_centrality(stores, tmp_path):
    """The real pattern (4): MiniLM's [CLS] attention (loads the encoder: seconds)."""
    collection, queries, qrels = stores
    graph, document = figure_document(collection.path, queries.path, qrels, {"length": 300})
    assert document.centrality.shape == (300,) and float(document.centrality.max()) > 0
    summary = adjacency_figure(document, graph, tmp_path / "fig4")
    assert list(summary["panel"]) == ["static distance", "static centrality", "dynamic distance",
                                      "dynamic centrality", "combined"]


def test_learning_curves_plot_each_runs_loss_and_validation(tmp_path):
    from rankstudy.report.curves import learning_curves

    (tmp_path / "a.csv").write_text("step,loss,metric,best\n100,1.5,0.2,0.2\n200,1.1,0.3,0.3\n")
    (tmp_path / "pretrain.csv").write_text("step,loss\n1,9.0\n2,8.5\n")  # an encoder's masked-LM log
    learning_curves({"warm start": tmp_path / "a.csv", "masked LM": tmp_path / "pretrain.csv"},
                    tmp_path / "curves", "RR@10")
    for suffix in (".png", ".pdf"):
        assert (tmp_path / f"curves{suffix}").stat().st_size > 1000
    plotted = pd.read_csv(tmp_path / "curves.csv")
    assert plotted["run"].tolist() == ["warm start", "warm start", "masked LM", "masked LM"]
    assert plotted.loc[1, "metric"] == 0.3 and plotted["metric"].isna().sum() == 2
    (tmp_path / "bad.csv").write_text("step,metric\n1,0.2\n")
    with pytest.raises(StudyError, match="bad.csv: a training log needs the columns step and loss; missing loss"):
        learning_curves({"bad": tmp_path / "bad.csv"}, tmp_path / "bad")
