"""How well word vectors know the synthetic language's synonyms (docs/socialformer.md, "The word vectors").

The synthetic generator writes each concept in one of several surface forms (``truth.json``,
``concept_forms``); a relevant document mostly names the query's concepts in another form than the
query (docs/synthetic.md). For the first ``--concepts`` concepts with two forms in the vocabulary:
the rank of the second form among all concept forms by cosine to the first (0 = nearest), and the
AUC of synonym pairs against random pairs of forms. The same seed picks the random pairs for every
file, so files compare side by side.

    python bench/synonymy.py --dataset data/synthetic-passage --vocab text/w2v/vocab text/w2v/embeddings.npy [...]

Writes a Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rankstudy.text.embeddings import load_embeddings
from rankstudy.text.vocab import Vocabulary


def synonymy(vectors: np.ndarray, vocab: Vocabulary, concept_forms: list[list[str]], concepts: int,
             random_pairs: int = 2000, seed: int = 0) -> dict[str, float]:
    """Median synonym rank, synonym-vs-random AUC and mean synonym cosine of ``vectors``."""
    forms = [form for group in concept_forms for form in group if vocab.id(form) > 1]
    unit = vectors[[vocab.id(form) for form in forms]]
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    row = {form: index for index, form in enumerate(forms)}
    ranks, cosines = [], []
    for group in concept_forms[:concepts]:
        group = [form for form in group if form in row]
        if len(group) < 2:
            continue
        similarity = unit @ unit[row[group[0]]]
        cosines.append(similarity[row[group[1]]])
        ranks.append(int((similarity > cosines[-1]).sum()) - 1)  # minus the form itself
    rng = np.random.default_rng(seed)
    a, b = rng.integers(len(forms), size=(2, random_pairs))
    random_cosines = (unit[a] * unit[b]).sum(axis=1)
    auc = float((np.asarray(cosines)[:, None] > random_cosines[None, :]).mean())
    return {"pairs": len(ranks), "median rank": float(np.median(ranks)), "AUC": auc,
            "synonym cosine": float(np.mean(cosines))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, type=Path, help="a synthetic dataset directory (truth.json)")
    parser.add_argument("--vocab", required=True, type=Path, help="the embeddings' vocabulary directory")
    parser.add_argument("--concepts", type=int, default=600, help="concepts measured (the first N)")
    parser.add_argument("embeddings", nargs="+", type=Path, help="embeddings.npy files of that vocabulary")
    args = parser.parse_args()
    vocab = Vocabulary.load(args.vocab)
    concept_forms = json.loads((args.dataset / "truth.json").read_text(encoding="utf-8"))["concept_forms"]
    print(f"Synonyms of {args.dataset.name}'s first {args.concepts} concepts: rank of the second form among "
          "all concept forms by cosine to the first (0 = nearest), AUC against random pairs of forms.\n")
    print("| embeddings | pairs | median rank | AUC | synonym cosine |\n|---|---|---|---|---|")
    for path in args.embeddings:
        result = synonymy(load_embeddings(path, vocab), vocab, concept_forms, args.concepts)
        print(f"| {path} | {result['pairs']} | {result['median rank']:.0f} | {result['AUC']:.3f} | "
              f"{result['synonym cosine']:.3f} |")


if __name__ == "__main__":
    main()
