"""Re-ranking throughput (documents/ms), training speed (steps/s) and peak memory of the models,
side by side in one run.

Each model is measured in a fresh process, so the peak resident memory of one does not hide another's: a
``multiprocessing`` forkserver imports torch and the models once, and forks one process per model from it (a
spawned process per model paid the imports each time: ~3 s of CPU a model, ~8 with transformers;
bench/results/efficiency_processes.md): batches of ``batch`` documents of ``doc_length`` tokens
against one query of ``query_length`` tokens (the re-ranking setting), median over ``repeats``
timed forward passes after a warm-up, in inference mode. On CUDA, the peak memory is
``torch.cuda.max_memory_allocated``; on CPU, the process's peak anonymous memory above its anonymous memory once
torch is imported (model, embeddings, activations and the allocator's caches; inference only, measured before
training; ``anonymous_peak_mb``). Then
``repeats`` training steps as the study's loop takes them (``train_batch`` pairs: forward in length
groups of ``training.length_group``'s default, pairwise margin loss, backward, Adam; with several threads
the groups on separate threads, ``train.length_groups``), after a warm-up step. A model entry may override
``batch``, ``doc_length``, ``train_batch`` (long-document models are measured at their own lengths), ``dim`` (a
model on vectors of another width) and ``repeats`` (a TKL training step at 4,000 tokens takes half a minute on one
CPU core), and an encoder model's
``random_encoder`` (a BERT's ``layers``, ``hidden``, ``heads``, ``intermediate``): the encoder is then a randomly
initialised BERT of those dimensions (``text.study_encoder.random_bert``), so that a machine without the paper's
bert-base-uncased measures its architecture's speed (speed does not depend on the weights).
Each row records the settings it ran with: torch threads, the OpenMP wait policy (the CLI sets
``PASSIVE``: docs/neural.md, "Threads on a shared machine"), torch's vector instruction set (the
CLI pins AVX2: ``rankstudy.cpu_isa``) and the allocator setting (``malloc``: ``rankstudy.malloc``). The setup's
``precision`` (``rankstudy.precision``; default fp32) applies to the passes and steps, and is recorded too.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import platform
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.config import check_ints

log = logging.getLogger(__name__)


# a model entry may measure at its own settings
SETUP_OVERRIDES = ("batch", "doc_length", "train_batch", "repeats", "dim")
MEASUREMENT_KEYS = (*SETUP_OVERRIDES, "random_encoder")  # an entry's keys that are not its model's config
# what each measurement process needs, imported once by the forkserver it forks from (BERT's module only when an
# encoder model is measured: it costs ~5 s to import)
PRELOAD = ["torch", "rankstudy.models", "rankstudy.efficiency"]
BERT_MODULE = "transformers.models.bert.modeling_bert"


@dataclass
class RandomEncoder:
    """A model entry's ``random_encoder``: the dimensions of the random BERT it is measured with."""
    layers: int
    hidden: int
    heads: int
    intermediate: int

    def __post_init__(self) -> None:
        check_ints(self, "layers", "hidden", "heads", "intermediate")
        if self.hidden % self.heads:
            raise ValueError(f"heads ({self.heads}) must divide hidden ({self.hidden})")

    def describe(self) -> str:
        return f"random BERT, layers {self.layers}, hidden {self.hidden}"


def encoder_of(settings: Mapping[str, Any]) -> str:
    """What a row's encoder is: the config's ``encoder``, a random BERT's size, or '' for a model without one."""
    if "random_encoder" in settings:
        return RandomEncoder(**settings["random_encoder"]).describe()
    return str(settings.get("encoder", ""))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def _memory_status_mb() -> dict[str, float]:
    """This process's VmHWM, RssAnon, RssFile, ... in MB (Linux's /proc/self/status)."""
    with open("/proc/self/status") as status:
        fields = (line.split(":", 1) for line in status if line.startswith(("Vm", "Rss")))
        return {name: int(value.split()[0]) / 1024 for name, value in fields}


def reset_peak_rss() -> None:
    """Lower this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0): a forked process starts with the
    peak of the process it was forked from."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def anonymous_rss_mb() -> float:
    return _memory_status_mb()["RssAnon"]


def anonymous_peak_mb() -> float:
    """The peak of this process's anonymous memory since ``reset_peak_rss``: its peak RSS less the file-backed pages
    resident now. Shared-library code is left out because it is not the model's and its amount is not stable: a
    forked process faults in again the code its server had mapped, and how much code the first passes touch
    depends on the CPU (CI measured 75 MB for a model that measures 33 here with the whole RSS). A lower bound
    that is tight when the code is resident by the time of the peak, as it is after the warm-up pass."""
    status = _memory_status_mb()
    return status["VmHWM"] - status["RssFile"]


def _measure(name: str, settings: Mapping[str, Any], setup: Mapping[str, Any]) -> dict:
    import torch

    from rankstudy.malloc import keep_freed_memory
    from rankstudy.models import build_model
    from rankstudy.precision import autocast, tf32

    malloc = keep_freed_memory()  # a spawned process: the CLI's allocator setting, as the study's jobs run
    setup = {**setup, **{key: settings[key] for key in SETUP_OVERRIDES if key in settings}}
    reset_peak_rss()
    baseline = anonymous_rss_mb()
    torch.set_num_threads(setup["threads"])
    torch.manual_seed(0)
    device = torch.device(setup["device"])
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(setup["vocab"], setup["dim"])).astype(np.float32)
    embeddings[:2] = 0
    model = build_model(settings["model"], {k: v for k, v in settings.items()
                                            if k != "model" and k not in MEASUREMENT_KEYS}, embeddings)
    model = model.to(device).eval()
    setup = {**setup, "vocab": token_range(model, setup["vocab"])}
    query = torch.as_tensor(rng.integers(2, setup["vocab"], size=(1, setup["query_length"]))).repeat(setup["batch"], 1)
    document = torch.as_tensor(rng.integers(2, setup["vocab"], size=(setup["batch"], setup["doc_length"])))
    query, document = query.to(device), document.to(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    precision = setup.get("precision", "fp32")
    with torch.inference_mode(), tf32(precision, device), autocast(precision, device):
        for repeat in range(setup["repeats"] + 1):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            model(query, document)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if repeat:  # the first pass warms up
                times.append(time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else anonymous_peak_mb() - baseline)
    with tf32(precision, device):
        step_seconds = training_step_seconds(model, query[:1], rng, setup, device, precision)
    return {"model": name, "encoder": encoder_of(settings), "device": device.type, "precision": precision,
            "threads": setup["threads"],
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"), "malloc": malloc,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "batch": setup["batch"],
            "doc_length": setup["doc_length"], "dim": setup["dim"], "train_batch": setup["train_batch"],
            "repeats": setup["repeats"], "docs_per_ms": setup["batch"] / (statistics.median(times) * 1000),
            "train_steps_per_s": 1 / statistics.median(step_seconds), "peak_memory_mb": peak}


def token_range(model, vocab: int) -> int:
    """The token ids a measurement draws from, [2, this): the setup's ``vocab``, or an encoder model's own
    vocabulary where that is smaller (a small BERT's embedding table has no row for a larger id)."""
    encoder_vocab = getattr(getattr(getattr(model, "encoder", None), "config", None), "vocab_size", None)
    return min(vocab, encoder_vocab) if isinstance(encoder_vocab, int) else vocab


def training_step_seconds(model, query, rng, setup: Mapping[str, Any], device, precision: str = "fp32") -> list[float]:
    """Seconds of each of ``repeats`` training steps (after one warm-up step) on random pairs, forward passes at
    ``precision`` (bf16 autocast; TF32 is switched by the caller: ``rankstudy.precision.tf32``)."""
    import torch

    from rankstudy.train.length_groups import backward_in_length_groups
    from rankstudy.train.loop import TrainConfig
    from rankstudy.train.losses import pairwise_margin_loss

    pairs = setup["train_batch"]
    documents = torch.as_tensor(rng.integers(2, setup["vocab"], size=(2 * pairs, setup["doc_length"]))).to(device)
    queries = query.expand(2 * pairs, -1)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    model.train()
    seconds = []

    def loss_of(scores):
        scores = scores.float()  # the loss in fp32, as the training loop's
        return pairwise_margin_loss(scores[:pairs], scores[pairs:])

    for repeat in range(setup["repeats"] + 1):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        backward_in_length_groups(model, queries, documents, TrainConfig.length_group, loss_of, precision)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if repeat:  # the first step warms up
            seconds.append(time.perf_counter() - start)
    return seconds


def measure_models(models: Mapping[str, Mapping[str, Any]], setup: Mapping[str, Any],
                   devices: list[str] | None = None, start_method: str = "forkserver") -> pd.DataFrame:
    """One row per model and device (default: CPU always, CUDA too when available); ``start_method``: how each
    model's process starts (``spawn``: without the preloaded imports, bench/efficiency_processes.py)."""
    import torch

    devices = devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    context = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        # the server only imports (no torch op, no thread pool, no CUDA context): each fork starts clean
        encoders = any(encoder_of(settings) for settings in models.values())
        context.set_forkserver_preload(PRELOAD + [BERT_MODULE] * encoders)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        models = {name: _with_random_encoder(settings, Path(scratch) / name) for name, settings in models.items()}
        with context.Pool(1, maxtasksperchild=1) as pool:
            for device in devices:
                for name, settings in models.items():
                    row = pool.apply(_measure, (name, settings, {**setup, "device": device}))
                    log.info("%s on %s: %.3f docs/ms, %.2f training steps/s, peak %.0f MB", name, device,
                             row["docs_per_ms"], row["train_steps_per_s"], row["peak_memory_mb"])
                    rows.append(row)
    table = pd.DataFrame(rows)
    table["machine"] = f"{platform.machine()} {platform.processor()}".strip()
    return table


def _with_random_encoder(settings: Mapping[str, Any], directory: Path) -> Mapping[str, Any]:
    """An entry with ``random_encoder`` gets ``encoder``: a random BERT of that size written to ``directory``
    (here, before the measurement processes start, so that its making counts in no model's peak memory)."""
    if "random_encoder" not in settings:
        return settings
    from rankstudy.text.study_encoder import random_bert

    size = RandomEncoder(**settings["random_encoder"])
    return {**settings, "encoder": random_bert(directory, size.layers, size.hidden, size.heads, size.intermediate)}


def write_efficiency(models: Mapping[str, Mapping[str, Any]], setup: Mapping[str, Any], out) -> pd.DataFrame:
    table = measure_models(models, setup)
    with atomic_open(out) as handle:
        table.to_csv(handle, index=False)
    return table
