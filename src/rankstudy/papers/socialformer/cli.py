"""Subcommands: the Socialformer paper's tables and figures."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from rankstudy.subcommands import subcommand

log = logging.getLogger("rankstudy")


def _socialformer_report(args: argparse.Namespace) -> None:
    from rankstudy.papers.socialformer import report as socialformer

    spec, out = json.loads(args.spec), Path(args.out_prefix)
    if args.what == "curves":
        from rankstudy.report.curves import learning_curves

        learning_curves(dict(zip(spec["labels"], args.logs, strict=True)), out, spec["metric"])
    elif args.what in ("table1", "table2"):
        build = socialformer.table1 if args.what == "table1" else socialformer.table2
        build(args.metrics, spec["rows"], out, spec["caption"], spec["columns"], spec.get("test", "wilcoxon"))
    elif args.what == "fig6":
        from rankstudy.store import TokenStore

        store = TokenStore(args.collection)
        lengths = dict(zip(store.ids, store.lengths(store.ids).tolist()))
        runs = {run["label"]: run for run in spec["runs"]}  # a list: JSON keeps its order
        socialformer.length_bucket_figure(args.metrics, runs, args.qrels, lengths, out, spec["measure"],
                                          spec["split"], spec["edges"], spec["rel_threshold"])
    else:
        import torch

        torch.set_num_threads(args.threads)
        graph, document = socialformer.figure_document(args.collection, args.queries, args.qrels, spec)
        if args.what == "fig4":
            socialformer.adjacency_figure(document, graph, out, spec["sparsity"])
        else:
            socialformer.circle_size_figure(document, graph, out, spec["sparsities"], spec["max_circles"],
                                            spec["partitions"])


@subcommand("socialformer-report", "the Socialformer paper's tables and figures")
def _socialformer_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["table1", "table2", "fig4", "fig5", "fig6", "curves"])
    p.add_argument("--spec", default="{}", help="JSON: rows/columns/caption (tables); runs [{label, dataset, "
                   "system}]/measure/split/edges/rel_threshold (fig6); model/length/sparsity or sparsities/... (fig4, fig5)")
    p.add_argument("--metrics", nargs="*", default=[], help="metric CSVs (tables, fig6)")
    p.add_argument("--qrels", help="qrels: the positive documents (fig6), the figure's document (fig4, fig5)")
    p.add_argument("--collection", help="WordPiece token store of the collection (fig4-6)")
    p.add_argument("--queries", help="WordPiece token store of the queries (fig4, fig5)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (fig4, fig5)")
    p.add_argument("--logs", nargs="*", default=[], help="runs' log.csv files, one per spec label (curves)")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_socialformer_report)
