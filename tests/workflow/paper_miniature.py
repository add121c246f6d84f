"""Miniature inputs of the paper configs (config/paper/*.yaml), built from a seed, nothing downloaded.

The paper configs name ir_datasets ids, a GloVe text file and a bert-base-uncased directory. A miniature
(config/paper/miniature/NAME.yaml, given after the paper config) shrinks only sizes; these builders make
the files the paper config reads, in the real formats, small:

- ``irds_home``: an IR_DATASETS_HOME holding the files ir_datasets reads for each id, under the names
  it expects. ir_datasets takes a download's ``cache_path`` (etc/downloads.json) or a ``Cache`` target as
  present when the file exists (the md5 is checked only while downloading), so nothing is fetched; the
  handlers (TSV, TREC docs, gzip, qrels, scoreddocs parsers, filters like ``judged``) run as on real data.
  Robust04's documents (TREC disks 4 and 5, licensed) have no download: ir_datasets reads a local copy under
  ``disks45/corpus`` through path globs and checks their file count, which the miniature's files match.
- ``glove_file``: ``word v1 ... v300`` a line, as glove.42B.300d.txt.
- ``bert_directory``: a random BERT of small size saved with ``save_pretrained``, with bert-base-uncased's
  vocab.txt layout ([PAD] 0, [unused0..98], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103) and its tokenizer
  (uncased WordPiece).
- ``ance_directory``: a random small ANCE (RoBERTa, a 768-d head and LayerNorm) with a byte-level BPE tokenizer,
  in the layout pyserini's ANCE encoders load.

The text comes from rankstudy's synthetic generator (pseudo-words, graded judgments); the ids look like
the real ones (MS MARCO passage ids are integers, document ids ``D<n>``; Robust04's topics are real topic ids
of its five folds, its documents' DOCNOs those of FBIS, FR94, FT and LA Times).
"""

from __future__ import annotations

import gzip
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rankstudy.datasets.synthetic import LengthConfig, RelevantConfig, SyntheticConfig, generate

GLOVE_DIM = 300


@dataclass
class Collection:
    """A miniature test collection: documents, and per split its queries and graded qrels."""
    docs: list[tuple[str, str]]
    queries: dict[str, dict[str, str]]
    qrels: dict[str, dict[str, dict[str, int]]]

    def words(self) -> set[str]:
        texts = [text for _, text in self.docs] + [text for split in self.queries.values() for text in split.values()]
        return {word for text in texts for word in text.split()}


def synthetic_collection(flavour: str, seed: int, docid=lambda i: str(i), qid_start: int = 1000,
                         queries=(40, 12, 8), background: int = 150, length: LengthConfig | None = None,
                         relevant: RelevantConfig | None = None) -> Collection:
    """The synthetic generator's data, renamed to real-looking ids (query ids are integers from ``qid_start``)."""
    config = SyntheticConfig(flavour=flavour, train_queries=queries[0], dev_queries=queries[1], test_queries=queries[2],
                             concepts=200, filler_vocabulary=2000, context_vocabulary=600, background_documents=background,
                             relevant=relevant or RelevantConfig(max=5),
                             length=length or LengthConfig(median=40, min=25, max=80),
                             test_judged_negatives=6)
    data = generate(config, seed=seed)
    docids = {old: docid(i) for i, (old, _) in enumerate(data.docs)}
    qids = {}
    for split in ("train", "dev", "test"):
        for old in data.queries[split]:
            qids[old] = str(qid_start + len(qids))
    queries_out = {split: {qids[q]: text for q, text in data.queries[split].items()} for split in data.queries}
    qrels_out = {split: {qids[q]: {docids[str(d)]: int(g) for d, g in judged.items()} for q, judged in data.qrels[split].items()}
                 for split in data.qrels}
    return Collection([(docids[old], text) for old, text in data.docs], queries_out, qrels_out)


def candidates(collection: Collection, split: str, depth: int, seed: int) -> dict[str, list[tuple[str, float]]]:
    """A split's 'official' candidate lists: judged documents first mixed with others, descending scores."""
    rng = random.Random(seed)
    ids = [docid for docid, _ in collection.docs]
    lists = {}
    for qid in collection.queries[split]:
        judged = list(collection.qrels[split].get(qid, {}))
        others = [docid for docid in rng.sample(ids, min(depth, len(ids))) if docid not in judged]
        ranking = (judged + others)[:depth]
        rng.shuffle(ranking)
        lists[qid] = [(docid, round(30.0 - 0.1 * rank, 3)) for rank, docid in enumerate(ranking)]
    return lists


def _write(path: Path, text: str, compress: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def _tsv(rows) -> str:
    return "".join(f"{a}\t{b}\n" for a, b in rows)


def _qrels(qrels: dict[str, dict[str, int]], sep: str = " ", binary: bool = False) -> str:
    return "".join(f"{qid}{sep}0{sep}{docid}{sep}{1 if binary else grade}\n"
                   for qid, judged in qrels.items() for docid, grade in judged.items() if not binary or grade > 0)


def msmarco_passage(home: Path, seed: int) -> Collection:
    """ir_datasets' msmarco-passage: collection, train (judged), dev/small (+ its top 1000), trec-dl-2019."""
    data = synthetic_collection("passage", seed, docid=str, qid_start=1000)
    base = home / "msmarco-passage"
    _write(base / "irds_version.txt", "v2")  # the Migrator's version; another would delete collection.tsv
    _write(base / "collection.tsv", _tsv(data.docs))  # Cache of collectionandqueries.tar.gz's collection.tsv
    _write(base / "train/queries.tsv", _tsv(data.queries["train"].items()))
    _write(base / "train/qrels", _qrels(data.qrels["train"], sep="\t", binary=True))  # qrels.train.tsv: grade 1
    _write(base / "dev/small/queries.tsv", _tsv(data.queries["dev"].items()))
    _write(base / "dev/small/qrels", _qrels(data.qrels["dev"], sep="\t", binary=True))
    # top1000.dev / msmarco-passagetest2019-top1000, as ir_datasets caches them: "qid<TAB>pid", no score
    for split, folder in (("dev", "dev"), ("test", "trec-dl-2019")):
        lists = candidates(data, split, 60, seed)
        _write(base / folder / "ms.run", "".join(f"{qid}\t{docid}\n" for qid, ranking in lists.items()
                                                 for docid, _ in ranking))
    # TREC DL 2019: 200 queries released, 43 judged (the `judged` subset filters); 4 unjudged ones here
    unjudged = {str(9000 + i): f"unjudged query {i}" for i in range(4)}
    _write(base / "trec-dl-2019/queries.tsv", _tsv({**data.queries["test"], **unjudged}.items()))
    _write(base / "trec-dl-2019/qrels", _qrels(data.qrels["test"], sep=" "))  # 2019qrels-pass.txt: graded 0-3
    return data


def msmarco_document(home: Path, seed: int) -> Collection:
    """ir_datasets' msmarco-document: TREC-format documents (url, title, body), train, dev, trec-dl-2019."""
    data = synthetic_collection("document", seed, docid=lambda i: f"D{1000 + i}", qid_start=5000,
                                length=LengthConfig(median=120, sigma=0.8, min=40, max=600))
    base = home / "msmarco-document"
    docs = []
    for docid, text in data.docs:
        words = text.split()
        docs.append(f"<DOC>\n<DOCNO>{docid}</DOCNO>\n<TEXT>\nhttp://example.com/{docid.lower()}\n"
                    f"{' '.join(words[:5])}\n{' '.join(words[5:])}\n</TEXT>\n</DOC>\n")
    _write(base / "collection.tsv.gz", "".join(docs), compress=True)  # msmarco-docs.trec.gz
    for split, folder in (("train", "train"), ("dev", "dev"), ("test", "trec-dl-2019")):
        queries = data.queries[split]
        if split == "test":
            queries = {**queries, **{str(9900 + i): f"unjudged query {i}" for i in range(4)}}
        _write(base / folder / "queries.tsv.gz", _tsv(queries.items()), compress=True)
        if split == "test":
            _write(base / folder / "qrels", _qrels(data.qrels[split]))  # 2019qrels-docs.txt (plain)
        else:
            _write(base / folder / "qrels.gz", _qrels(data.qrels[split], binary=True), compress=True)
        # msmarco-doc*-top100: TREC runs with scores
        lists = candidates(data, split, 40, seed)
        _write(base / folder / "ms.run.gz", "".join(f"{qid} Q0 {docid} {rank + 1} {score} IndriQueryLikelihood\n"
                                                    for qid, ranking in lists.items()
                                                    for rank, (docid, score) in enumerate(ranking)), compress=True)
    return data


# disks45's TrecDocs: the path globs and the file count ir_datasets checks (a RuntimeError, after every document
# was read, when another number of files matches); the miniature's files per glob, summing to that count
DISKS45_FILES = {"FBIS": 490, "FR94": 12 * 35, "FT": 15 * 55, "LATIMES": 560}
DISKS45_FILE_COUNT = 2295
ROBUST04_TOPICS_PER_FOLD = 8
ROBUST04_NO_RELEVANT = "672"  # Robust04's topic without a relevant document: every judgment 0


def _disks45_paths(corpus: Path) -> list[tuple[Path, str]]:
    """The miniature's 2,295 document files under ``corpus`` (ir_datasets' ``disks45/corpus``), laid out as on
    TREC disks 4 and 5 so that ir_datasets' globs match them (``**/FBIS/FB*``, ``**/FR94/??/FR*``,
    ``**/FT/*/FT*``, ``**/LATIMES/LA*``), each with a DOCNO pattern of its source (``{}``: the document's number
    in the file) as FBIS3-10082, FR940104-0-00001, FT911-3 and LA010189-0001 look."""
    paths = []
    for i in range(DISKS45_FILES["FBIS"]):
        paths.append((corpus / "NEWS_data/FBIS" / f"FB{396001 + i}", f"FBIS{3 + i % 2}-{i}{{:02d}}"))
    for i in range(DISKS45_FILES["FR94"]):  # a folder a month, three files a day
        month, day, part = i // 35 + 1, i % 35 // 3 + 1, i % 35 % 3
        paths.append((corpus / "GOVT_data/FR94" / f"{month:02d}" / f"FR94{month:02d}{day:02d}.{part}",
                      f"FR94{month:02d}{day:02d}-{part}-{{:05d}}"))
    for i in range(DISKS45_FILES["FT"]):
        folder = f"FT9{11 + i // 55}"
        paths.append((corpus / "NEWS_data/FT" / folder / f"{folder}_{i % 55 + 1}", f"{folder}-{i % 55 + 1}{{:02d}}"))
    for i in range(DISKS45_FILES["LATIMES"]):  # a file a day of 1989 and 1990
        date = f"{i // 28 % 12 + 1:02d}{i % 28 + 1:02d}{89 + i // (28 * 12)}"
        paths.append((corpus / "NEWS_data/LATIMES" / f"LA{date}", f"LA{date}-{{:04d}}"))
    assert len(paths) == DISKS45_FILE_COUNT
    return paths


def robust04_topics(seed: int, per_fold: int = ROBUST04_TOPICS_PER_FOLD) -> list[str]:
    """``per_fold`` real Robust04 topic ids of each of ir_datasets' five folds (Huston & Croft), so that every
    ``disks45/nocr/trec-robust-2004/foldK`` subset holds topics; a fold's ids sorted, drawn from its
    301-450 and 601-700 topics alike, fold 4's with topic 672 (judged, no document relevant: ROBUST04_NO_RELEVANT)."""
    from ir_datasets.datasets.disks45 import ROBUST04_FOLDS

    rng = random.Random(seed)
    topics = []
    for fold in sorted(ROBUST04_FOLDS):
        chosen = set(ROBUST04_FOLDS[fold]) & {ROBUST04_NO_RELEVANT}
        chosen |= set(rng.sample(sorted(set(ROBUST04_FOLDS[fold]) - chosen), per_fold - len(chosen)))
        topics += sorted(chosen, key=int)
    return topics


def _topic(qid: str, title: str, rng: random.Random, words: list[str]) -> str:
    """A topic as in 04.testset (TREC topic format: num, title, desc and narr, each tag opening its field)."""
    description = " ".join(rng.sample(words, 12))
    return (f"<top>\n\n<num> Number: {qid}\n\n<title> {title}\n\n<desc> Description:\n\n{description}\n\n"
            f"<narr> Narrative:\n\nA relevant document discusses {title}.\n\n</top>\n\n")


def disks45(home: Path, seed: int) -> Collection:
    """ir_datasets' disks45/nocr/trec-robust-2004 and its five folds: TREC disks 4 and 5 as a local copy
    (``disks45/corpus``, the ``docs`` entry's instructions: 2,295 files of TREC SGML documents under the
    layout its globs match), the topics (``04.testset.gz``, gzipped TREC topics) and the qrels
    (``qrels.robust2004.txt``, graded 0-2).

    The synthetic generator's test split (dense judgments: every relevant document, hard negatives and random
    documents as 0) renamed to real Robust04 topic ids, ``ROBUST04_TOPICS_PER_FOLD`` of each fold. A title is
    the query's concepts and a word most documents hold, as Robust04's titles ("International Organized
    Crime") match thousands of its documents: every BM25 list holds the top 300 (choppy.n) the paper truncates."""
    qids = robust04_topics(seed)
    # Robust04 judges tens of relevant documents a topic (a heavy tail): here a median of 10, a third with 40
    # (and background documents enough that each of the 2,295 files holds one or two documents)
    background = 1000
    while True:
        data = synthetic_collection("document", seed, queries=(1, 1, len(qids)), background=background,
                                    length=LengthConfig(median=60, sigma=0.5, min=25, max=200),
                                    relevant=RelevantConfig(tail_exponent=0.3, max=40))
        if len(data.docs) >= DISKS45_FILE_COUNT:
            break
        background += DISKS45_FILE_COUNT - len(data.docs)
    topics = dict(zip(data.queries["test"], qids))
    queries = {topics[q]: text for q, text in data.queries["test"].items()}
    grades = {0: 0, 1: 1, 2: 1, 3: 2}  # the generator's 0-3 as Robust04's 0-2 (2: highly relevant)
    qrels = {topics[q]: {docid: 0 if topics[q] == ROBUST04_NO_RELEVANT else grades[grade]
                         for docid, grade in judged.items()} for q, judged in data.qrels["test"].items()}
    # the words in at least a quarter of the documents (the generator's Zipf filler): one in each title
    frequency = Counter(word for _, text in data.docs for word in set(text.split()))
    common = sorted(word for word, count in frequency.items() if 4 * count >= len(data.docs))
    assert common, "no word in a quarter of the documents"
    rng = random.Random(seed)
    titles = {qid: f"{text} {rng.choice(common)}" for qid, text in queries.items()}

    base = home / "disks45"
    files = _disks45_paths(base / "corpus")
    docnos, per_file = {}, [[] for _ in files]
    for i, (docid, text) in enumerate(data.docs):  # dealt over the files: each holds one or two documents
        held = per_file[i % len(files)]
        docnos[docid] = files[i % len(files)][1].format(len(held) + 1)
        words = text.split()
        # the text in lines of 12 words, as the disks' documents wrap; the Federal Register's with its SGML comments
        lines = [" ".join(words[start:start + 12]) for start in range(6, len(words), 12)]
        if docnos[docid].startswith("FR"):
            lines = ["<!-- PJG FTAG 4700 -->", *lines, "<!-- PJG /ITAG -->"]
        held.append(f"<DOC>\n<DOCNO> {docnos[docid]} </DOCNO>\n<HEADLINE>\n{' '.join(words[:6])}\n</HEADLINE>\n"
                    f"<TEXT>\n{chr(10).join(lines)}\n</TEXT>\n</DOC>\n")
    assert all(per_file), "a file without documents"
    for (path, _), docs in zip(files, per_file):
        _write(path, "".join(docs))
    vocabulary, ordered = sorted(frequency), sorted(qids, key=int)
    _write(base / "04.testset.gz", "".join(_topic(qid, titles[qid], rng, vocabulary) for qid in ordered), compress=True)
    _write(base / "qrels.robust2004.txt", "".join(f"{qid} 0 {docnos[docid]} {grade}\n" for qid in ordered
                                                  for docid, grade in qrels[qid].items()))
    return Collection([(docnos[docid], text) for docid, text in data.docs], {"test": titles},
                      {"test": {qid: {docnos[d]: g for d, g in judged.items()} for qid, judged in qrels.items()}})


def irds_home(home: Path, seed: int, datasets=("msmarco-passage", "msmarco-document")) -> dict[str, Collection]:
    """Fill IR_DATASETS_HOME ``home`` with the miniature data of ``datasets``."""
    builders = {"msmarco-passage": msmarco_passage, "msmarco-document": msmarco_document, "disks45": disks45}
    return {name: builders[name](home, seed) for name in datasets}


def glove_file(path: Path, words: set[str], seed: int, dim: int = GLOVE_DIM) -> Path:
    """A GloVe text file: most of ``words`` (a tenth left out: GloVe does not know every term) and a few
    words the collections lack, each with ``dim`` floats."""
    rng = np.random.default_rng(seed)
    vocabulary = sorted(words)
    kept = [word for i, word in enumerate(vocabulary) if i % 10 != 3] + [",", ".", "the", "of"]
    vectors = rng.normal(0.0, 0.4, size=(len(kept), dim))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for word, vector in zip(kept, vectors):
            handle.write(word + " " + " ".join(f"{value:.5f}" for value in vector) + "\n")
    return path


def bert_vocabulary(words: set[str]) -> list[str]:
    """A WordPiece vocabulary laid out as bert-base-uncased's: specials at their ids, then characters,
    the syllables of the pseudo-words as word starts and continuations, and frequent whole words."""
    syllables = sorted({word[i:i + 2] for word in words for i in range(0, len(word), 2)})
    letters = sorted({char for word in words for char in word} | set("abcdefghijklmnopqrstuvwxyz0123456789"))
    punctuation = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    vocab = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += punctuation + letters + syllables + [f"##{s}" for s in syllables] + [f"##{c}" for c in letters]
    vocab += sorted(words)[:500]
    seen = set()
    return [token for token in vocab if not (token in seen or seen.add(token))]


def bert_directory(path: Path, words: set[str], seed: int, hidden: int = 32, layers: int = 2, heads: int = 2,
                   max_positions: int = 512) -> Path:
    """A bert-base-uncased-shaped Hugging Face directory: a random small BERT and the uncased tokenizer."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(bert_vocabulary(words)) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(str(path))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=max_positions)
    BertModel(config).save_pretrained(str(path))
    return path


def ance_directory(path: Path, words: set[str], seed: int, hidden: int = 32, layers: int = 2, heads: int = 2,
                   max_length: int = 512) -> Path:
    """An ANCE-shaped directory (castorini/ance-msmarco-doc-firstp's layout) for pyserini's AnceDocumentEncoder
    and AnceQueryEncoder: a random small RoBERTa with ANCE's 768-d linear head and LayerNorm (pyserini's
    ``AnceEncoder``), and a byte-level BPE RoBERTa tokenizer trained on ``words``."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaTokenizer

    from rankstudy.dense import _pyserini  # pyserini's import, with the JVM work-arounds (docs/environment.md)

    AnceEncoder = _pyserini()[0].AnceDocumentEncoder.__init__.__globals__["AnceEncoder"]
    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(sorted(words), vocab_size=2000, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(path))  # vocab.json, merges.txt
    tokenizer = RobertaTokenizer(vocab_file=str(path / "vocab.json"), merges_file=str(path / "merges.txt"),
                                 model_max_length=max_length)
    tokenizer.save_pretrained(str(path))
    torch.manual_seed(seed)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                           num_attention_heads=heads, intermediate_size=2 * hidden,
                           max_position_embeddings=max_length + 2, pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    AnceEncoder(config).save_pretrained(str(path))
    return path


def prepare(work: Path, home: Path, seed: int = 7, datasets=("msmarco-passage", "msmarco-document"),
            glove: bool = True, bert: bool = False, ance: bool = False) -> dict[str, Collection]:
    """Everything a paper config reads from outside the workflow, in miniature: the IR_DATASETS_HOME
    ``home``, and under ``work`` the GloVe file, bert-base-uncased and ANCE directories at the paper configs' paths."""
    collections = irds_home(home, seed, datasets)
    words = set().union(*(collection.words() for collection in collections.values()))
    if glove:
        glove_file(work / "data/glove/glove.42B.300d.txt", words, seed)
    if bert:
        bert_directory(work / "data/pretrained/bert-base-uncased", words, seed)
    if ance:
        ance_directory(work / "data/pretrained/ance-msmarco-doc-firstp", words, seed)
    return collections
