"""One ranked-list-truncation study (Choppy paper, Table 1): a run + qrels in, every method out.

Queries are split once, seeded: ``test_fraction`` of them for test, ``dev_fraction`` carved from
the rest for model selection (never the test part), the remainder for training; or the split comes
from query-id files. For each metric (F1, penalised DCG) the methods are: Oracle (best cut per
test query), Fixed-k (each configured k), Greedy-k (best k on train, applied to test), BiCut (F1
only, as the paper) and Choppy. Results: mean and per-query test values, Choppy's distribution
for three training queries (Fig. 1), and the settings every model was trained with (for the table's
caption). The d x heads grid of Fig. 2 is a separate study (``run_grid``) on the same split.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from rankstudy import formats
from rankstudy.atomic import atomic_open
from rankstudy.config import check_ints, from_dict
from rankstudy.errors import StudyError
from rankstudy.models.choppy import ChoppyConfig
from rankstudy.truncation.baselines import evaluate_cuts, greedy_k, oracle
from rankstudy.truncation.bicut import BiCutConfig, predict_cuts, train_bicut
from rankstudy.truncation.choppy_train import predict, train_choppy
from rankstudy.truncation.methods import BICUT, CHOPPY, F1, METRICS, ORACLE, fixed, greedy
from rankstudy.truncation.repeats import read_study
from rankstudy.truncation.tables import build_labels, build_tables

log = logging.getLogger(__name__)


@dataclass
class TruncationConfig:
    n: int  # the lists' top n: choppy.n, whose default (the paper's 300) is the schema's
    rel_threshold: int = 1
    recall_base: str = "qrels"
    test_fraction: float = 0.2
    dev_fraction: float = 0.1  # 0: no dev set (the Choppy paper's 80/20 protocol: no model selection)
    fixed_k: list[int] = field(default_factory=lambda: [5, 10, 50])
    model: dict = field(default_factory=dict)  # Choppy's own settings (ChoppyConfig)
    model_by_metric: dict = field(default_factory=dict)  # {metric: settings over ``model`` for that metric's Choppy}
    bicut: dict = field(default_factory=dict)
    bicut_alphas: list[float] = field(default_factory=list)  # tuned on dev when given
    grid_d: list[int] = field(default_factory=list)
    grid_heads: list[int] = field(default_factory=list)
    device: str = "auto"
    repeats: int = 1  # splits (or, with query-id files, training seeds) of the study, pooled (truncation.repeats)

    def __post_init__(self) -> None:
        check_ints(self, "repeats")
        fractions = self.test_fraction + self.dev_fraction
        if not (0 < self.test_fraction < 1 and 0 <= self.dev_fraction < 1 and fractions < 1):
            raise ValueError("test_fraction must be in (0, 1), dev_fraction in [0, 1), and they must sum below 1")
        if self.n < 1 or any(k < 1 for k in self.fixed_k):
            raise ValueError("n and every fixed k must be positive")
        unknown = set(self.model_by_metric) - set(METRICS)
        if unknown:
            raise ValueError(f"model_by_metric: unknown metric(s) {sorted(unknown)}; expected {', '.join(METRICS)}")


def split_queries(qids: Sequence[str], cfg: TruncationConfig, seed: int,
                  given: Mapping[str, Sequence[str]] | None = None) -> dict[str, np.ndarray]:
    """Indices of the train/dev/test queries: from ``given`` qid lists (train and test; dev optional), else a
    seeded split."""
    position = {qid: i for i, qid in enumerate(qids)}
    if given:
        missing = {part: [q for q in ids if q not in position] for part, ids in given.items()}
        if any(missing.values()):
            raise StudyError(f"query-id lists name queries without results or judgments: {missing}")
        if not given.get("train") or not given.get("test"):
            raise StudyError("query-id lists: give a train and a test list (a dev list is optional)")
        return {"dev": np.zeros(0, dtype=int),
                **{part: np.array([position[q] for q in ids], dtype=int) for part, ids in given.items()}}
    order = np.random.default_rng(seed).permutation(len(qids))
    n_test = max(1, round(cfg.test_fraction * len(qids)))
    # dev_fraction 0: no dev set (an empty index); the models then train every epoch and keep the last
    n_dev = max(1, round(cfg.dev_fraction * len(qids))) if cfg.dev_fraction > 0 else 0
    if len(qids) - n_test - n_dev < 1:
        raise StudyError(f"{len(qids)} queries are too few to split into train, dev and test")
    return {"test": np.sort(order[:n_test]), "dev": np.sort(order[n_test:n_test + n_dev]),
            "train": np.sort(order[n_test + n_dev:])}


def _part(arrays: Sequence[np.ndarray], index: np.ndarray) -> tuple:
    return tuple(array[index] for array in arrays)


def _bicut_cuts(run, qrels, qids, split, train, dev, test, cfg: TruncationConfig,
                seed: int) -> tuple[np.ndarray, dict]:
    """BiCut's test cuts and settings; its cost weight alpha is chosen among ``bicut_alphas`` if given, on dev
    F1, or on the training lists' F1 without a dev set (never on the test queries)."""
    labels = build_labels(run, qrels, qids, cfg.n, cfg.rel_threshold)
    train_labels = (train[0], labels[split["train"]], train[2])
    best, best_settings, best_f1, f1_by_alpha = None, None, -np.inf, {}
    for alpha in cfg.bicut_alphas or [None]:
        settings = from_dict(BiCutConfig, cfg.bicut if alpha is None else {**cfg.bicut, "alpha": alpha},
                             "choppy.bicut")
        model = train_bicut(train_labels, dev, settings, seed, cfg.device)
        f1_by_alpha[settings.alpha] = (model.dev_f1 if dev is not None else
                                       float(evaluate_cuts(train[1], predict_cuts(model, train[0], train[2])).mean()))
        if f1_by_alpha[settings.alpha] > best_f1:
            best, best_settings, best_f1 = model, settings, f1_by_alpha[settings.alpha]
    return predict_cuts(best, test[0], test[2]), {**asdict(best_settings), "f1_by_alpha": f1_by_alpha,
                                                  "alpha_chosen_on": "train" if dev is None else "dev"}


def _rank_correlation(cuts: np.ndarray, oracle_cuts: np.ndarray) -> float:
    """Spearman's rho of a method's per-query cuts with the Oracle's (NaN when either is constant)."""
    if np.ptp(cuts) == 0 or np.ptp(oracle_cuts) == 0:
        return float("nan")
    return float(stats.spearmanr(cuts, oracle_cuts).statistic)


def _choppy_config(cfg: TruncationConfig, metric: str, **overrides) -> ChoppyConfig:
    """Choppy's settings for ``metric``: ``model``, then ``model_by_metric[metric]``, then ``overrides``."""
    return from_dict(ChoppyConfig, {**cfg.model, **cfg.model_by_metric.get(metric, {}), "max_length": cfg.n,
                                    **overrides}, "choppy.model")


def _splits(run, qrels, cfg: TruncationConfig, seed: int, given_split):
    """Per metric: (qids, split, train, dev, test) with train/dev/test = (scores, tables, lengths)."""
    split = None
    for metric in METRICS:
        qids, scores, tables, lengths = build_tables(run, qrels, cfg.n, metric, cfg.rel_threshold, cfg.recall_base)
        split = split or split_queries(qids, cfg, seed, given_split)
        train, dev, test = (_part((scores, tables, lengths), split.get(p, np.zeros(0, dtype=int)))
                            for p in ("train", "dev", "test"))
        yield metric, qids, split, train, (dev if len(dev[0]) else None), test


def run_study(run: formats.Run, qrels: formats.Qrels, cfg: TruncationConfig, seed: int,
              given_split: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """Every method on both metrics; returns tables of results (see ``write_study``)."""
    rows, per_query, fig1 = [], [], {}
    settings: dict[str, Any] = {"n": cfg.n, "rel_threshold": cfg.rel_threshold, "recall_base": cfg.recall_base}
    for metric, qids, split, train, dev, test in _splits(run, qrels, cfg, seed, given_split):
        test_qids = [qids[i] for i in split["test"]]
        cuts: dict[str, np.ndarray] = {}
        best_value, best_cut = oracle(test[1])
        cuts[ORACLE] = best_cut
        for k in cfg.fixed_k:
            cuts[fixed(k)] = np.full(len(test_qids), k)
        k = greedy_k(train[1])
        cuts[greedy(k)] = np.full(len(test_qids), k)
        if metric == F1:
            cuts[BICUT], settings["bicut"] = _bicut_cuts(run, qrels, qids, split, train, dev, test, cfg, seed)
        choppy_cfg = _choppy_config(cfg, metric)
        model, history = train_choppy(train, dev, choppy_cfg, seed, cfg.device)
        best_epoch = len(history) if dev is None else max(history, key=lambda h: h["dev_metric"])["epoch"]
        settings[f"choppy_{metric}"] = {**asdict(choppy_cfg), "epochs_run": len(history), "best_epoch": best_epoch,
                                        "train_loss": [h["train_loss"] for h in history]}  # the learning curve
        cuts[CHOPPY], _ = predict(model, test[0], test[2], cfg.device)
        _, probabilities = predict(model, train[0][:3], train[2][:3], cfg.device)
        fig1[metric] = {"qids": [qids[i] for i in split["train"][:3]], "tables": train[1][:3].tolist(),
                        "probabilities": probabilities.tolist(), "lengths": train[2][:3].tolist()}
        for method, method_cuts in cuts.items():
            values = evaluate_cuts(test[1], method_cuts)
            rows.append({"metric": metric, "method": method, "value": float(values.mean()),
                         "mean_cut": float(np.mean(method_cuts)), "cut_sd": float(np.std(method_cuts)),
                         "cut_rho_oracle": _rank_correlation(method_cuts, best_cut)})
            per_query += [{"metric": metric, "method": method, "qid": q, "value": float(v), "cut": int(c)}
                          for q, v, c in zip(test_qids, values, method_cuts)]
        log.info("%s: %s", metric, ", ".join(f"{r['method']} {r['value']:.4f}" for r in rows if r["metric"] == metric))
    settings["split"] = {part: int(len(index)) for part, index in split.items()}
    settings["split_from"] = "query-id files" if given_split else f"seed {seed}"
    settings["seed"] = seed  # of the split (unless from files) and of every model's training
    return {"results": pd.DataFrame(rows), "per_query": pd.DataFrame(per_query), "fig1": fig1,
            "settings": settings}


def studied_value(study: Mapping[str, Any] | None, metric: str, choppy_cfg: ChoppyConfig, split: Mapping[str, Any],
                  test_qids: Sequence[str], cfg: TruncationConfig, seed: int) -> float | None:
    """Choppy's test value for ``metric`` from ``study`` (``run_study``'s outputs on the same run) when it trained
    the very model a grid point would train — the same settings, seed, lists, split sizes and test queries (a
    seeded split of the same sizes has the same dev queries too) — else None."""
    if study is None:
        return None
    settings = study["settings"]
    trained = settings.get(f"choppy_{metric}", {})
    same = (settings.get("seed") == seed
            and settings.get("split") == {part: int(len(index)) for part, index in split.items()}
            and all(settings.get(key) == getattr(cfg, key) for key in ("n", "rel_threshold", "recall_base"))
            and all(trained.get(key) == value for key, value in asdict(choppy_cfg).items()))
    if not same:
        return None
    rows = study["per_query"]
    if rows[(rows["metric"] == metric) & (rows["method"] == CHOPPY)]["qid"].astype(str).tolist() != list(test_qids):
        return None
    results = study["results"]
    return float(results[(results["metric"] == metric) & (results["method"] == CHOPPY)]["value"].iloc[0])


def run_grid(run: formats.Run, qrels: formats.Qrels, cfg: TruncationConfig, seed: int,
             given_split: Mapping[str, Sequence[str]] | None = None,
             study: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Fig. 2: Choppy's test value over the d x heads grid (3 layers), the rest of the settings as configured.

    ``study``: ``run_study``'s outputs with the same seed (``repeats.read_study``); a grid point whose model it
    trained already (the configured d and heads) takes its value instead of training the model again."""
    rows = []
    for metric, qids, split, train, dev, test in _splits(run, qrels, cfg, seed, given_split):
        test_qids = [qids[i] for i in split["test"]]
        for d_model in cfg.grid_d:
            for heads in cfg.grid_heads:
                choppy_cfg = _choppy_config(cfg, metric, d_model=d_model, heads=heads, layers=3)
                value = studied_value(study, metric, choppy_cfg, split, test_qids, cfg, seed)
                if value is None:
                    model, _ = train_choppy(train, dev, choppy_cfg, seed, cfg.device)
                    cuts, _ = predict(model, test[0], test[2], cfg.device)
                    value = float(evaluate_cuts(test[1], cuts).mean())
                else:
                    log.info("%s, d %d, %d heads: the study's Choppy (same settings, seed and split)", metric,
                             d_model, heads)
                rows.append({"metric": metric, "d_model": d_model, "heads": heads, "value": value})
    if not rows:
        raise StudyError("the Choppy grid is empty: set choppy.grid_d and choppy.grid_heads")
    return pd.DataFrame(rows)


def write_study(study: Mapping[str, Any], out_dir: Path) -> None:
    """results.csv, per_query.csv, fig1.json and settings.json, atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("results", "per_query"):
        with atomic_open(out_dir / f"{name}.csv") as out:
            study[name].to_csv(out, index=False)
    for name in ("fig1", "settings"):
        with atomic_open(out_dir / f"{name}.json") as out:
            json.dump(study[name], out, indent=1)


def read_qid_list(path: str | Path) -> list[str]:
    return formats.read_ids(path, "qid")


def judged_only(qids: Sequence[str], run: formats.Run, qrels: formats.Qrels, path) -> list[str]:
    """The listed queries less those the run ranks but the qrels do not judge (they have no metric table;
    logged); a query the run does not have stays, for ``split_queries`` to report."""
    unjudged = [qid for qid in qids if qid in run and not qrels.get(qid)]
    if unjudged:
        log.info("%s: left out %d listed queries without judgments: %s", path, len(unjudged), ", ".join(unjudged))
    return [qid for qid in qids if qid not in set(unjudged)]


def run_from_files(run_path: Path, qrels_path: Path, settings: Mapping[str, Any], seed: int, out_dir: Path | None,
                   qid_lists: Mapping[str, str] | None = None, grid_out: Path | None = None,
                   grid_study: Path | None = None) -> None:
    """The study into ``out_dir``; or, with ``grid_out``, only the Fig. 2 grid into that CSV (``grid_study``: a
    study's output directory whose Choppy models the grid need not train again, ``run_grid``). ``seed`` drives
    the split and the training (a repeat's: ``repeats.repeat_seed``)."""
    cfg = from_dict(TruncationConfig, settings, "choppy")
    run, qrels = formats.read_run(run_path), formats.read_qrels(qrels_path)
    given = {part: judged_only(read_qid_list(path), run, qrels, path) for part, path in (qid_lists or {}).items()} or None
    if grid_out is not None:
        grid = run_grid(run, qrels, cfg, seed, given, read_study(grid_study) if grid_study else None)
        with atomic_open(grid_out) as out:
            grid.to_csv(out, index=False)
        return
    study = run_study(run, qrels, cfg, seed, given)
    write_study(study, out_dir)
    log.info("split %s -> %s", study["settings"]["split"], out_dir)
