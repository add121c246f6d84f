"""Benchmark: the efficiency measurement (rankstudy.efficiency, the docs/ms column of the TK and TKL tables)
of a paper config, on a CUDA device — what a cluster job's ``efficiency`` rule reports there.

An encoder the machine does not hold (e.g. the paper config's downloaded bert-base-uncased) is replaced by a
randomly initialised BERT of the same dimensions (12 layers, 768 hidden, 12 heads, vocabulary 30,522): speed
does not depend on the weights.

    python bench/gpu_efficiency.py --config config/paper/tkl.yaml --out bench/results/gpu_efficiency.md
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import yaml

from rankstudy.efficiency import measure_models
from rankstudy.text.study_encoder import StudyEncoderConfig, build_bert, wordpiece_tokenizer


def random_bert_base(out: Path) -> Path:
    """A random BERT-base-sized encoder directory (config, weights, a WordPiece tokenizer)."""
    from transformers import BertModel

    tokenizer = wordpiece_tokenizer(iter(["a b c d e f g h"] * 4), 100)
    config = StudyEncoderConfig(layers=12, heads=12, intermediate_size=3072, max_positions=512)
    BertModel(build_bert(config, 30522, 768)).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("config/paper/tkl.yaml"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/gpu_efficiency.py: no CUDA device")
    efficiency = yaml.safe_load(args.config.read_text())["neural"]["efficiency"]
    models, replaced = dict(efficiency["models"]), []
    with tempfile.TemporaryDirectory() as tmp:
        for name, settings in models.items():
            if "encoder" in settings and not Path(settings["encoder"]).is_dir():
                models[name] = {**settings, "encoder": str(random_bert_base(Path(tmp) / name))}
                replaced.append(f"{name} ({settings['encoder']})")
        table = measure_models(models, efficiency["setup"], devices=["cuda"])
    columns = ["model", "docs_per_ms", "train_steps_per_s", "peak_memory_mb"]
    lines = [f"# {args.config}: efficiency on {torch.cuda.get_device_name()}",
             "", f"`python bench/gpu_efficiency.py --config {args.config}`; torch {torch.__version__}; setup "
             f"{efficiency['setup']} (a model entry may override batch, doc_length, train_batch)."
             + (f" Random weights, same dimensions: {', '.join(replaced)}." if replaced else ""), "",
             "| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]
    for row in table.itertuples():
        lines.append(f"| {row.model} | {row.docs_per_ms:.1f} | {row.train_steps_per_s:.2f} "
                     f"| {row.peak_memory_mb:.0f} |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
