"""The truncation study on a toy run: splits, every method, Oracle bounds all, same seed same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from rankstudy.errors import StudyError
from rankstudy.papers.choppy.report import settings_caption
from rankstudy.truncation.choppy_train import train_choppy
from rankstudy.truncation.experiment import TruncationConfig, run_grid, run_study, split_queries
from rankstudy.truncation.repeats import read_study


def toy_run(queries=60, length=30, seed=0):
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(queries):
        scores = np.sort(rng.random(length))[::-1]
        relevant = rng.integers(1, 10)
        run[str(q)] = [(f"d{i}", float(s)) for i, s in enumerate(scores)]
        qrels[str(q)] = {f"d{i}": int(rng.random() < 0.8) for i in range(relevant)}
    return run, qrels


def test_seeded_split_and_given_split():
    qids = [str(i) for i in range(50)]
    cfg = TruncationConfig(n=10)
    split = split_queries(qids, cfg, seed=1)
    assert {k: len(v) for k, v in split.items()} == {"test": 10, "dev": 5, "train": 35}
    assert len(set(np.concatenate(list(split.values())))) == 50
    assert all((split_queries(qids, cfg, 1)[k] == v).all() for k, v in split.items())
    given = split_queries(qids, cfg, 1, {"train": ["0", "1"], "dev": ["2"], "test": ["3"]})
    assert list(given["test"]) == [3]
    with pytest.raises(StudyError, match="query-id lists"):
        split_queries(qids, cfg, 1, {"train": ["x"], "dev": ["2"], "test": ["3"]})


def test_study_runs_every_method_and_is_deterministic():
    run, qrels = toy_run()
    cfg = TruncationConfig(n=20, fixed_k=[5, 10], model={"d_model": 16, "heads": 2, "layers": 1, "epochs": 3},
                           bicut={"epochs": 2, "hidden": 8}, grid_d=[8], grid_heads=[1, 2], device="cpu")
    first = run_study(run, qrels, cfg, seed=3)
    again = run_study(run, qrels, cfg, seed=3)
    results = first["results"]
    assert set(results["method"]) == {"Oracle", "Fixed-5", "Fixed-10", "BiCut", "Choppy"} | {
        m for m in results["method"] if m.startswith("Greedy-k")}
    assert not ((results["metric"] == "dcg") & (results["method"] == "BiCut")).any()  # F1 only
    for metric, rows in results.groupby("metric"):
        oracle = rows.loc[rows["method"] == "Oracle", "value"].item()
        assert (rows["value"] <= oracle + 1e-6).all(), metric
    fixed = results[results["method"].str.startswith(("Fixed", "Greedy"))]
    assert (fixed["cut_sd"] == 0).all() and (results["cut_sd"] >= 0).all() and fixed["cut_rho_oracle"].isna().all()
    assert results.loc[results["method"] == "Oracle", "cut_rho_oracle"].tolist() == [1.0, 1.0]
    assert results.equals(again["results"]) and first["settings"] == again["settings"]
    assert set(first["fig1"]) == {"f1", "dcg"} and len(first["fig1"]["f1"]["probabilities"]) == 3
    # what the caption needs: the split, each Choppy's settings and epochs, BiCut's alpha as chosen
    settings = first["settings"]
    assert settings["split"] == {"test": 12, "dev": 6, "train": 42}
    assert settings["choppy_f1"]["d_model"] == 16 and settings["choppy_f1"]["epochs_run"] <= 3
    assert settings["bicut"]["alpha"] == 0.65 and list(settings["bicut"]["f1_by_alpha"]) == [0.65]


def test_the_grid_is_its_own_study():
    run, qrels = toy_run()
    cfg = TruncationConfig(n=20, model={"layers": 1, "epochs": 2}, grid_d=[8], grid_heads=[1, 2], device="cpu")
    grid = run_grid(run, qrels, cfg, seed=3)
    assert grid[["metric", "d_model", "heads"]].values.tolist() == [
        ["f1", 8, 1], ["f1", 8, 2], ["dcg", 8, 1], ["dcg", 8, 2]]
    assert grid.equals(run_grid(run, qrels, cfg, seed=3))
    with pytest.raises(StudyError, match="grid is empty"):
        run_grid(run, qrels, TruncationConfig(n=20, device="cpu"), seed=3)


def test_the_grid_takes_the_model_its_study_trained(tmp_path, monkeypatch):
    """The grid point of the study's own Choppy settings (same seed and split) is read from the study's outputs,
    not trained again, and the grid is the same; a study with another seed is not used."""
    import rankstudy.truncation.experiment as experiment

    run, qrels = toy_run()
    cfg = TruncationConfig(n=20, model={"d_model": 8, "heads": 2, "layers": 3, "epochs": 2}, bicut={"epochs": 1},
                           grid_d=[8], grid_heads=[1, 2], device="cpu")
    experiment.write_study(run_study(run, qrels, cfg, seed=3), tmp_path / "repeat0")
    study = read_study(tmp_path / "repeat0")
    trained = []
    monkeypatch.setattr(experiment, "train_choppy",
                        lambda *args: trained.append(args[2].heads) or train_choppy(*args))
    grid = run_grid(run, qrels, cfg, seed=3, study=study)
    assert trained == [1, 1]  # heads 2, the study's, not trained again for either metric
    assert grid.equals(run_grid(run, qrels, cfg, seed=3))
    trained.clear()
    run_grid(run, qrels, cfg, seed=4, study=study)
    assert trained == [1, 2, 1, 2]


def test_the_papers_split_has_no_dev_set():
    """dev_fraction 0 (the Choppy paper's random 80/20 train/test): no dev queries, Choppy trains every epoch and
    keeps the last, BiCut's alpha is chosen on the training lists; the test queries stay 20 %."""
    run, qrels = toy_run()
    cfg = TruncationConfig(n=20, dev_fraction=0.0, device="cpu", bicut_alphas=[0.3, 0.65],
                           model={"d_model": 16, "heads": 2, "layers": 1, "ff_dim": 16, "epochs": 3, "patience": 1},
                           bicut={"hidden": 8, "epochs": 2})
    study = run_study(run, qrels, cfg, seed=0)
    settings = study["settings"]
    assert settings["split"]["dev"] == 0 and settings["split"]["test"] == round(0.2 * len(run))
    assert settings["choppy_f1"]["epochs_run"] == 3 and settings["choppy_f1"]["best_epoch"] == 3
    assert settings["bicut"]["alpha_chosen_on"] == "train" and list(settings["bicut"]["f1_by_alpha"]) == [0.3, 0.65]
    assert "no dev set" in settings_caption(settings)
