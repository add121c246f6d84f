"""Subcommands: the learning audit, the claims scoreboard, the expected-results check, the reproduction report, the
study's time."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from rankstudy.errors import StudyError
from rankstudy.subcommands import subcommand

log = logging.getLogger("rankstudy")


def _learning_audit(args: argparse.Namespace) -> None:
    from rankstudy.report.learning import learning_audit

    try:
        entries = json.loads(args.spec)
    except ValueError as error:
        raise StudyError(f"--spec: expected a JSON list of audit entries ({error})") from None
    table = learning_audit(entries, args.measure, Path(args.out_prefix))
    log.info("learning audit: %d runs x seeds, %d flagged", len(table), int((table["flags"] != "").sum()))


@subcommand("learning-audit", "every trained run's learning curve summary and its test measure against the first stage")
def _learning_audit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, help="JSON list of entries (StudyPlan.learning_audit)")
    p.add_argument("--measure", default="nDCG@10")
    p.add_argument("--out-prefix", required=True)
    p.set_defaults(handler=_learning_audit)


def _claims(args: argparse.Namespace) -> None:
    from rankstudy.report.claims import scoreboard, write_scoreboard

    try:
        claims = json.loads(args.spec)["claims"]
    except (ValueError, KeyError, TypeError) as error:
        raise StudyError(f"--spec: expected JSON {{\"claims\": [...]}} ({error})") from None
    table = scoreboard(claims)
    write_scoreboard(table, Path(args.out_prefix))
    log.info("claims: %s", ", ".join(f"{n} {o}" for o, n in table["outcome"].value_counts().items()))


@subcommand("claims", "the claims scoreboard: each paper's claims tested on per-query values")
def _claims_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", required=True, help='JSON {"claims": [...]}: the claims resolved by the workflow (rule claims)')
    p.add_argument("--out-prefix", required=True, help="writes PREFIX.csv and PREFIX.md")
    p.set_defaults(handler=_claims)


def _check_expected(args: argparse.Namespace) -> None:
    from rankstudy import expected

    tables = args.tables or expected.tables_in(args.tables_dir, args.expected)
    if args.update:
        count = expected.update(args.expected, tables)
        print(f"wrote {count} expected cells of {len(tables)} tables to {args.expected}")
        return
    summary, drifts = expected.check(args.expected, tables, missing_ok=args.missing_ok)
    for line in drifts:
        print(line)
    print(summary)
    if args.out:
        from rankstudy.atomic import atomic_open

        with atomic_open(args.out) as out:
            out.write("".join(f"{line}\n" for line in drifts) + f"{summary}\n")
    if expected.fatal(args.expected, drifts):
        raise StudyError(f"{summary} (listed above)")


@subcommand("check-expected", "compare a finished run's table cells with the expected file")
def _check_expected_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expected", required=True, help="the expected file (YAML; docs/claims.md)")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--tables", nargs="+", help="the run's table CSVs (results/tables/NAME.csv)")
    given.add_argument("--tables-dir", help="the run's table folder: the tables the expected file pins (a new file: "
                       "every known table there)")
    p.add_argument("--update", action="store_true", help="rewrite the expected file from these tables")
    p.add_argument("--missing-ok", action="store_true", help="a missing expected file is reported, not an error")
    p.add_argument("--out", help="also write the drifted cells and the summary to this file")
    p.set_defaults(handler=_check_expected)


def _reproduction(args: argparse.Namespace) -> None:
    import pandas as pd

    from rankstudy.report.replicability import seed_agreement
    from rankstudy.report.reproduction import (EFFECT_COLUMNS, claim_directions, claim_effects, reproduction,
                                               write_reproduction)

    comparable = not args.not_comparable
    table = reproduction(args.reported, args.tables_dir, comparable)
    directions = claim_directions(args.claims) if args.claims else None
    effects = claim_effects(args.claims) if args.claims else pd.DataFrame(columns=EFFECT_COLUMNS)
    try:
        groups = json.loads(args.seeds)
    except ValueError as error:
        raise StudyError(f"--seeds: expected a JSON list of seed groups ({error})") from None
    seeds = seed_agreement(groups)
    write_reproduction(table, Path(args.out_prefix), comparable, directions, effects, seeds)
    log.info("reproduction: %s", ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
             if comparable else "this config's data is not comparable with the papers'")


@subcommand("reproduction", "the papers' reported table cells beside this run's")
def _reproduction_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reported", nargs="*", default=[], help="reported-cells files (config/paper/reported/*.yaml)")
    p.add_argument("--tables-dir", default="results/tables", help="the run's table folder (results/tables/NAME.csv)")
    p.add_argument("--claims", help="the claims scoreboard (results/claims.csv): lists the paper claims' directions "
                   "and the effect sizes beside the paper's (PREFIX_effects.csv)")
    p.add_argument("--seeds", default="[]", help="JSON list of the runs trained with several seeds "
                   "(StudyPlan.seed_groups): how closely the seeds agree, topic by topic (PREFIX_seeds.csv)")
    p.add_argument("--not-comparable", action="store_true",
                   help="this config's data is not the papers' (the synthetic default): say so, compare nothing")
    p.add_argument("--out-prefix", required=True,
                   help="writes PREFIX.csv, PREFIX.md, PREFIX_effects.csv and PREFIX_seeds.csv")
    p.set_defaults(handler=_reproduction)


def _study_time(args: argparse.Namespace) -> None:
    from rankstudy.atomic import atomic_open
    from rankstudy.report.study_time import study_time_report

    try:
        config = json.loads(Path(args.config_json).read_text())
    except (OSError, ValueError) as error:
        raise StudyError(f"--config-json {args.config_json}: expected the run's config as JSON ({error})") from None
    if args.reference_from:
        import yaml

        from rankstudy.report.study_time import reference_entry

        print(yaml.safe_dump({"study_time": reference_entry(config, Path(args.reference_from), args.host)},
                             sort_keys=False), end="")
        return
    report = study_time_report(config, Path(args.benchmarks), Path(args.efficiency) if args.efficiency else None,
                               Path(args.log) if args.log else None, args.cores, Path(args.models) if args.models else None)
    if args.out:
        with atomic_open(args.out) as handle:
            handle.write(report)
    print(report, end="")


@subcommand("study-time", "the study's job-minutes (its Snakemake benchmark files) per paper and stage, against its goal")
def _study_time_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config-json", required=True, help="the run's config (validated, defaults filled) as JSON")
    p.add_argument("--benchmarks", default="benchmarks", help="the run's Snakemake benchmark folder")
    p.add_argument("--efficiency", help="the run's results/efficiency.csv: this host's speed against study_time.reference")
    p.add_argument("--log", help="a run's .snakemake/log/*.snakemake.log: elapsed time, idle cores, critical path")
    p.add_argument("--cores", type=int, default=2, help="the cores that run gave Snakemake")
    p.add_argument("--models", help="the run's models/ folder: training time after the best validation")
    p.add_argument("--out", help="also write the report here")
    p.add_argument("--reference-from", help="instead: print the study_time keys that make this results/efficiency.csv "
                   "the reference speeds (paste them into the config)")
    p.add_argument("--host", default="", help="with --reference-from: the host it was measured on")
    p.set_defaults(handler=_study_time)


def _readme_table(args: argparse.Namespace) -> None:
    from rankstudy.report.readme_table import write_readme_table

    current = write_readme_table(Path(args.spec), Path(args.readme), Path(args.root), check=args.check)
    if args.check and not current:
        raise StudyError(f"{args.readme}: its headline claims table is not what {args.spec} and the pinned "
                         f"scoreboards give; run python -m rankstudy readme-table")
    print(f"{args.readme}: headline claims table {'current' if current else 'rewritten'}")


@subcommand("readme-table", "the README's table of each paper's central claims, from the pinned scoreboards")
def _readme_table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", default="docs/headline-claims.yaml", help="the rows: claims, studies, the papers' cells")
    p.add_argument("--readme", default="README.md")
    p.add_argument("--root", default=".", help="the repository: the spec's paths are relative to it")
    p.add_argument("--check", action="store_true", help="change nothing; fail if the README's table differs")
    p.set_defaults(handler=_readme_table)
