"""The Margin-MSE teachers of config/msmarco-passages.yaml on the test years: each teacher (its vectors of the pool,
rule teacher_vectors) re-scores each test folder's BM25 top 100; nDCG@10 against the folder's full judgments.

Run after the config's teacher jobs, from the run's folder:
    python bench/teachers.py --vectors teachers/msmarco-train --triples train/msmarco-train/triples.tsv \
        ../shared/data/trec-dl20-passage-top100 ../shared/data/trec-dl21-passage-top100
The teachers are chosen on validation (train/msmarco-train/teacher.NAME.json), never on these numbers; they say
how far above BM25 a student could get. The ensemble is weighted as rule teacher_triples weighs it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import ir_measures

from rankstudy.formats import read_queries, read_run
from rankstudy.train import teachers as tt
from rankstudy.train.examples import read_triples

TEACHERS = {"minilm": tt.TeacherConfig(kind="dense", encoder="minilm", scale=20.0),
            "splade": tt.TeacherConfig(kind="splade", encoder="splade-tiny")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=Path, required=True, help="the teachers' vectors folder of the pool")
    parser.add_argument("--triples", type=Path, required=True, help="the training triples (the ensemble's weights)")
    parser.add_argument("folders", nargs="+", type=Path, help="TREC DL folders (queries.tsv, bm25.run, qrels.full.txt)")
    args = parser.parse_args()
    pool = {name: (tt.load_vectors(args.vectors / name / "queries"), tt.load_vectors(args.vectors / name / "documents"))
            for name in TEACHERS}
    weights = tt.ensemble_weights([tt.Member(*pool[name], cfg.scale) for name, cfg in TEACHERS.items()],
                                  read_triples(args.triples))
    print("| folder | teacher | nDCG@10 |\n|---|---|---:|")
    for folder in args.folders:
        queries, run = read_queries(folder / "queries.tsv"), read_run(folder / "bm25.run")
        members = {name: tt.Member(tt.encode(cfg, queries, cfg.query_max_length), pool[name][1], cfg.scale)
                   for name, cfg in TEACHERS.items()}
        ensemble = [tt.Member(m.queries, m.documents, w) for m, w in zip(members.values(), weights)]
        qrels = list(ir_measures.read_trec_qrels(str(folder / "qrels.full.txt")))
        pairs = [(qid, docid) for qid in run if qid in queries for docid, _ in run[qid]]
        for name, teacher in [*((n, tt.Teacher([m])) for n, m in members.items()), ("ensemble", tt.Teacher(ensemble))]:
            scored = [ir_measures.ScoredDoc(q, d, float(s)) for (q, d), s in zip(pairs, teacher.pair_scores(pairs))]
            value = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, scored)[ir_measures.nDCG @ 10]
            print(f"| {folder.name} | {name} | {value:.4f} |", flush=True)


if __name__ == "__main__":
    main()
