"""Subcommands: the TKL paper's tables and figures, and where TKL's regions fall (Fig. 3)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rankstudy.report.columns import REGIONS_AFTER
from rankstudy.subcommands import scoring_arguments, subcommand


def _regions(args: argparse.Namespace) -> None:
    from rankstudy.experiment import write_regions

    write_regions(Path(args.model_dir), Path(args.embeddings), Path(args.queries), Path(args.documents),
                  Path(args.run), Path(args.out), args.depth, args.batch_size, args.device, args.threads)


@subcommand("regions", "TKL's top regions in the top documents of a run (CSV)")
def _regions_arguments(p: argparse.ArgumentParser) -> None:
    scoring_arguments(p, batch_size=32)
    p.add_argument("--run", required=True, help="the model's own run (its top documents are analysed)")
    p.add_argument("--out", required=True, help="CSV")
    p.add_argument("--depth", type=int, default=30)
    p.set_defaults(handler=_regions)


def _tkl_report(args: argparse.Namespace) -> None:
    from rankstudy.papers.tkl import report

    spec, out = json.loads(args.spec), Path(args.out_prefix)
    if args.what == "table":
        report.system_table(args.metrics, spec["rows"], spec["splits"], out, spec["caption"],
                             efficiency_csv=args.efficiency)
    elif args.what == "evidence":
        report.evidence_table(spec["runs"], args.qrels, args.truth, out, spec["caption"], spec["boundary"],
                               spec["top"], spec["rel_threshold"])
    elif args.what == "fig1":
        from rankstudy.store import TokenStore

        store = TokenStore(args.store)
        lengths = dict(zip(store.ids, store.lengths(store.ids).tolist()))
        report.length_figure(spec["runs"], args.qrels, lengths, out, spec["top"], rel_threshold=spec["rel_threshold"])
    elif args.what == "fig2":
        report.max_length_figure(args.metrics, spec["points"], out)
    else:
        report.region_figure(args.regions, out)
        if args.table_prefix:
            report.region_shares(args.regions, Path(args.table_prefix), args.after)


@subcommand("tkl-report", "the TKL paper's tables and figures")
def _tkl_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["table", "evidence", "fig1", "fig2", "fig3"])
    p.add_argument("--spec", default="{}", help="JSON: rows/splits/caption (table), runs/top/boundary (evidence, fig1), points (fig2)")
    p.add_argument("--metrics", nargs="*", default=[], help="metric CSVs (table, fig2)")
    p.add_argument("--efficiency", help="efficiency CSV: adds a docs/ms column (table)")
    p.add_argument("--qrels", help="test qrels (evidence, fig1)")
    p.add_argument("--truth", help="synthetic truth.json (evidence)")
    p.add_argument("--store", help="token store of the collection: document lengths (fig1)")
    p.add_argument("--regions", help="regions CSV (fig3)")
    p.add_argument("--table-prefix", help="fig3: also the table of the regions' shares after word --after")
    p.add_argument("--after", type=int, default=REGIONS_AFTER,
                   help="fig3's table: the word position (default: the paper's)")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_tkl_report)
