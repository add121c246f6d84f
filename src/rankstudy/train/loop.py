"""One training loop for every re-ranker: batches, validation, early stopping, checkpoints, resume.

Output directory (docs/neural.md): ``model.pt`` (best state_dict), ``checkpoint.pt`` (the last
validation: model, optimiser, RNG states, early-stopping state, log rows), ``log.csv``
(``step, loss, metric, best``; a first row at step 0: the untrained model's validation value, no loss) and
``config.json``. Every file is written atomically, ``.pt`` files
byte-reproducibly and read back with ``weights_only=True`` (``rankstudy.tensorfile``).

Resume: ``config.json`` records the settings, the seed and the caller's fingerprint of the inputs;
a checkpoint is resumed only when they all match, otherwise the directory starts afresh (a rerun
after an upstream change trains on the new data). A finished run always (re)writes ``model.pt``
and ``log.csv``, which Snakemake deletes before it reruns the job.

Determinism: the examples of step ``k`` are a pure function of ``(seed, k)`` (one permutation per
epoch from ``default_rng([seed, epoch])``), and the checkpoint restores every RNG, so a run
killed and resumed ends with the same ``model.pt`` and ``log.csv`` as an uninterrupted one
(bit for bit on CPU; on GPU as far as its kernels are deterministic).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from tqdm import tqdm

from rankstudy.atomic import atomic_open
from rankstudy.config import check_ints, is_number
from rankstudy.device import resolve_device
from rankstudy.errors import StudyError
from rankstudy.evaluate import aggregate, evaluate_run, parse_measures
from rankstudy.formats import Qrels, Run
from rankstudy.precision import check_precision, tf32
from rankstudy.rerank import score_candidates
from rankstudy.runs import rerank_to_depth
from rankstudy.tensorfile import load_tensors, save_tensors
from rankstudy.train.length_groups import backward_in_length_groups
from rankstudy.train.losses import listwise_softmax_ce, margin_mse_loss, pairwise_margin_loss

log = logging.getLogger(__name__)

LOG_COLUMNS = ["step", "loss", "metric", "best"]
LOSSES = ("pairwise", "listwise", "margin_mse")
OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by ``train(kill_after_step=k)`` after step k, to simulate a killed job."""


@dataclass
class TrainConfig:
    loss: str  # "pairwise" or "margin_mse" (triples), "listwise" (groups)
    max_steps: int
    validate_every: int  # steps between validations (the last step is always validated)
    patience: int  # validations without improvement before stopping
    metric: str  # ir-measures string, e.g. "RR@10"
    validation_depth: int  # candidates re-ranked per validation query
    validation_queries: int | None = None  # N judged dev queries validate (validation_pick says which); None = all
    # "first": the first N by id; "spread": N spread evenly over the ids in order, for collections whose ids group
    # queries by topic (ScisummNet's citances by cited paper: its first 100 dev queries cite 7 of 104 papers)
    validation_pick: str = "first"
    batch_size: int = 32
    rel_threshold: int = 1
    learning_rates: dict[str, float] = field(default_factory=lambda: {"default": 1e-3})
    weight_decay: float = 0.0
    max_query_length: int = 30
    max_doc_length: int = 200
    device: str = "auto"
    # "fp32" (torch's defaults), "bf16" (forward passes under bf16 autocast, kernels, heads and losses in fp32)
    # or "tf32" (CUDA matrix products in TF32): rankstudy.precision
    precision: str = "fp32"
    grad_clip: float | None = None
    optimizer: str = "adam"  # "adam" (weight_decay as L2 in the gradient) or "adamw" (decoupled weight decay)
    # each positive is also scored with the batch's next query, as one more negative (batch_pass)
    query_negatives: bool = False
    # examples per forward/backward pass, gradients accumulated over the batch (_backward): the same
    # step as one pass over the whole batch, with a working set that stays in the CPU's cache
    # (bench/micro_batch.py); None = one pass
    micro_batch: int | None = None
    # a pass scores its documents sorted by length, this many at a time, each group padded to its own
    # longest (train.length_groups: same scores, less padding); 0 = the whole pass at once
    length_group: int = 16
    # train on the examples of this many training queries only (a learning curve: examples.query_subset);
    # None = all
    train_queries: int | None = None
    # loss margin_mse: the teacher whose score margins the model learns: {model: a MODELS name, **its settings},
    # frozen and untrained (e.g. a pre-trained bi-encoder zero-shot), scoring the model's own token stores; or
    # {scores: a neural.teachers name}, whose scores the examples carry (scored triples: train.teachers)
    teacher: dict[str, Any] | None = None
    # validation re-ranks with each document encoded once for all its queries, where the model can
    # (rerank.score_candidates; neural.rerank.reuse_documents)
    reuse_documents: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not {self.optimizer!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {self.loss!r}")
        if self.validation_pick not in ("first", "spread"):
            raise ValueError(f"validation_pick must be first or spread, not {self.validation_pick!r}")
        if (self.loss == "margin_mse") != (self.teacher is not None):
            raise ValueError("loss margin_mse needs a teacher ({model: NAME, ...its settings}) and a teacher needs "
                             f"loss margin_mse; got loss {self.loss!r} and teacher {self.teacher!r}")
        if self.teacher is not None and not (isinstance(self.teacher, Mapping) and (
                isinstance(self.teacher.get("model"), str) != isinstance(self.teacher.get("scores"), str))):
            raise ValueError(f"teacher must map either 'model' to a model name or 'scores' to a teacher name, "
                             f"got {self.teacher!r}")
        if self.loss == "margin_mse" and self.query_negatives:
            raise ValueError("loss margin_mse and query_negatives do not go together: the teacher scores the triples")
        check_ints(self, "max_steps", "validate_every", "patience", "validation_depth", "batch_size", "rel_threshold",
                   "max_query_length", "max_doc_length")
        try:
            parse_measures([self.metric], self.rel_threshold)
        except StudyError as error:
            raise ValueError(str(error)) from None
        if not isinstance(self.learning_rates, Mapping) or "default" not in self.learning_rates:
            raise ValueError("learning_rates must map optimizer groups to rates and contain 'default'")
        for group, lr in self.learning_rates.items():
            if not is_number(lr) or lr <= 0:
                raise ValueError(f"learning_rates.{group} must be a positive number, got {lr!r}")
        if not is_number(self.weight_decay) or self.weight_decay < 0:
            raise ValueError(f"weight_decay must be a non-negative number, got {self.weight_decay!r}")
        check_ints(self, "validation_queries", "micro_batch", "train_queries", nullable=True)
        if self.micro_batch is not None and self.query_negatives:
            raise ValueError("micro_batch and query_negatives do not go together: query negatives pair each "
                             "positive with another example's query of the same pass")
        check_ints(self, "length_group", minimum=0)
        if self.grad_clip is not None and (not is_number(self.grad_clip) or self.grad_clip <= 0):
            raise ValueError(f"grad_clip must be null or a positive number, got {self.grad_clip!r}")
        if self.device != "auto" and self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:n]', not {self.device!r}")
        check_precision(self.precision)

    @property
    def scored_examples(self) -> bool:
        """Whether the examples carry the teacher's scores (``teacher: {scores: NAME}``): no teacher model."""
        return self.teacher is not None and "scores" in self.teacher



def optimizer_groups(model: torch.nn.Module, learning_rates: Mapping[str, float]) -> list[dict]:
    """Adam parameter groups from ``model.PARAM_GROUPS`` (``models.base.Ranker``: prefix -> group; longest
    prefix wins). Unlisted parameters are in group ``default`` (all of a plain module's); frozen parameters
    are left out.
    """
    prefixes: Mapping[str, str] = getattr(model, "PARAM_GROUPS", {})
    members: dict[str, list[torch.nn.Parameter]] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            matches = [prefix for prefix in prefixes if name.startswith(prefix)]
            group = prefixes[max(matches, key=len)] if matches else "default"
            members.setdefault(group, []).append(param)
    if not members:
        raise StudyError(f"{type(model).__name__} has no trainable parameters")
    missing = [group for group in members if group not in learning_rates]
    if missing:
        raise StudyError(f"no learning rate for optimizer group(s) {', '.join(missing)} of {type(model).__name__}; "
                         f"learning_rates has {', '.join(learning_rates)}")
    groups = []
    for group, params in members.items():
        log.info("optimizer group %s: %d parameters, lr %g", group, sum(p.numel() for p in params), learning_rates[group])
        groups.append({"params": params, "lr": learning_rates[group], "name": group})
    return groups


class BatchOrder:
    """Example indices of step ``k`` (0-based): epoch ``k // b`` of ``b = max(1, n // size)`` batches."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.size, self.seed = n, batch_size, seed
        self.per_epoch = max(1, n // batch_size)
        self._epoch, self._perm = -1, np.empty(0, dtype=np.int64)

    def __call__(self, step: int) -> np.ndarray:
        epoch, i = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            self._epoch, self._perm = epoch, np.random.default_rng([self.seed, epoch]).permutation(self.n)
        return self._perm[i * self.size:(i + 1) * self.size]


def batch_pass(batch: Sequence[tuple], listwise: bool, query_store, doc_store, cfg: TrainConfig,
               device: torch.device, teacher: torch.nn.Module | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """A batch's training pass: (query ids, document ids, the loss of their scores), the positives and negatives
    scored in one forward pass.

    ``teacher`` (loss margin_mse): the frozen model whose scores of the same inputs give the target margins,
    scored here in fp32 without gradients; None with scored triples, whose teacher scores are the targets.

    ``cfg.query_negatives``: every positive d+_i is also scored with the next example's query
    q_{i+1} (cyclically; a different query whenever the batch has several) as one more negative of
    example i. A model that ranks by document features alone (a small cross-encoder learns such
    priors first) gains nothing on these pairs: only reading the query separates them.
    """
    qids = [example[0] for example in batch]
    if listwise:
        docids = [d for _, positive, negatives in batch for d in (positive, *negatives)]
    else:
        docids = [example[1] for example in batch] + [example[2] for example in batch]
    per_query = len(docids) // len(batch)
    query = torch.as_tensor(query_store.batch(qids, cfg.max_query_length), dtype=torch.long, device=device)
    docs = torch.as_tensor(doc_store.batch(docids, cfg.max_doc_length), dtype=torch.long, device=device)
    queries = query.repeat_interleave(per_query, dim=0) if listwise else torch.cat([query, query])
    if cfg.query_negatives:
        positives = docs[::per_query] if listwise else docs[:len(batch)]
        queries = torch.cat([queries, query.roll(-1, dims=0)])
        docs = torch.cat([docs, positives])
    if cfg.loss == "margin_mse" and cfg.scored_examples:  # scored triples: (qid, positive, negative, s+, s-)
        targets = torch.tensor([example[3] for example in batch] + [example[4] for example in batch],
                               dtype=torch.float32, device=device)
    elif cfg.loss == "margin_mse":
        with torch.no_grad():
            targets = teacher(queries, docs).float()

    def loss_of(scores: torch.Tensor) -> torch.Tensor:
        scores = scores.float()  # the loss in fp32 whatever the forward pass's precision (the same tensor in fp32)
        swapped = scores[len(docids):]  # [B] with query_negatives, else empty
        if listwise:
            grouped = scores[:len(docids)].view(len(batch), per_query)
            return listwise_softmax_ce(torch.cat([grouped, swapped.unsqueeze(1)], 1) if cfg.query_negatives
                                       else grouped)
        if cfg.loss == "margin_mse":
            n = len(batch)
            return margin_mse_loss(scores[:n], scores[n:], targets[:n], targets[n:])
        loss = pairwise_margin_loss(scores[:len(batch)], scores[len(batch):len(docids)])
        return loss + pairwise_margin_loss(scores[:len(batch)], swapped) if cfg.query_negatives else loss

    return queries, docs, loss_of


def pick_queries(items: list, count: int, how: str) -> list:
    """``count`` of ``items`` (in id order): the first, or spread evenly from the first to the last."""
    if how == "first" or count >= len(items):
        return items[:count]
    return [items[i * len(items) // count] for i in range(count)]


def make_validator(run: Run, qrels: Qrels, query_store, doc_store, cfg: TrainConfig,
                   batch_size: int | None = None) -> Callable[[torch.nn.Module], float]:
    """``validate(model)``: mean ``cfg.metric`` after re-ranking the top ``validation_depth`` of ``run``."""
    judged = {qid: run[qid] for qid in sorted(run) if qid in qrels}
    if cfg.validation_queries is not None:  # a fixed subset: long documents make every validation costly
        judged = dict(pick_queries(list(judged.items()), cfg.validation_queries, cfg.validation_pick))
        # the mean runs over the subset: evaluation counts a judged query missing from a run as 0
        qrels = {qid: qrels[qid] for qid in judged}

    def validate(model: torch.nn.Module) -> float:
        device = next(model.parameters()).device
        neural = score_candidates(model, judged, query_store, doc_store, cfg.validation_depth,
                                  batch_size or cfg.batch_size, cfg.max_query_length, cfg.max_doc_length,
                                  device, progress=False, precision=cfg.precision,
                                  reuse_documents=cfg.reuse_documents)
        reranked = rerank_to_depth(judged, neural, cfg.validation_depth)
        return float(aggregate(evaluate_run(reranked, qrels, [cfg.metric], cfg.rel_threshold))["value"].iloc[0])

    return validate


def _rng_states() -> dict:
    """Every RNG's state as tensors and plain numbers, so that ``weights_only`` loading reads it."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, python_state, gauss_next = random.getstate()
    return {"torch": torch.get_rng_state(),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "gauss": float(gauss)},
            "python": {"version": version, "state": list(python_state), "gauss_next": gauss_next},
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def _set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    numpy = states["numpy"]
    np.random.set_state((numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["pos"], numpy["has_gauss"],
                         numpy["gauss"]))
    python = states["python"]
    random.setstate((python["version"], tuple(python["state"]), python["gauss_next"]))
    if states["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def _save(obj: Any, path: Path) -> None:
    save_tensors(obj, path)


def _cpu_state(model: torch.nn.Module) -> dict:
    return {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}


def _write_log(path: Path, rows: list[dict]) -> None:
    with atomic_open(path) as out:
        writer = csv.DictWriter(out, fieldnames=LOG_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _run_config(model, examples, cfg: TrainConfig, seed: int) -> dict:
    return {"train": dataclasses.asdict(cfg), "seed": seed, "model": type(model).__name__, "examples": len(examples)}


def _check_examples(examples: Sequence[tuple], listwise: bool) -> None:
    if not examples:
        raise StudyError("no training examples")
    kinds = {isinstance(example[2], str) for example in examples}
    if kinds != {not listwise}:
        raise StudyError(f"loss {'listwise' if listwise else 'pairwise'} needs "
                         f"{'groups (qid, positive, negatives)' if listwise else 'triples (qid, positive, negative)'}")
    if listwise and len({len(example[2]) for example in examples}) != 1:
        raise StudyError("every group needs the same number of negatives")


def train(model: torch.nn.Module, examples: Sequence[tuple], query_store, doc_store,
          validate: Callable[[torch.nn.Module], float], cfg: TrainConfig, out_dir, seed: int,
          kill_after_step: int | None = None, recorded: dict | None = None,
          teacher: torch.nn.Module | None = None) -> dict:
    """Train ``model`` on triples (pairwise, margin_mse) or groups (listwise); resume from ``out_dir/checkpoint.pt``.

    ``teacher``: the model built from ``cfg.teacher`` (loss margin_mse), kept frozen in eval mode; None when the
    examples are scored triples (``cfg.teacher`` names their ``scores``).

    ``recorded``: the caller's settings (e.g. the model's name and settings) written into
    ``config.json`` beside the loop's own, and checked like them before a checkpoint is resumed.

    Validates every ``cfg.validate_every`` steps and at the last step, keeps the best
    state_dict in ``model.pt`` and stops after ``cfg.patience`` validations without
    improvement. On return the model holds the best state. Returns ``{metric, best_metric,
    best_step, steps, stopped_early}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    listwise = cfg.loss == "listwise"
    _check_examples(examples, listwise)
    device = resolve_device(cfg.device)
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    model.to(device)
    if (cfg.loss == "margin_mse" and not cfg.scored_examples) != (teacher is not None):
        raise StudyError(f"loss {cfg.loss} {'needs' if teacher is None else 'takes no'} teacher model")
    if cfg.scored_examples and len(examples[0]) != 5:
        raise StudyError(f"teacher {cfg.teacher['scores']!r}: the examples carry no teacher scores (expected scored "
                         "triples: qid, positive, negative, two scores)")
    if teacher is not None:
        teacher.to(device).eval().requires_grad_(False)
    optimizer = OPTIMIZERS[cfg.optimizer](optimizer_groups(model, cfg.learning_rates), weight_decay=cfg.weight_decay)
    config = {**_run_config(model, examples, cfg, seed), **(recorded or {})}
    state = {"step": 0, "best_metric": None, "best_step": None, "bad": 0, "rows": [], "done": False,
             "stopped_early": False}
    checkpoint_path, config_path = out_dir / "checkpoint.pt", out_dir / "config.json"
    _remove_stale_temporaries(out_dir)
    if checkpoint_path.exists() and not _resumable(config_path, config):
        for name in ("checkpoint.pt", "best.pt", "model.pt", "log.csv"):
            (out_dir / name).unlink(missing_ok=True)
    if checkpoint_path.exists():
        state = _resume(checkpoint_path, model, optimizer, state)
        log.info("resuming %s from step %d (best %s %s at step %s)", out_dir, state["step"], cfg.metric,
                 state["best_metric"], state["best_step"])
    else:  # keys written by the caller (e.g. the model's config) are kept
        saved = json.loads(config_path.read_text()) if config_path.exists() else {}
        with atomic_open(config_path) as out:
            json.dump({**saved, **config}, out, indent=2)
    if not state["rows"]:  # the untrained model's value, step 0: the learning audit's reference (report/learning.py)
        state["rows"].append({"step": 0, "loss": math.nan, "metric": _measure(model, validate, cfg, 0),
                              "best": math.nan})
    if not state["done"]:
        with tf32(cfg.precision, device):  # forward and backward passes (bf16 autocast: forward passes only)
            _loop(model, optimizer, examples, listwise, query_store, doc_store, validate, cfg, device, out_dir,
                  seed, state, kill_after_step, teacher)
    # model.pt and log.csv (the workflow's outputs) are written when training is over, also when a
    # finished checkpoint is resumed: a killed job leaves checkpoint.pt and best.pt to resume from
    # and no output that looks complete; a rerun of a finished one gets its outputs back.
    best = load_tensors(out_dir / "best.pt")
    _write_log(out_dir / "log.csv", state["rows"])
    _save(best, out_dir / "model.pt")
    model.load_state_dict(best)
    summary = {"metric": cfg.metric, "best_metric": state["best_metric"], "best_step": state["best_step"],
               "steps": state["step"], "stopped_early": state["stopped_early"]}
    log.info("training done: %s", summary)
    return summary


def _remove_stale_temporaries(out_dir: Path) -> None:
    """Delete the temporary files (``atomic_path``'s ``.NAME.*.tmp``) a killed write left behind."""
    for tmp in out_dir.glob(".*.tmp"):
        if tmp.is_file():
            tmp.unlink()
            log.info("removed %s, left by an interrupted write", tmp)


def _resume(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, fresh: dict) -> dict:
    """Restore the model, the optimizer and every RNG from checkpoint ``path``; return the loop's state."""
    checkpoint = load_tensors(path)
    try:
        model.load_state_dict(checkpoint.pop("model"))
        optimizer.load_state_dict(checkpoint.pop("optimizer"))
        _set_rng_states(checkpoint.pop("rng"))
        if set(fresh) - set(checkpoint):
            raise KeyError(", ".join(sorted(set(fresh) - set(checkpoint))))
    except (KeyError, RuntimeError, TypeError, ValueError, AttributeError) as error:
        raise StudyError(f"{path}: expected a training checkpoint of this model (model, optimizer, RNG states and "
                         f"the loop's state; {type(error).__name__}: {error}); delete it to train afresh") from None
    return checkpoint


def _resumable(config_path: Path, config: dict) -> bool:
    """Whether the checkpoint beside ``config_path`` was written with this config, seed, example
    count and recorded settings (inputs' fingerprint included; the device aside; a config.json written before
    ``precision`` existed was fp32)."""
    if not config_path.exists():
        return True
    try:
        saved = json.loads(config_path.read_text())
    except (OSError, ValueError):
        saved = {}

    def comparable(recorded: dict) -> dict:
        train = {key: value for key, value in recorded.get("train", {}).items() if key != "device"}
        return {**recorded, "train": {"precision": "fp32", **train}}

    before = comparable(saved)
    differ = [key for key, value in comparable(config).items() if before.get(key) != value]
    if differ:
        log.warning("%s: the checkpoint was written with other %s; training starts afresh",
                    config_path.parent, ", ".join(differ))
    return not differ


def _loop(model, optimizer, examples, listwise, query_store, doc_store, validate, cfg, device, out_dir, seed,
          state, kill_after_step, teacher) -> None:
    order = BatchOrder(len(examples), cfg.batch_size, seed)
    losses: list[float] = []
    model.train()
    with tqdm(total=cfg.max_steps, initial=state["step"], desc="train", unit="step", dynamic_ncols=True) as bar:
        for step in range(state["step"] + 1, cfg.max_steps + 1):
            batch = [examples[i] for i in order(step - 1)]
            optimizer.zero_grad(set_to_none=True)
            losses.append(_backward(model, batch, listwise, query_store, doc_store, cfg, device, step, teacher))
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
            if step % cfg.validate_every == 0 or step == cfg.max_steps:
                _validation(model, optimizer, validate, cfg, out_dir, state, step, losses)
                losses = []
            if kill_after_step is not None and step == kill_after_step:
                raise TrainingInterrupted(f"killed after step {step}")
            if state["done"]:
                break


def _backward(model, batch, listwise, query_store, doc_store, cfg, device, step: int, teacher=None) -> float:
    """Accumulate the gradient of the batch's mean loss, ``cfg.micro_batch`` examples per pass (each
    part's mean loss weighted by its share of the batch; ``backward_in_length_groups``); returns the batch's
    loss."""
    size = cfg.micro_batch or len(batch)
    total = 0.0
    for start in range(0, len(batch), size):
        part = batch[start:start + size]
        queries, docs, loss_of = batch_pass(part, listwise, query_store, doc_store, cfg, device, teacher)
        share = len(part) / len(batch)
        loss = backward_in_length_groups(model, queries, docs, cfg.length_group,
                                         loss_of if share == 1 else lambda scores: loss_of(scores) * share,
                                         cfg.precision)
        if not torch.isfinite(loss):
            raise StudyError(f"the training loss is {loss.item()} at step {step}")
        total += loss.item()
    return total


def _measure(model, validate, cfg, step: int) -> float:
    """The validation measure of ``model`` as it is now (eval mode, no gradients)."""
    model.eval()
    try:
        with torch.no_grad():
            metric = float(validate(model))
    finally:
        model.train()
    if not math.isfinite(metric):
        raise StudyError(f"validation {cfg.metric} is {metric} at step {step}")
    return metric


def _validation(model, optimizer, validate, cfg, out_dir: Path, state: dict, step: int, losses: list[float]) -> None:
    """Validate after ``step``: keep the best state, count validations without improvement (the untrained
    model's step-0 value is logged only: early stopping compares trained states)."""
    metric = _measure(model, validate, cfg, step)
    improved = state["best_metric"] is None or metric > state["best_metric"]
    if improved:
        state.update(best_metric=metric, best_step=step, bad=0)
        _save(_cpu_state(model), out_dir / "best.pt")
    else:
        state["bad"] += 1
    state["stopped_early"] = state["bad"] >= cfg.patience
    state["step"] = step
    state["done"] = state["stopped_early"] or step >= cfg.max_steps
    state["rows"].append({"step": step, "loss": sum(losses) / len(losses), "metric": metric,
                          "best": state["best_metric"]})
    log.info("step %d: loss %.4f, %s %.4f (best %.4f at step %d)%s", step, state["rows"][-1]["loss"], cfg.metric,
             metric, state["best_metric"], state["best_step"], ", stopping early" if state["stopped_early"] else "")
    _write_log(out_dir / "log.csv", state["rows"])
    _save({"model": _cpu_state(model), "optimizer": optimizer.state_dict(), "rng": _rng_states(), **state},
          out_dir / "checkpoint.pt")
