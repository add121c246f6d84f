"""Benchmark: re-ranking throughput of a paper config's models on a GPU (issue 45), each beside the TKL paper's
GTX 1080 figure, the target for a current GPU and the device's peak FLOP/s.

For every model of the config's ``neural.efficiency.models`` and every precision (``rankstudy.precision``; fp32 and
bf16 unless ``--precisions`` says otherwise):

- docs/ms over a sweep of batch sizes (doubling; a sweep stops when memory runs out, when two doublings in a row
  gain less than 3 %, or when the model's share of the time is spent), re-ranking as the ``rerank`` step runs it:
  one query against the batch's documents, ids copied from pinned host memory without blocking
  (``rerank.ids_on_device``), scores kept on the device until the timed passes end;
- at the best batch: FLOP/s of the matrix products and attention (``torch.utils.flop_counter``) as a share of the
  device's peak at that precision (reported for the transformer models, whose work those are), and, with
  ``--compile``, the same passes through ``torch.compile``;
- training steps/s at the config's ``train_batch`` (the study's step: ``efficiency.training_step_seconds``).

Each model runs in a fresh process that reports every measurement as it is taken; a model that outlives its share
of ``--time-limit`` is stopped and what it measured is kept. An encoder the machine does not hold (the paper
config's downloaded bert-base-uncased) is replaced by a random BERT of its dimensions (12 layers, 768 hidden, 12
heads, vocabulary 30,522): speed does not depend on the weights.

    python bench/gpu_efficiency.py --out bench/results/gpu_efficiency.md        # a GPU: under 8 minutes on an H200
    python bench/gpu_efficiency.py --device cpu --quick --out /tmp/quick.md     # the same code, tiny, on a CPU

``--quick`` shrinks everything (40-d vectors, documents of at most 400 tokens, batches of 4 and 8, a 2-layer BERT
of 64 dimensions) to check the script, not to measure: its numbers are no GPU results.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # noqa: E402 (the checkout's package, whichever is installed)

# docs/ms on a GTX 1080 (the TKL paper, SIGIR 2020, Table 1) and the targets for a current GPU (issue 45)
PAPER_GTX_1080 = {"knrm": 49, "conv_knrm": 10, "tk": 4, "bert_cat": 0.1, "tkl-2k": 1.1, "tkl-4k": 0.9}
TARGETS = {"tk": 100, "tkl-2k": 15, "conv_knrm": 100, "bert_cat": 10}
# dense peak TFLOP/s (no sparsity) from NVIDIA's data sheets: fp32 on the CUDA cores, tf32 and bf16 on the tensor cores
PEAK_TFLOPS = {"H200": {"fp32": 67, "tf32": 494.7, "bf16": 989.4}, "H100": {"fp32": 67, "tf32": 494.7, "bf16": 989.4},
               "A100": {"fp32": 19.5, "tf32": 156, "bf16": 312}}
TRANSFORMERS = {"tk", "tkl", "bert_cat", "firstp", "maxp", "parade", "idcm", "sparse_bert", "socialformer"}
QUICK = {"dim": 40, "vocab": 1000, "max_doc_length": 400, "batches": [4, 8], "train_batch": 4,
         "bert": {"layers": 2, "hidden": 64, "heads": 2, "intermediate": 128}}
BERT_BASE = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}


def batch_sizes(doc_length: int, quick: bool) -> list[int]:
    """The sweep: 16, 32, ... up to 4,096 documents of up to 512 tokens, 1,024 of longer ones."""
    if quick:
        return QUICK["batches"]
    return [2 ** k for k in range(4, 13 if doc_length <= 512 else 11)]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _register_cpu_attention_flops() -> None:
    """CPU attention's kernel has no FLOP formula in torch's counter: give it flash attention's."""
    from torch.utils import flop_counter

    target = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if target is None or target in flop_counter.flop_registry:
        return

    @flop_counter.register_flop_formula(target)
    def _flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
        return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def _worker(messages, name: str, settings: dict, setup: dict, options: dict) -> None:
    """Measure one model, putting each result on ``messages`` as (kind, row) the moment it is taken."""
    try:
        _measure(messages, name, settings, setup, options)
    except BaseException as error:  # noqa: BLE001 (reported, then the next model runs)
        messages.put(("error", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"))
    messages.put(("done", None))


def _measure(messages, name: str, settings: dict, setup: dict, options: dict) -> None:
    import numpy as np

    from rankstudy.efficiency import SETUP_OVERRIDES, training_step_seconds
    from rankstudy.models import build_model
    from rankstudy.precision import autocast, tf32
    from rankstudy.rerank import ids_on_device  # what the rerank step copies its batches with

    device, deadline = torch.device(options["device"]), options["deadline"]
    torch.set_num_threads(setup["threads"])
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(setup["vocab"], setup["dim"])).astype(np.float32)
    embeddings[:2] = 0
    model = build_model(settings["model"], {k: v for k, v in settings.items()
                                            if k != "model" and k not in SETUP_OVERRIDES}, embeddings).to(device).eval()
    length = settings.get("doc_length", setup["doc_length"])
    query = rng.integers(2, setup["vocab"], size=(1, setup["query_length"]))

    def docs_per_ms(run_model, batch: int, precision: str) -> tuple[float, float | None]:
        """Re-ranking throughput at ``batch`` (two host batches alternate) and the peak GPU memory (MB)."""
        host = [rng.integers(2, setup["vocab"], size=(batch, length)) for _ in range(2)]
        queries = np.repeat(query, batch, 0)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

        def passes(count: int) -> float:
            _synchronize(device)
            start, scores = time.perf_counter(), []
            for index in range(count):
                scores.append(run_model(ids_on_device(queries, device), ids_on_device(host[index % 2], device)).float())
            _synchronize(device)
            return time.perf_counter() - start

        with torch.inference_mode(), tf32(precision, device), autocast(precision, device):
            first = passes(1 if options["quick"] else 2) / (1 if options["quick"] else 2)  # warm-up
            count = max(options["repeats"], min(50, math.ceil(options["min_seconds"] / max(first, 1e-6))))
            seconds = passes(count)
        peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
        return count * batch / (seconds * 1000), peak

    best = {}
    for precision in options["precisions"]:
        speeds = []
        for batch in batch_sizes(length, options["quick"]):
            if time.time() > deadline:
                messages.put(("note", f"{name} {precision}: sweep stopped before batch {batch} (time)"))
                break
            try:
                speed, peak = docs_per_ms(model, batch, precision)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                messages.put(("note", f"{name} {precision}: out of memory at batch {batch}"))
                break
            row = {"model": name, "precision": precision, "batch": batch, "docs_per_ms": speed, "peak_mb": peak}
            messages.put(("sweep", row))
            if precision not in best or speed > best[precision]["docs_per_ms"]:
                best[precision] = row
            speeds.append(speed)
            if len(speeds) >= 3 and max(speeds[-2:]) < 1.03 * speeds[-3]:
                break  # two doublings without a gain: saturated
    for row in best.values():
        messages.put(("best", {**row, "flops_per_doc": _flops_per_document(model, row["batch"], row["precision"],
                                                                           length, setup, device)}))
    train_setup = {**setup, "doc_length": length, "train_batch": settings.get("train_batch", setup["train_batch"]),
                   "repeats": options["repeats"]}
    for precision in options["precisions"]:
        if time.time() > deadline:
            messages.put(("note", f"{name}: training steps at {precision} not measured (time)"))
            break
        with tf32(precision, device):
            seconds = training_step_seconds(model, torch.as_tensor(query).to(device), rng, train_setup, device,
                                            precision)
        messages.put(("train", {"model": name, "precision": precision, "train_batch": train_setup["train_batch"],
                                "steps_per_s": 1 / statistics.median(seconds)}))
    model.eval()
    if best and (name in options["compile"] or options["compile"] == ["all"]):  # last: it may overrun
        top = max(best.values(), key=lambda row: row["docs_per_ms"])
        if time.time() < deadline:
            speed, _ = docs_per_ms(torch.compile(model, mode=options["compile_mode"], dynamic=False), top["batch"],
                                   top["precision"])
            messages.put(("compiled", {"model": name, "precision": top["precision"], "batch": top["batch"],
                                       "docs_per_ms": speed}))
        else:
            messages.put(("note", f"{name}: not compiled (time)"))


def _flops_per_document(model, batch: int, precision: str, length: int, setup: dict, device) -> float:
    """FLOPs of one forward pass per document (matrix products and attention), counted on a pass of ``batch`` on
    one thread (CPU slices on other threads would escape the counter)."""
    import numpy as np
    from torch.utils.flop_counter import FlopCounterMode

    from rankstudy.precision import autocast

    _register_cpu_attention_flops()
    rng = np.random.default_rng(1)
    query = torch.as_tensor(rng.integers(2, setup["vocab"], size=(1, setup["query_length"]))).repeat(batch, 1)
    documents = torch.as_tensor(rng.integers(2, setup["vocab"], size=(batch, length)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode(), autocast(precision, device), FlopCounterMode(display=False) as counter:
            model(query.to(device), documents.to(device))
    finally:
        torch.set_num_threads(threads)
    return counter.get_total_flops() / batch


def run_models(models: dict, setup: dict, options: dict, time_limit: float) -> dict:
    """Each model in its own spawned process with a share of the time left; {kind: [rows]} of every message."""
    context = multiprocessing.get_context("spawn")
    results = {"sweep": [], "best": [], "compiled": [], "train": [], "note": [], "error": []}
    end = time.time() + time_limit
    for index, (name, settings) in enumerate(models.items()):
        left = end - time.time()
        if left < 5:
            results["note"].append(f"{name}: not measured (time)")
            continue
        share = left / (len(models) - index)
        messages = context.Queue()
        worker = context.Process(target=_worker, args=(messages, name, settings, setup,
                                                       {**options, "deadline": time.time() + share}))
        worker.start()
        hard_stop = time.time() + share + min(60.0, left - share)  # compiling or a last pass may overrun a little
        while True:
            try:
                kind, row = messages.get(timeout=1.0)
            except queue.Empty:
                if not worker.is_alive():
                    results["note"].append(f"{name}: its process ended with exit code {worker.exitcode}")
                    break
                if time.time() > hard_stop:
                    worker.terminate()
                    results["note"].append(f"{name}: stopped after {share:.0f} s; its measurements so far are kept")
                    break
                continue
            if kind == "done":
                break
            results[kind].append(row if kind != "error" else f"{name}: {row}")
        worker.join(5)
        print(f"{name}: done ({time.time() - end + time_limit:.0f} s of {time_limit:.0f})", file=sys.stderr, flush=True)
    return results


def _peaks(device: torch.device, override: str | None) -> tuple[str, dict[str, float]]:
    """(device name, peak TFLOP/s per precision): ``--peak-tflops`` or the data sheet of a known GPU."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    if override:
        return name, {key: float(value) for key, value in (item.split("=") for item in override.split(","))}
    return name, next((peaks for gpu, peaks in PEAK_TFLOPS.items() if gpu in name), {})


def _cell(value, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def report(results: dict, models: dict, precisions: list[str], device_name: str, peaks: dict,
           header: list[str]) -> list[str]:
    """Markdown: one row per model and precision (best batch), then the sweep, then the notes."""
    train = {(row["model"], row["precision"]): row["steps_per_s"] for row in results["train"]}
    compiled = {(row["model"], row["precision"]): row["docs_per_ms"] for row in results["compiled"]}
    lines = header + ["", "| model | GTX 1080 (paper) | target | precision | best batch | docs/ms | × paper "
                      "| target met | compiled docs/ms | TFLOP/s | of peak | train steps/s | peak MB |",
                      "|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for row in sorted(results["best"], key=lambda row: (list(models).index(row["model"]),
                                                       precisions.index(row["precision"]))):
        name, precision = row["model"], row["precision"]
        paper, target = PAPER_GTX_1080.get(name), TARGETS.get(name)
        flops = row["docs_per_ms"] * 1000 * row["flops_per_doc"] / 1e12
        transformer = models[name]["model"] in TRANSFORMERS
        share = f"{100 * flops / peaks[precision]:.1f} %" if transformer and precision in peaks else "–"
        flops = f"{flops:.2f}" if transformer else "–"
        lines.append(f"| {name} | {_cell(paper)} | {_cell(target)} | {precision} | {row['batch']} "
                     f"| {row['docs_per_ms']:.1f} | {_cell(row['docs_per_ms'] / paper if paper else None)} "
                     f"| {'–' if target is None else 'yes' if row['docs_per_ms'] >= target else 'no'} "
                     f"| {_cell(compiled.get((name, precision)))} | {flops} | {share} "
                     f"| {_cell(train.get((name, precision)), 2)} | {_cell(row['peak_mb'], 0)} |")
    lines += ["", f"Peak TFLOP/s of the {device_name} used for the shares: "
              + (", ".join(f"{key} {value:g}" for key, value in peaks.items()) or "unknown (--peak-tflops)")
              + ". FLOPs count matrix products and attention (torch.utils.flop_counter), so a share is reported for "
              "the transformer models only (the others' kernel pooling and convolutions' surroundings are not "
              "counted).", "", "Sweep (docs/ms per batch size):", "",
              "| model | precision | batch | docs/ms | peak MB |", "|---|---|---:|---:|---:|"]
    lines += [f"| {row['model']} | {row['precision']} | {row['batch']} | {row['docs_per_ms']:.2f} "
              f"| {_cell(row['peak_mb'], 0)} |" for row in results["sweep"]]
    notes = results["note"] + results["error"]
    return lines + ([""] + [f"- {note}" for note in notes] if notes else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=REPO / "config/paper/tkl.yaml")
    parser.add_argument("--out", type=Path, required=True, help="Markdown report (raw rows beside it as .json)")
    parser.add_argument("--device", default="cuda", help="cuda[:n] or cpu")
    parser.add_argument("--quick", action="store_true", help="tiny settings that check the script (e.g. on a CPU)")
    parser.add_argument("--models", help="comma-separated names of the config's efficiency models (default: all)")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated: fp32, bf16, tf32")
    parser.add_argument("--compile", default="", help="models to measure through torch.compile too ('all')")
    parser.add_argument("--compile-mode", default="default", help="torch.compile mode (e.g. reduce-overhead)")
    parser.add_argument("--time-limit", type=float, help="seconds for every measurement (default 420; quick 90)")
    parser.add_argument("--threads", type=int, help="torch threads (default: the config's setup)")
    parser.add_argument("--peak-tflops", help="e.g. fp32=67,bf16=989 (default: the data sheet of a known GPU)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench/gpu_efficiency.py: no CUDA device (on a CPU: --device cpu --quick)")
    efficiency = yaml.safe_load(args.config.read_text())["neural"]["efficiency"]
    setup = dict(efficiency["setup"])
    models = {name: dict(settings) for name, settings in efficiency["models"].items()
              if not args.models or name in args.models.split(",")}
    if args.quick:
        setup.update(dim=QUICK["dim"], vocab=QUICK["vocab"], train_batch=QUICK["train_batch"], threads=1)
        for settings in models.values():
            settings["doc_length"] = min(settings.get("doc_length", setup["doc_length"]), QUICK["max_doc_length"])
            settings.pop("train_batch", None)
    if args.threads:
        setup["threads"] = args.threads
    options = {"device": args.device, "quick": args.quick, "precisions": args.precisions.split(","),
               "compile": [name for name in args.compile.split(",") if name], "compile_mode": args.compile_mode,
               "repeats": 1 if args.quick else 3, "min_seconds": 0.0 if args.quick else 0.3}
    from rankstudy.text.study_encoder import random_bert

    started, replaced = time.time(), []
    with tempfile.TemporaryDirectory() as tmp:
        for name, settings in models.items():
            wanted = settings.pop("random_encoder", None)  # the config's own random BERT (rankstudy.efficiency)
            if wanted or ("encoder" in settings and not Path(settings["encoder"]).is_dir()):
                size = QUICK["bert"] if args.quick else (wanted or BERT_BASE)
                settings["encoder"] = random_bert(Path(tmp) / name, **size)
                replaced.append(f"{name} (random, {size['layers']} layers of {size['hidden']})")
        results = run_models(models, setup, options, args.time_limit or (90 if args.quick else 420))
    device_name, peaks = _peaks(device, args.peak_tflops)
    header = [f"# {args.config.relative_to(REPO) if args.config.is_relative_to(REPO) else args.config}: "
              f"re-ranking throughput on {device_name}" + (" (--quick: a check of the script, not a measurement)"
                                                           if args.quick else ""), "",
              f"`python bench/gpu_efficiency.py {' '.join(sys.argv[1:])}`; torch {torch.__version__}; setup {setup} "
              "(batch: the sweep's instead); "
              f"{time.time() - started:.0f} s." + (f" Encoders: {', '.join(replaced)}." if replaced else "")]
    lines = report(results, models, options["precisions"], device_name, peaks, header)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps({"device": device_name, "setup": setup, **results}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
