"""Benchmark: work the default study did twice, timed with and without it side by side in one process.

On a finished default study (``--study``, e.g. the folder of ``bench/fresh_study.sh``):

1. A Socialformer run's validations: its training validates the same (query, document) pairs at step 0 and at
   every ``validate_every`` steps; in evaluation a pair's graph is a pure function of the pair, so the model
   keeps each pair's plan (``models.socialformer.model.EVAL_PLANS_KEPT``). Timed: ``--validations`` validations
   of the trained run's model with the plans kept, and with them rebuilt every time (``EVAL_PLANS_KEPT = 0``);
   the validation values must agree.
2. Choppy's Fig. 2 grid: the grid point with the configured d and heads is the model repeat 0 of the study
   trained already (same settings, seed and split). Timed: ``run_grid`` given repeat 0's outputs, and without
   them; the grids must agree.

One thread (as the study's jobs). Usage:
    python bench/repeated_work.py --study /work/fresh-study [--out bench/results/repeated_work.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from rankstudy.cpu_isa import cpu_model, pin_vector_isa
from rankstudy.malloc import keep_freed_memory

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
pin_vector_isa()  # the kernels and allocator the study's jobs run with (python -m rankstudy), before torch loads
keep_freed_memory()

import torch  # noqa: E402
import yaml  # noqa: E402
from snakemake.utils import validate  # noqa: E402

import rankstudy.models.socialformer.model as socialformer_model  # noqa: E402
from rankstudy import formats  # noqa: E402
from rankstudy.config import from_dict  # noqa: E402
from rankstudy.experiment import load_trained  # noqa: E402
from rankstudy.store import TokenStore  # noqa: E402
from rankstudy.study import StudyPlan  # noqa: E402
from rankstudy.train.loop import TrainConfig, make_validator  # noqa: E402
from rankstudy.truncation.experiment import TruncationConfig, run_grid  # noqa: E402
from rankstudy.truncation.repeats import read_study  # noqa: E402


def time_validations(study: Path, run: str, validations: int) -> list[str]:
    model_dir, = study.glob(f"models/synthetic-doc/*/{run}/seed42")  # models/DATASET/MODEL/RUN/SEED
    train = json.loads((model_dir / "config.json").read_text())["train"]
    cfg = TrainConfig(**{**train, "device": "cpu"})
    text = study / "text/study/synthetic-doc"
    validate = make_validator(formats.read_run(study / "runs/synthetic-doc/bm25.dev.run"),
                              formats.read_qrels(study / "data/synthetic-doc/qrels.dev.txt"),
                              TokenStore(text / "queries.dev"), TokenStore(text / "collection"), cfg)
    rows, values = [], {}
    for kept in (socialformer_model.EVAL_PLANS_KEPT, 0):
        socialformer_model.EVAL_PLANS_KEPT = kept
        model, _ = load_trained(model_dir, study / "text/study/embeddings.npy", torch.device("cpu"))
        start = time.perf_counter()
        values[kept] = [validate(model) for _ in range(validations)]
        rows.append((f"Socialformer {run}: {validations} validations, plans kept up to {kept} pairs",
                     time.perf_counter() - start))
    assert len(set(map(tuple, values.values()))) == 1, values
    return _table(rows)


def time_grid(study: Path, name: str) -> list[str]:
    settings_path = study / "results/choppy" / name / "repeat0/settings.json"
    settings = json.loads(settings_path.read_text())
    if "seed" not in settings:
        raise SystemExit(f"{settings_path}: written before the study recorded its seed; rerun the study")
    config = yaml.safe_load((study / "config/config.yaml").read_text())
    validate(config, str(study / "workflow/schemas/config.schema.yaml"))  # fills the schema's defaults, as Snakemake
    choppy = StudyPlan.from_config(config).choppy
    cfg = from_dict(TruncationConfig, choppy.settings(), "choppy")
    inputs = choppy.inputs(name)
    run, qrels = formats.read_run(study / inputs["run"]), formats.read_qrels(study / inputs["qrels"])
    rows, grids = [], []
    for given in (read_study(settings_path.parent), None):
        start = time.perf_counter()
        grids.append(run_grid(run, qrels, cfg, settings["seed"], None, given))
        rows.append((f"Choppy grid ({name}), {'with' if given else 'without'} repeat 0's outputs",
                     time.perf_counter() - start))
    assert grids[0].equals(grids[1]), (grids[0], grids[1])
    return _table(rows)


def _table(rows: list[tuple[str, float]]) -> list[str]:
    (label_a, a), (label_b, b) = rows
    return [f"| {label_a} | {a:.1f} | {b / a:.2f}x |", f"| {label_b} | {b:.1f} | 1.00x |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True)
    parser.add_argument("--socialformer-run", default="sf-node")
    parser.add_argument("--validations", type=int, default=3)
    parser.add_argument("--choppy", default="bm25", help="a choppy.runs name")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out.resolve() if args.out else None
    os.chdir(args.study)  # the study's paths are relative to its folder (e.g. a run's warm-start encoder)
    torch.set_num_threads(1)
    lines = [f"Measured {time.strftime('%Y-%m-%d')} on {cpu_model() or platform.processor()}, one thread, "
             f"study {args.study}.", "", "| work | s | speed-up |", "|---|---:|---:|",
             *time_validations(Path("."), args.socialformer_run, args.validations),
             *time_grid(Path("."), args.choppy)]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        out.write_text(text)


if __name__ == "__main__":
    main()
