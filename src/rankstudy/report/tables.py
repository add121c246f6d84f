"""The study's tables, each written as ``PREFIX.csv`` (full precision), ``PREFIX.md`` and ``PREFIX.tex``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.report.columns import speed_column
from rankstudy.evaluate import ALL, read_metrics
from rankstudy.significance import row_letters, significance_letters

SPLIT_ORDER = ("train", "dev", "test")  # other splits follow, alphabetically
FIRST_STAGE_CAPTION = (
    "First-stage retrieval (Anserini): mean over queries; "
    "binary measures use the configured relevance threshold."
)
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


def _formatted(df: pd.DataFrame, float_format: str) -> pd.DataFrame:
    """All cells as display strings: floats via ``float_format``, missing values empty."""

    def cell(value: object) -> str:
        if pd.isna(value):
            return ""
        return float_format.format(value) if isinstance(value, float) else str(value)

    return df.apply(lambda column: column.map(cell)).astype(str)


def write_table(df: pd.DataFrame, out_prefix: str | os.PathLike, caption: str, float_format: str = "{:.4f}") -> None:
    """Write ``df`` (its columns, not its index) as PREFIX.csv, PREFIX.md and PREFIX.tex, atomically.

    The CSV keeps full precision; Markdown and LaTeX show floats with ``float_format``,
    right-align numeric columns, and carry ``caption`` (plain text, escaped for LaTeX;
    LaTeX label: the prefix's name).
    """
    prefix = Path(out_prefix)
    numeric = [pd.api.types.is_numeric_dtype(df[column]) for column in df.columns]
    shown = _formatted(df, float_format)

    with atomic_open(prefix.parent / f"{prefix.name}.csv") as out:
        df.to_csv(out, index=False)

    markdown = shown.to_markdown(
        index=False, disable_numparse=True, colalign=["right" if n else "left" for n in numeric]
    )
    with atomic_open(prefix.parent / f"{prefix.name}.md") as out:
        out.write(f"{caption}\n\n{markdown}\n")

    latex = shown.to_latex(
        index=False,
        escape=True,
        caption=_latex_escape(caption),
        label=prefix.name,
        column_format="".join("r" if n else "l" for n in numeric),
    )
    with atomic_open(prefix.parent / f"{prefix.name}.tex") as out:
        out.write(latex)


def metric_rows(metrics: pd.DataFrame, dataset: str, system: str, split: str) -> pd.DataFrame:
    """The long-format metric rows of one system on one split of a dataset (an error if none)."""
    rows = metrics[(metrics["dataset"] == dataset) & (metrics["system"] == system) & (metrics["split"] == split)]
    if rows.empty:
        raise StudyError(f"no metrics for {dataset}/{system}/{split}")
    return rows


def mean_value(rows: pd.DataFrame, measure: str) -> float:
    value = rows[(rows["qid"] == ALL) & (rows["measure"] == measure)]["value"]
    if value.empty:
        raise StudyError(f"no mean {measure} for {rows['system'].iloc[0]}")
    return float(value.iloc[0])


def per_query_values(rows: pd.DataFrame, measure: str) -> dict[str, float]:
    chosen = rows[(rows["qid"] != ALL) & (rows["measure"] == measure)]
    return dict(zip(chosen["qid"], chosen["value"]))


def data_counts(data_dirs: Sequence[str | os.PathLike]) -> str:
    """What the datasets hold, counted from their files (data/NAME: collection.tsv, queries.SPLIT.tsv,
    qrels.SPLIT.txt), for a caption: true of whatever folder a config points at."""
    from rankstudy.formats import _count_lines, read_qrels, read_queries

    parts = []
    for data_dir in map(Path, data_dirs):
        documents = _count_lines(data_dir / "collection.tsv")  # written by the dataset rule: one document a line
        splits = []
        names = (path.stem.removeprefix("queries.") for path in data_dir.glob("queries.*.tsv"))
        for split in sorted(names, key=lambda name: (_split_rank(name), name)):  # train, dev, test, then the rest
            queries = read_queries(data_dir / f"queries.{split}.tsv")
            qrels = read_qrels(data_dir / f"qrels.{split}.txt")
            judged = sum(1 for qid in queries if qid in qrels)
            unjudged = f" ({judged:,} judged)" if judged != len(queries) else ""
            splits.append(f"{len(queries):,} {split} queries{unjudged}")
        parts.append(f"{data_dir.name}: {', '.join(splits)}, {documents:,} documents")
    return "; ".join(parts)


def docs_per_ms(efficiency_csv) -> tuple[str, dict[str, float]]:
    """(column name, model key -> documents/ms) from the efficiency benchmark: on the GPU when it measured one
    (a paper config's cluster job), else on the CPU; the column name says which."""
    table = pd.read_csv(efficiency_csv)
    device = "cuda" if (table["device"] == "cuda").any() else "cpu"
    rows = table[table["device"] == device]
    return speed_column(device), dict(zip(rows["model"], rows["docs_per_ms"]))


def system_frame(metrics: pd.DataFrame, rows: Sequence[Mapping[str, Any]],
                 columns: Sequence[tuple[str, str]], test: str = "wilcoxon") -> pd.DataFrame:
    """Rows a, b, c, ... (``rows``: dicts with label, dataset, system) by (split, measure)
    ``columns``: each gets a mean column ``"{split} {measure}"`` and a ``sig`` column, the letters
    of the rows this one is significantly better than (paired ``test``, p < 0.05, per query)."""
    table = pd.DataFrame({"": row_letters(len(rows)), "system": [row["label"] for row in rows]})
    for split, measure in columns:
        found = [metric_rows(metrics, row["dataset"], row["system"], split) for row in rows]
        table[f"{split} {measure}"] = [mean_value(part, measure) for part in found]
        table[f"{split} {measure} sig"] = significance_letters([per_query_values(part, measure) for part in found],
                                                               test=test)
    return table


def _split_rank(split: str) -> int:
    return SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER)


def first_stage_table(metric_csvs: Sequence[str | os.PathLike], measures: Sequence[str], out_prefix: str | os.PathLike) -> pd.DataFrame:
    """One row per (dataset, split, system), one column per measure (mean over queries)."""
    if not metric_csvs:
        raise StudyError("first-stage table: no metric CSVs given")
    if not measures:
        raise StudyError("first-stage table: no measures given")
    keys = ["dataset", "split", "system"]
    frames = []
    for path in metric_csvs:
        means = read_metrics([path])
        means = means[(means["qid"] == ALL) & means["measure"].isin(measures)]
        missing = [m for m in measures if m not in set(means["measure"])]
        if missing:
            raise StudyError(f"{path}: no mean ({ALL!r} row) for measure(s) {', '.join(missing)}")
        frames.append(means.assign(source=str(path)))
    means = pd.concat(frames, ignore_index=True)

    repeated = means[means.duplicated(keys + ["measure"], keep=False)]
    if not repeated.empty:
        row = repeated.iloc[0]
        sources = ", ".join(sorted(set(repeated["source"])))
        raise StudyError(f"{row['dataset']}/{row['split']}/{row['system']} {row['measure']} appears more than once in {sources}")

    table = means.pivot(index=keys, columns="measure", values="value")[list(measures)].reset_index()
    table.columns.name = None
    table = (
        table.assign(_rank=table["split"].map(_split_rank))
        .sort_values(["dataset", "_rank", "split", "system"])
        .drop(columns="_rank")
        .reset_index(drop=True)
    )
    write_table(table, out_prefix, FIRST_STAGE_CAPTION)
    return table
