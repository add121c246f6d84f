"""The Socialformer paper's tables and figures (Zhou, Dou, Yuan, Ma; WWW 2022). docs/socialformer.md.

- ``table1``: systems x (split, measure) means with significance letters (``tables.system_frame``),
  plus the tokens each system reads ("document length") and its attention span or passage length
  ("window"), as in the paper's Table 1.
- ``table2``: the pattern ablation: the same columns, each value followed by its % change against
  the first row (the full model).
- ``adjacency_figure`` (Fig. 4): the graph each attention pattern alone, and their configured mix,
  samples for one document at one sparsity.
- ``circle_size_figure`` (Fig. 5): nodes in each friend circle (largest first), by sparsity,
  node- vs edge-level partition.
- ``length_bucket_figure`` (Fig. 6): a measure by the length of the query's positive document.

Figs. 4 and 5 draw real graphs (``rankstudy.models.socialformer``) of one judged document of the
collection and its query (``figure_document``), with the collection's IDF and, when an encoder is
named, the dynamic centrality of the model's own frozen encoder. Every figure also writes the
plotted numbers as PREFIX.csv (Fig. 4 also its edges, PREFIX.edges.csv).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from rankstudy.atomic import atomic_open
from rankstudy.config import from_dict
from rankstudy.errors import StudyError
from rankstudy.evaluate import read_metrics
from rankstudy.formats import Qrels, read_qrels
from rankstudy.models.socialformer import SocialGraphConfig, build_social_graph, make_generator, partition_graph
from rankstudy.report.figures import plt, save_figure
from rankstudy.report.tables import metric_rows, per_query_values, system_frame, write_table
from rankstudy.store import TokenStore

log = logging.getLogger(__name__)

COLUMNS = (("dev", "RR@100"), ("dev", "RR@10"), ("test", "nDCG@100"), ("test", "nDCG@10"))  # MRR = mean RR
PANELS = {"static distance": "static_distance", "static centrality": "static_centrality",
          "dynamic distance": "dynamic_distance", "dynamic centrality": "dynamic_centrality"}
SPARSITIES = (0.99, 0.97, 0.95, 0.93)
LENGTH_EDGES = (512, 1024, 2048)


# ---------------------------------------------------------------- tables


def _shown(value: Any) -> str:
    """A length/window cell: integers with thousands separators (2,048), None empty."""
    if value is None:
        return ""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def table1(metric_csvs: Sequence[str | os.PathLike], rows: Sequence[Mapping[str, Any]], out_prefix, caption: str,
           columns: Sequence[Sequence[str]] = COLUMNS, test: str = "wilcoxon") -> pd.DataFrame:
    """Table 1. ``rows``: dicts with label, dataset, system and optional length, window;
    ``columns``: (split, measure) pairs (default: the paper's); ``test``: the paired significance
    test of the ``sig`` letters (``rankstudy.significance.TESTS``; the paper: t)."""
    table = system_frame(read_metrics(metric_csvs), rows, [tuple(column) for column in columns], test)
    table.insert(2, "document length", [_shown(row.get("length")) for row in rows])
    table.insert(3, "window", [_shown(row.get("window")) for row in rows])
    write_table(table, out_prefix, caption)
    return table


def table2(metric_csvs: Sequence[str | os.PathLike], rows: Sequence[Mapping[str, Any]], out_prefix, caption: str,
           columns: Sequence[Sequence[str]] = COLUMNS, test: str = "wilcoxon") -> pd.DataFrame:
    """Table 2 (ablation): ``rows`` as in ``table1``, the full model first. After each measure's
    ``sig`` column, ``"{split} {measure} change %"`` = 100 · (value − full) / full (empty when
    the full model's value is 0)."""
    table = system_frame(read_metrics(metric_csvs), rows, [tuple(column) for column in columns], test)
    order = ["", "system"]
    for split, measure in columns:
        name = f"{split} {measure}"
        full = table.loc[0, name]
        table[f"{name} change %"] = 100.0 * (table[name] - full) / full if full else np.nan
        order += [name, f"{name} sig", f"{name} change %"]
    table = table[order]
    write_table(table, out_prefix, caption)
    return table


# ---------------------------------------------------------------- Fig. 6


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """Half-open length buckets [0, e1), [e1, e2), ..., [e_last, ∞): "<512", "512-1,024", ..., ">=2,048"."""
    return ([f"<{edges[0]:,}"] + [f"{low:,}-{high:,}" for low, high in zip(edges, edges[1:])]
            + [f">={edges[-1]:,}"])


def positive_lengths(qrels: Qrels, lengths: Mapping[str, int], rel_threshold: int = 1) -> dict[str, int]:
    """Each query's positive document length: its highest-graded relevant document (grade >=
    ``rel_threshold``; ties: the longest). Queries without a relevant document are left out."""
    positives = {}
    for qid, judged in qrels.items():
        relevant = [(grade, docid) for docid, grade in judged.items() if grade >= rel_threshold]
        if not relevant:
            continue
        missing = [docid for _, docid in relevant if docid not in lengths]
        if missing:
            raise StudyError(f"query {qid}: relevant document {missing[0]} has no length in the token store")
        positives[qid] = max((grade, lengths[docid]) for grade, docid in relevant)[1]
    return positives


def length_bucket_figure(metric_csvs: Sequence[str | os.PathLike], runs: Mapping[str, Mapping[str, str]],
                         qrels_path, lengths: Mapping[str, int], out_prefix, measure: str = "nDCG@10",
                         split: str = "test", edges: Sequence[int] = LENGTH_EDGES, rel_threshold: int = 1
                         ) -> pd.DataFrame:
    """Fig. 6: the mean per-query ``measure`` of each run (label -> {dataset, system}) over the
    queries whose positive document length falls in each bucket (``positive_lengths``; buckets
    from ``edges``, ``bucket_labels``). Every run must have values for the same queries."""
    if list(edges) != sorted(set(edges)) or not edges or edges[0] <= 0:
        raise StudyError(f"Fig. 6: bucket edges must be increasing positive integers, got {list(edges)}")
    metrics = read_metrics(metric_csvs)
    values = {label: per_query_values(metric_rows(metrics, run["dataset"], run["system"], split), measure)
              for label, run in runs.items()}
    if not values:
        raise StudyError("Fig. 6: no runs given")
    first, queries = next(iter(values)), set(next(iter(values.values())))
    for label, found in values.items():
        if set(found) != queries:
            only = sorted(set(found) ^ queries)[:5]
            raise StudyError(f"Fig. 6: {label} and {first} have {measure} values for different queries "
                             f"(e.g. {', '.join(only)})")
    positives = positive_lengths(read_qrels(qrels_path), lengths, rel_threshold)
    qids = sorted(q for q in queries if q in positives)
    if not qids:
        raise StudyError(f"{qrels_path}: none of the evaluated queries has a relevant document")
    labels = bucket_labels(edges)
    bucket = {q: labels[int(np.searchsorted(edges, positives[q], side="right"))] for q in qids}
    records = []
    for name in labels:
        members = [q for q in qids if bucket[q] == name]
        record: dict[str, Any] = {"bucket": name, "queries": len(members)}
        record.update({label: float(np.mean([found[q] for q in members])) if members else np.nan
                       for label, found in values.items()})
        records.append(record)
    table = pd.DataFrame.from_records(records)
    with atomic_open(f"{out_prefix}.csv") as out:
        table.to_csv(out, index=False)
    figure, axis = plt.subplots(figsize=(6, 3.5), layout="constrained")
    width = 0.8 / len(values)
    for i, label in enumerate(values):
        axis.bar(np.arange(len(table)) + (i - (len(values) - 1) / 2) * width, table[label], width, label=label)
    axis.set_xticks(range(len(table)), [f"{b}\n(n={n})" for b, n in zip(table["bucket"], table["queries"])])
    axis.set_xlabel("length of the positive document (tokens)")
    axis.set_ylabel(f"{measure} ({split})")
    axis.legend(fontsize="small")
    save_figure(figure, out_prefix)
    return table


# ---------------------------------------------------------------- the document of Figs. 4 and 5


@dataclasses.dataclass
class GraphDocument:
    """One judged (query, document) pair, as the graph code takes it."""

    qid: str
    docid: str
    query: Tensor  # int64 WordPiece ids of the query
    tokens: Tensor  # int64 ids of the document's first ``length`` tokens
    full_length: int  # the document's length in the store
    idf: Tensor  # float32, indexed by token id (collection IDF)
    centrality: Tensor | None  # dynamic centrality weights of ``tokens``; None: pattern left out


def choose_document(qrels: Qrels, collection: TokenStore, queries: TokenStore, length: int,
                    rel_threshold: int = 1) -> tuple[str, str]:
    """A relevant (qid, docid) pair, deterministically: documents whose first ``length`` tokens
    hold a query token first (so dynamic distance has something to measure), then those with at
    least ``length`` tokens, the shortest of them (the least cut off); else the longest; ties by
    ids. Only queries of the query store count."""
    best, best_key = None, None
    known = set(queries.ids)
    for qid, judged in sorted(qrels.items()):
        if qid not in known:
            continue
        query = queries.tokens(qid)
        for docid, grade in sorted(judged.items()):
            if grade < rel_threshold:
                continue
            try:
                tokens = collection.tokens(docid)
            except KeyError as error:
                raise StudyError(str(error)) from None
            size = len(tokens)
            key = (not bool(np.isin(tokens[:length], query).any()), size < length,
                   size if size >= length else -size, qid, docid)
            if best_key is None or key < best_key:
                best, best_key = (qid, docid), key
    if best is None:
        raise StudyError(f"no relevant document (grade >= {rel_threshold}) of a query in {queries.path}")
    return best


def encoder_centrality(model, query: Tensor, tokens: Tensor) -> Tensor:
    """Pattern (4) of one document as the model computes it: ``model.dynamic_centrality_batch``
    on the frozen pre-trained encoder (``model``: a ``SocialformerConfig``)."""
    from rankstudy.models.socialformer.model import dynamic_centrality_batch
    from rankstudy.nn.pretrained import load_encoder, load_tokenizer, special_ids

    encoder = load_encoder(model.encoder, model.centrality_layers, attn_implementation="eager").eval()
    cls_id, sep_id = special_ids(load_tokenizer(model.encoder), model.encoder)
    graph = model.graph
    return dynamic_centrality_batch(encoder, cls_id, sep_id, [query], [tokens], graph.top_k,
                                    floor=graph.centrality_floor, normalisation=graph.normalisation,
                                    max_length=model.max_length)[0]


def figure_document(collection_path, queries_path, qrels_path, spec: Mapping[str, Any]
                    ) -> tuple[SocialGraphConfig, GraphDocument]:
    """The graph settings and the document of Fig. 4 or 5. ``spec``: model (the Socialformer
    model's settings, ``SocialformerConfig`` keys: its graph, encoder, centrality_layers,
    max_length), length, rel_threshold, optional qid and docid (both: that pair instead of
    ``choose_document``), dynamic_centrality (default true; false: no encoder, the pattern is
    left out)."""
    from rankstudy.models.socialformer.model import SocialformerConfig
    from rankstudy.store import collection_idf

    model = from_dict(SocialformerConfig, spec.get("model", {}), "socialformer model")
    collection, queries = TokenStore(collection_path), TokenStore(queries_path)
    length = int(spec["length"])
    if ("qid" in spec) != ("docid" in spec):
        raise StudyError("name both qid and docid of the figure's document, or neither")
    if "qid" in spec:
        qid, docid = str(spec["qid"]), str(spec["docid"])
    else:
        qid, docid = choose_document(read_qrels(qrels_path), collection, queries, length,
                                     spec.get("rel_threshold", 1))
    try:
        query = torch.from_numpy(np.asarray(queries.tokens(qid), dtype=np.int64))
        full = np.asarray(collection.tokens(docid), dtype=np.int64)
    except KeyError as error:
        raise StudyError(str(error)) from None
    tokens = torch.from_numpy(full[:length].copy())
    idf = torch.from_numpy(collection_idf(collection))
    centrality = encoder_centrality(model, query, tokens) if spec.get("dynamic_centrality", True) else None
    log.info("figure document: query %s, document %s (%d of %d tokens)", qid, docid, len(tokens), len(full))
    return model.graph, GraphDocument(qid, docid, query, tokens, len(full), idf, centrality)


def _available(document: GraphDocument, weights: Mapping[str, float]) -> dict[str, float]:
    """``weights`` without dynamic centrality when the document has none (no encoder)."""
    kept = {name: w for name, w in weights.items() if w > 0 and (name != "dynamic_centrality" or
                                                                  document.centrality is not None)}
    if not kept:
        raise StudyError(f"graph weights {dict(weights)} need the dynamic centrality pattern, which was left out")
    return kept


def _graph(document: GraphDocument, graph: SocialGraphConfig, weights: Mapping[str, float], sparsity: float):
    config = dataclasses.replace(graph, weights=dict(weights), sparsity=sparsity)
    return build_social_graph(config, document.tokens, query_ids=document.query, idf=document.idf,
                              dynamic_centrality=document.centrality, generator=make_generator(graph.seed))


def _density(adjacency: Tensor) -> tuple[int, float]:
    n = adjacency.shape[0]
    edges = int(adjacency.sum()) // 2
    return edges, edges / max(1, n * (n - 1) // 2)


# ---------------------------------------------------------------- Fig. 4


def adjacency_figure(document: GraphDocument, graph: SocialGraphConfig, out_prefix, sparsity: float = 0.9
                     ) -> pd.DataFrame:
    """Fig. 4: one panel per pattern alone (weight 1), then the combined one (the model's weights),
    each graph sampled at ``sparsity`` with the same seed. PREFIX.csv: per panel the realised and
    expected density; PREFIX.edges.csv: the edges (panel, i, j), i < j."""
    panels = {name: {pattern: 1.0} for name, pattern in PANELS.items()
              if pattern != "dynamic_centrality" or document.centrality is not None}
    panels["combined"] = _available(document, graph.active)
    n = document.tokens.numel()
    occurrences = int(torch.isin(document.tokens, document.query).sum())
    records, edge_frames, images = [], [], {}
    for name, weights in panels.items():
        social = _graph(document, graph, weights, sparsity)
        adjacency = social.adjacency
        edges, density = _density(adjacency)
        records.append({"panel": name, "patterns": " + ".join(f"{w:g} {p}" for p, w in weights.items()),
                        "qid": document.qid, "docid": document.docid, "document length": document.full_length,
                        "tokens": n, "query term occurrences": occurrences, "sparsity": sparsity, "edges": edges,
                        "density": density, "expected density": social.expected_density})
        i, j = torch.triu(adjacency, diagonal=1).nonzero(as_tuple=True)
        edge_frames.append(pd.DataFrame({"panel": name, "i": i.numpy(), "j": j.numpy()}))
        images[name] = adjacency.numpy()
    summary = pd.DataFrame.from_records(records)
    with atomic_open(f"{out_prefix}.csv") as out:
        summary.to_csv(out, index=False)
    with atomic_open(f"{out_prefix}.edges.csv") as out:
        pd.concat(edge_frames, ignore_index=True).to_csv(out, index=False)
    figure, axes = plt.subplots(1, len(images), figsize=(2.6 * len(images), 3.0), layout="constrained",
                                squeeze=False)
    for axis, (name, image), record in zip(axes[0], images.items(), records):
        axis.imshow(image, cmap="Greys", interpolation="nearest", vmin=0, vmax=1)
        axis.set_title(f"{name}\ndensity {record['density']:.3f}", fontsize="small")
        axis.set_xlabel("token position")
    axes[0][0].set_ylabel("token position")
    figure.suptitle(f"query {document.qid}, document {document.docid} ({n} tokens), sparsity {sparsity:g}",
                    fontsize="small")
    save_figure(figure, out_prefix)
    return summary


# ---------------------------------------------------------------- Fig. 5


def circle_size_figure(document: GraphDocument, graph: SocialGraphConfig, out_prefix,
                       sparsities: Sequence[float] = SPARSITIES, max_circles: int = 32,
                       partitions: Sequence[str] = ("node", "edge")) -> pd.DataFrame:
    """Fig. 5: per sparsity one graph (the model's weights and seed); each partition of it into up
    to ``max_circles`` circles of at most ``graph.max_nodes`` nodes; circle sizes largest first,
    0 where the partition stopped early (no edge left). PREFIX.csv: partition, sparsity, circle
    (rank, 1-based), nodes, density (realised, of the sampled graph)."""
    weights = _available(document, graph.active)
    records = []
    for sparsity in sparsities:
        adjacency = _graph(document, graph, weights, sparsity).adjacency
        _, density = _density(adjacency)
        for mode in partitions:
            circles = partition_graph(adjacency, graph.max_nodes, max_circles, mode).circles
            sizes = sorted((int(circle.numel()) for circle in circles), reverse=True)
            sizes += [0] * (max_circles - len(sizes))
            records += [{"partition": mode, "sparsity": sparsity, "circle": rank, "nodes": size, "density": density}
                        for rank, size in enumerate(sizes, 1)]
    table = pd.DataFrame.from_records(records)
    with atomic_open(f"{out_prefix}.csv") as out:
        table.to_csv(out, index=False)
    figure, axes = plt.subplots(1, len(partitions), figsize=(4.5 * len(partitions), 3.5), layout="constrained",
                                sharey=True, squeeze=False)
    for axis, mode in zip(axes[0], partitions):
        for sparsity, part in table[table["partition"] == mode].groupby("sparsity", sort=False):
            axis.plot(part["circle"], part["nodes"], marker=".", label=f"sparsity {sparsity:g}")
        axis.set_title(f"{mode}-level partition", fontsize="small")
        axis.set_xlabel("circle (largest first)")
    axes[0][0].set_ylabel("nodes in the circle")
    axes[0][-1].legend(fontsize="small")
    figure.suptitle(f"query {document.qid}, document {document.docid} ({document.tokens.numel()} tokens)",
                    fontsize="small")
    save_figure(figure, out_prefix)
    return table
