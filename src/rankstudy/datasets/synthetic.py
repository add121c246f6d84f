"""The embedded synthetic dataset: deterministic from one seed, in the study's layout.

Generative story (docs/synthetic.md has the long version):

1. *Vocabulary.* Pseudo-words made of consonant-vowel syllables (no English stop word, no
   suffix Porter would strip, one token for BlingFire and Lucene), drawn from the seed alone so
   both flavours share one language. Three disjoint pools:
   filler words with Zipf frequencies, *concepts* that each have 1..``max_forms`` surface
   forms (synonyms), and topical *context words*.
2. *Topics.* A query is a topic: 2-4 concepts, each written in one chosen form (the query
   text), plus ``context_words_per_topic`` context words that co-occur with the concepts in
   relevant texts (what lets embeddings learn that the forms mean the same).
3. *Documents.* Every document is filler text (with occasional random concept mentions) of a
   log-normal length, holding one *evidence span* at a uniformly random position.
   - Relevant documents (``n ~ min(max, floor(U^(-1/alpha)))`` per query: 1 to many, heavy
     tail) carry the query topic's evidence. Grade 3: every concept 2-3 times and many
     context words; grade 2: every concept once, some context; grade 1: only part of the
     concepts. Each document names each concept with one form, which differs from the
     query's with probability ``synonym_rate`` (lexical mismatch).
   - Hard negatives carry another topic's evidence, plus the query's own words scattered
     one by one over the whole text (the query words, out of context).
   - Background documents carry some other topic's evidence.
   Any concept mention (in evidence or noise) is followed, with probability
   ``association_rate``, by one of the concept's ``concept_associates`` associated words: all
   forms of a concept share neighbours, as real synonyms do.
4. *Judgments.* ``train``: every relevant document (dense, grades 1-3). ``dev``: one
   relevant document per query, the rest unjudged (sparse, MS MARCO-dev-like). ``test``:
   every relevant document with its grade, the hard negatives and random documents as 0
   (dense, TREC-DL-like).

``truth.json`` records the concept forms, each query's concepts and expansion, and each
relevant document's grade and evidence position, for tests and analysis.

``export`` streams: texts are spooled to a scratch file as they are generated and read back in
shuffled order, so memory holds a few integers per document, never the texts (docs/streaming.md).
``generate`` returns the same dataset in memory (for tests and small data).
"""

from __future__ import annotations

import array
import dataclasses
import json
import logging
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol, Sequence

import numpy as np

from rankstudy import formats
from rankstudy.atomic import atomic_path
from rankstudy.config import from_dict

log = logging.getLogger(__name__)

CONSONANTS = "bdfgklmnprtvz"
VOWELS = "aiou"
SPLITS = ("train", "dev", "test")


@dataclass
class LengthConfig:
    """Log-normal document length in tokens, clipped to [min, max]."""

    median: float = 60.0
    sigma: float = 0.35
    min: int = 25
    max: int = 200

    def __post_init__(self) -> None:
        if not (0 < self.min <= self.median <= self.max) or self.sigma < 0:
            raise ValueError("length: need 0 < min <= median <= max and sigma >= 0")


@dataclass
class RelevantConfig:
    """Relevant documents per query: min(max, floor(U^(-1/tail_exponent))), U ~ Uniform(0, 1]."""

    tail_exponent: float = 1.0
    max: int = 100

    def __post_init__(self) -> None:
        if self.tail_exponent <= 0 or self.max < 1:
            raise ValueError("relevant: need tail_exponent > 0 and max >= 1")


@dataclass
class SyntheticConfig:
    flavour: str = "passage"
    train_queries: int = 1000
    dev_queries: int = 200
    test_queries: int = 100
    concepts: int = 2000
    max_forms: int = 3
    filler_vocabulary: int = 20000
    zipf_exponent: float = 1.0
    context_vocabulary: int = 6000
    context_words_per_topic: int = 8
    concepts_per_query: list[int] = field(default_factory=lambda: [2, 4])
    synonym_rate: float = 0.6
    concept_noise: float = 0.04
    concept_associates: int = 2
    association_rate: float = 0.7
    relevant: RelevantConfig = field(default_factory=RelevantConfig)
    grade_weights: list[float] = field(default_factory=lambda: [0.45, 0.35, 0.2])
    hard_negatives_per_query: int = 2
    background_documents: int = 2000
    length: LengthConfig = field(default_factory=LengthConfig)
    evidence_length: list[int] = field(default_factory=lambda: [14, 24])
    test_judged_negatives: int = 10

    def __post_init__(self) -> None:
        if self.flavour not in ("passage", "document"):
            raise ValueError(f"flavour must be 'passage' or 'document', not {self.flavour!r}")
        if min(self.train_queries, self.dev_queries, self.test_queries) < 1:
            raise ValueError("every split needs at least one query")
        low, high = self.concepts_per_query
        if not 1 <= low <= high:
            raise ValueError("concepts_per_query must be [min, max] with 1 <= min <= max")
        if not (0 <= self.synonym_rate <= 1 and 0 <= self.concept_noise < 1 and 0 <= self.association_rate <= 1):
            raise ValueError("synonym_rate, concept_noise and association_rate must be probabilities")
        if not 1 <= self.concept_associates <= self.context_vocabulary:
            raise ValueError("concept_associates must be between 1 and context_vocabulary")
        if len(self.grade_weights) != 3 or min(self.grade_weights) < 0 or sum(self.grade_weights) <= 0:
            raise ValueError("grade_weights: three non-negative weights for grades 1, 2, 3")
        if not 1 <= self.evidence_length[0] <= self.evidence_length[1] <= self.length.min:
            raise ValueError("evidence_length must be [min, max] with max <= length.min")
        if self.max_forms < 1 or self.concepts < high or self.context_vocabulary < self.context_words_per_topic:
            raise ValueError("vocabulary too small for the configured topics")


@dataclass
class Topic:
    concepts: np.ndarray  # concept ids
    query_forms: np.ndarray  # word id used by the query for each concept
    context: np.ndarray  # context word ids


@dataclass
class SyntheticDataset:
    docs: list[tuple[str, str]]
    queries: dict[str, dict[str, str]]  # split -> qid -> text
    qrels: dict[str, dict[str, dict[str, int]]]  # split -> qid -> docid -> grade
    truth: dict[str, Any]

    def write(self, out: Path) -> None:
        """Write the dataset directory atomically (all files or none)."""
        with atomic_path(out, directory=True) as tmp:
            formats.write_collection(tmp / "collection.tsv", self.docs)
            _write_judgments(tmp, self.queries, self.qrels, self.truth)


def _write_judgments(directory: Path, queries: Mapping[str, Mapping[str, str]],
                     qrels: Mapping[str, Mapping[str, Mapping[str, int]]], truth: Mapping[str, Any]) -> None:
    """Queries and qrels of every split, and truth.json."""
    for split in SPLITS:
        formats.write_queries(directory / f"queries.{split}.tsv", queries[split])
        formats.write_qrels(directory / f"qrels.{split}.txt", qrels[split])
    (directory / "truth.json").write_text(json.dumps(truth), encoding="utf-8")


class _TextSink(Protocol):
    """Where generated texts go, in generation order (a list, or a ``_Spool``)."""

    def append(self, text: str) -> None: ...

    def __len__(self) -> int: ...


class _Spool:
    """Texts appended to a scratch file and read back in any order: memory keeps one offset per text."""

    def __init__(self, path: Path):
        self.path = path
        self._out = open(path, "wb")
        self._offsets = array.array("q", [0])

    def append(self, text: str) -> None:
        data = text.encode("utf-8")
        self._out.write(data)
        self._offsets.append(self._offsets[-1] + len(data))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def texts(self, order: Sequence[int]) -> Iterator[str]:
        """The texts in ``order`` (indices in generation order)."""
        self._out.close()
        offsets = np.frombuffer(self._offsets, dtype=np.int64)
        with open(self.path, "rb") as spool:
            for index in order:
                start, end = int(offsets[index]), int(offsets[index + 1])
                spool.seek(start)
                yield spool.read(end - start).decode("utf-8")

    def close(self) -> None:
        self._out.close()
        self.path.unlink(missing_ok=True)


def _docid(position: int, count: int) -> str:
    """The id of the document written at ``position`` of ``count``: D, zero-padded position."""
    return f"D{position:0{len(str(count))}d}"


class _Vocabulary:
    """Word ids: [filler | concept forms | context words]; strings in ``words``."""

    def __init__(self, cfg: SyntheticConfig, rng: np.random.Generator):
        n_forms = rng.integers(1, cfg.max_forms + 1, size=cfg.concepts)
        self.form_start = cfg.filler_vocabulary + np.concatenate([[0], np.cumsum(n_forms)[:-1]])
        self.n_forms = n_forms
        self.context_start = cfg.filler_vocabulary + int(n_forms.sum())
        self.words = _pseudo_words(self.context_start + cfg.context_vocabulary, rng)
        ranks = np.arange(1, cfg.filler_vocabulary + 1, dtype=np.float64)
        self.filler_cdf = np.cumsum(ranks ** -cfg.zipf_exponent)
        self.filler_cdf /= self.filler_cdf[-1]
        self.all_forms = np.arange(cfg.filler_vocabulary, self.context_start)
        self.concept_of_form = np.repeat(np.arange(cfg.concepts), n_forms)
        self.associates = self.context_start + rng.integers(0, cfg.context_vocabulary,
                                                            size=(cfg.concepts, cfg.concept_associates))

    def forms(self, concept: int) -> np.ndarray:
        return np.arange(self.form_start[concept], self.form_start[concept] + self.n_forms[concept])


def _pseudo_words(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct CV-syllable words; none ends in 'iti' (Porter would shorten it)."""
    syllables = [c + v for c in CONSONANTS for v in VOWELS]
    length = 3
    while len(syllables) ** length < 3 * count:
        length += 1
    chosen: list[str] = []
    seen: set[str] = set()
    while len(chosen) < count:
        for code in rng.choice(len(syllables) ** length, size=2 * (count - len(chosen)), replace=False):
            word = "".join(syllables[(int(code) // len(syllables) ** k) % len(syllables)] for k in range(length))
            if word not in seen and not word.endswith("iti"):
                seen.add(word)
                chosen.append(word)
                if len(chosen) == count:
                    break
    return np.array(chosen, dtype=object)


class _Generator:
    def __init__(self, cfg: SyntheticConfig, seed: int):
        self.cfg = cfg
        # The words depend on the seed only, so passage and document data share one language
        # (a passage-trained model can be applied to documents); everything else on the flavour.
        self.vocab = _Vocabulary(cfg, np.random.default_rng([seed]))
        self.rng = np.random.default_rng([seed, zlib.crc32(cfg.flavour.encode())])

    def topic(self) -> Topic:
        cfg, rng = self.cfg, self.rng
        k = int(rng.integers(cfg.concepts_per_query[0], cfg.concepts_per_query[1] + 1))
        concepts = rng.choice(cfg.concepts, size=k, replace=False)
        query_forms = np.array([rng.choice(self.vocab.forms(c)) for c in concepts])
        context = self.vocab.context_start + rng.choice(cfg.context_vocabulary, size=cfg.context_words_per_topic, replace=False)
        return Topic(concepts, query_forms, context)

    def background(self) -> np.ndarray:
        """Filler text of a log-normal length with occasional random concept mentions."""
        cfg, rng = self.cfg, self.rng
        length = int(np.clip(round(rng.lognormal(np.log(cfg.length.median), cfg.length.sigma)), cfg.length.min, cfg.length.max))
        tokens = np.searchsorted(self.vocab.filler_cdf, rng.random(length))
        noisy = rng.random(length) < cfg.concept_noise
        tokens[noisy] = rng.choice(self.vocab.all_forms, size=int(noisy.sum()))
        return tokens

    def document_forms(self, topic: Topic) -> np.ndarray:
        """The form a document uses for each concept: a synonym with probability synonym_rate."""
        chosen = topic.query_forms.copy()
        for i, concept in enumerate(topic.concepts):
            others = self.vocab.forms(concept)
            others = others[others != topic.query_forms[i]]
            if len(others) and self.rng.random() < self.cfg.synonym_rate:
                chosen[i] = self.rng.choice(others)
        return chosen

    def evidence(self, topic: Topic, grade: int, forms: np.ndarray) -> np.ndarray:
        """An evidence span: concept mentions and context words among filler."""
        cfg, rng = self.cfg, self.rng
        span = int(rng.integers(cfg.evidence_length[0], cfg.evidence_length[1] + 1))
        k = len(forms)
        if grade == 3:
            mentions = np.repeat(forms, rng.integers(2, 4, size=k))
            n_context = max(1, cfg.context_words_per_topic * 3 // 4)
        elif grade == 2:
            mentions, n_context = forms, max(1, cfg.context_words_per_topic // 3)
        else:
            keep = max(1, k // 2) if k > 1 else 1
            mentions, n_context = rng.choice(forms, size=keep, replace=False), 1
        context = rng.choice(topic.context, size=min(n_context, len(topic.context)), replace=False)
        content = np.concatenate([mentions, context])[:span]
        tokens = np.searchsorted(self.vocab.filler_cdf, rng.random(span))
        tokens[rng.choice(span, size=len(content), replace=False)] = content
        return tokens

    def document(self, evidence: np.ndarray) -> tuple[np.ndarray, int]:
        """Background text with ``evidence`` at a uniformly random position; returns (tokens, start)."""
        tokens = self.background()
        start = int(self.rng.integers(0, len(tokens) - len(evidence) + 1))
        tokens[start : start + len(evidence)] = evidence
        self.associate(tokens)
        return tokens, start

    def associate(self, tokens: np.ndarray) -> None:
        """After a concept mention, with probability association_rate, one of the concept's
        associated words replaces the next filler word: every form of a concept shares these
        neighbours, so distributional embeddings can learn that synonyms mean the same."""
        vocab, rng = self.vocab, self.rng
        is_form = (tokens[:-1] >= self.cfg.filler_vocabulary) & (tokens[:-1] < vocab.context_start)
        positions = np.flatnonzero(is_form & (tokens[1:] < self.cfg.filler_vocabulary)
                                   & (rng.random(len(tokens) - 1) < self.cfg.association_rate))
        concepts = vocab.concept_of_form[tokens[positions] - self.cfg.filler_vocabulary]
        tokens[positions + 1] = vocab.associates[concepts, rng.integers(0, self.cfg.concept_associates, len(positions))]

    def text(self, tokens: np.ndarray) -> str:
        return " ".join(self.vocab.words[tokens])


def relevant_count(rng: np.random.Generator, cfg: RelevantConfig) -> int:
    """Discrete Pareto: P(n >= k) = k^(-tail_exponent), capped at cfg.max."""
    u = 1.0 - rng.random()  # in (0, 1]
    return int(min(cfg.max, np.floor(u ** (-1.0 / cfg.tail_exponent))))


def generate(cfg: SyntheticConfig, seed: int) -> SyntheticDataset:
    """The whole dataset in memory."""
    texts: list[str] = []
    queries, qrels, truth, order = _generate(cfg, seed, texts)
    docs = [(_docid(position, len(texts)), texts[index]) for position, index in enumerate(order.tolist())]
    return SyntheticDataset(docs, queries, qrels, truth)


def _generate(cfg: SyntheticConfig, seed: int, texts: _TextSink) -> tuple[
        dict[str, dict[str, str]], dict[str, dict[str, dict[str, int]]], dict[str, Any], np.ndarray]:
    """Generate every text into ``texts``; return queries, qrels, truth and the shuffled order
    (document ``order[p]`` of ``texts`` is written at position ``p``, id ``_docid(p, len(texts))``)."""
    gen = _Generator(cfg, seed)
    rng = gen.rng
    grade_p = np.asarray(cfg.grade_weights, dtype=np.float64) / sum(cfg.grade_weights)
    queries: dict[str, dict[str, str]] = {split: {} for split in SPLITS}
    relevant: dict[str, dict[int, dict[str, int]]] = {}  # qid -> doc index -> info
    hard: dict[str, list[int]] = {}
    truth_queries: dict[str, Any] = {}
    qid_counter = 0
    for split in SPLITS:
        for _ in range(getattr(cfg, f"{split}_queries")):
            qid_counter += 1
            qid = str(qid_counter)
            topic = gen.topic()
            order = rng.permutation(len(topic.concepts))
            queries[split][qid] = gen.text(topic.query_forms[order])
            truth_queries[qid] = {
                "split": split,
                "concepts": topic.concepts.tolist(),
                "expansion": " ".join(gen.vocab.words[np.concatenate([gen.vocab.forms(c) for c in topic.concepts])]),
            }
            relevant[qid] = {}
            for _ in range(relevant_count(rng, cfg.relevant)):
                grade = int(rng.choice([1, 2, 3], p=grade_p))
                forms = gen.document_forms(topic)
                tokens, start = gen.document(gen.evidence(topic, grade, forms))
                relevant[qid][len(texts)] = {
                    "grade": grade,
                    "evidence_start": start,
                    "length": len(tokens),
                    "synonyms": int((forms != topic.query_forms).sum()),
                }
                texts.append(gen.text(tokens))
            hard[qid] = []
            for _ in range(cfg.hard_negatives_per_query):
                other = gen.topic()
                tokens, _ = gen.document(gen.evidence(other, 3, gen.document_forms(other)))
                words = np.repeat(topic.query_forms, rng.integers(1, 3, size=len(topic.query_forms)))
                tokens[rng.choice(len(tokens), size=len(words), replace=False)] = words
                hard[qid].append(len(texts))
                texts.append(gen.text(tokens))
    for _ in range(cfg.background_documents):
        other = gen.topic()
        tokens, _ = gen.document(gen.evidence(other, 3, gen.document_forms(other)))
        texts.append(gen.text(tokens))

    # Shuffle so that a document's id says nothing about its role.
    count = len(texts)
    order = rng.permutation(count)
    position = np.empty(count, dtype=np.int64)
    position[order] = np.arange(count)

    def docid_of(index: int) -> str:
        return _docid(int(position[index]), count)

    qrels: dict[str, dict[str, dict[str, int]]] = {split: {} for split in SPLITS}
    truth_relevant: dict[str, Any] = {}
    for split in SPLITS:
        for qid in queries[split]:
            judged = {docid_of(i): info["grade"] for i, info in relevant[qid].items()}
            truth_relevant[qid] = {docid_of(i): info for i, info in relevant[qid].items()}
            if split == "dev":
                keep = rng.choice(sorted(judged))
                judged = {keep: judged[keep]}
            elif split == "test":
                negatives = [docid_of(i) for i in hard[qid]]
                negatives += [docid_of(i) for i in rng.choice(count, size=cfg.test_judged_negatives, replace=False)]
                for docid in negatives:
                    judged.setdefault(docid, 0)
            qrels[split][qid] = judged
    truth = {
        "seed": seed,
        "config": dataclasses.asdict(cfg),
        "concept_forms": [gen.vocab.words[gen.vocab.forms(c)].tolist() for c in range(cfg.concepts)],
        "queries": truth_queries,
        "relevant": truth_relevant,
        "hard_negatives": {qid: [docid_of(i) for i in idx] for qid, idx in hard.items()},
    }
    log.info("synthetic %s: %d documents, %d/%d/%d queries", cfg.flavour, count,
             *(len(queries[s]) for s in SPLITS))
    return queries, qrels, truth, order


def export(name: str, settings: Mapping[str, Any], out: Path, seed: int) -> None:
    """Write the dataset into directory ``out``, streaming: the same bytes as ``generate(...).write``."""
    cfg = from_dict(SyntheticConfig, settings, f"datasets.{name}.synthetic")
    with atomic_path(out, directory=True) as tmp:
        spool = _Spool(tmp / ".texts.spool")
        try:
            queries, qrels, truth, order = _generate(cfg, seed, spool)
            count = len(spool)
            docs = ((_docid(position, count), text) for position, text in enumerate(spool.texts(order)))
            formats.write_collection(tmp / "collection.tsv", docs)
        finally:
            spool.close()
        _write_judgments(tmp, queries, qrels, truth)
