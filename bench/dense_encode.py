"""Benchmark: pyserini's document encoder over a collection in file order against length-sorted windows.

`rankstudy.dense.build_index` sorts each window of SORT_WINDOW batches by text length before encoding, since
pyserini pads a batch to its longest document. This script builds the same collection's index both ways, one
after the other in one process (and the reverse order again, so that neither way always runs warm), and
reports docs/s and the largest difference between the two indexes' vectors of a document:

    python bench/dense_encode.py --collection resources/data/trec-dl20-passage-top100/collection.tsv \\
        --docs 1024 --out bench/results/dense_encode.md
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from itertools import islice
from pathlib import Path

import numpy as np
import torch

from rankstudy import dense
from rankstudy.cpu_isa import cpu_model
from rankstudy.formats import iter_collection


def encode(collection: Path, config: dense.DenseConfig, out: Path, sort_window: int) -> tuple[float, dict]:
    """Seconds to build the index with windows of ``sort_window`` batches (1: file order within each batch,
    which is unsorted), and the vectors by docid."""
    import faiss

    dense.SORT_WINDOW = sort_window
    start = time.perf_counter()
    dense.build_index(collection, config, out)
    seconds = time.perf_counter() - start
    index = faiss.read_index(str(out / "index"))
    docids = (out / "docid").read_text().split()
    return seconds, {docid: index.reconstruct(i) for i, docid in enumerate(docids)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=1024, help="the collection's first DOCS passages")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = dense.DenseConfig(encoder=args.encoder, pooling="mean", l2_norm=True)
    sorted_window = dense.SORT_WINDOW
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "collection.tsv"
        sample.write_text("".join(f"{docid}\t{text}\n" for docid, text in
                                  islice(iter_collection(args.collection), args.docs)))
        times: dict[str, list[float]] = {"file order": [], "length-sorted windows": []}
        vectors = {}
        for repeat, ways in enumerate([("file order", "length-sorted windows"),
                                       ("length-sorted windows", "file order")]):
            for way in ways:
                window = 1 if way == "file order" else sorted_window
                seconds, vectors[way] = encode(sample, config, Path(tmp) / f"{way}{repeat}", window)
                times[way].append(seconds)
    docs = len(vectors["file order"])
    gap = max(float(np.abs(vectors["file order"][d] - vectors["length-sorted windows"][d]).max())
              for d in vectors["file order"])
    rate = {way: docs / min(seconds) for way, seconds in times.items()}
    lines = [f"# Dense index encoding: file order against length-sorted windows ({args.encoder})", "",
             f"Collection `{args.collection}`, first {docs} documents, batch {config.batch_size}, up to "
             f"{config.max_length} word pieces, {torch.get_num_threads()} torch thread(s), {cpu_model()} ({os.cpu_count()} cores); best of 2 "
             "builds each, interleaved.", "",
             "| order | docs/s |", "|---|---:|"]
    lines += [f"| {way} ({sorted_window if way != 'file order' else 1} batch windows) | {value:.1f} |"
              for way, value in rate.items()]
    lines += ["", f"Speed-up: {rate['length-sorted windows'] / rate['file order']:.2f}x. Largest difference of a "
              f"document's vector between the two indexes: {gap:.1e}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
