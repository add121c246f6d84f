"""Text pipeline: tokenisation, vocabulary, token stores, embeddings and their CLI commands."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rankstudy import formats
from rankstudy.config import ConfigError, from_dict
from rankstudy.datasets.synthetic import SyntheticConfig, generate
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError, iter_collection, read_queries
from rankstudy.store import TokenStore
from rankstudy.text import tokenize
from rankstudy.text.embeddings import (EmbeddingConfig, build_embeddings, load_embeddings, load_glove, save_embeddings,
                                       train_embeddings)
from rankstudy.text.vocab import Vocabulary, build_vocabulary
from rankstudy.text.word_store import build_store

HAND_MADE = "d1\tThe cat sat.\nd2\tthe dog, the CAT!\nd3\t\nd4\tzebra\n"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rankstudy", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small synthetic dataset on disk with its vocabulary and collection store."""
    root = tmp_path_factory.mktemp("small")
    cfg = SyntheticConfig(train_queries=30, dev_queries=5, test_queries=5, concepts=100, filler_vocabulary=300,
                          context_vocabulary=100, background_documents=20)
    generate(cfg, seed=1).write(root / "data")
    vocab = build_vocabulary(root / "data" / "collection.tsv", 1)
    vocab.save(root / "vocab")
    build_store(root / "data" / "collection.tsv", vocab, root / "store")
    return root


def test_tokenize_lowercases_and_splits_punctuation():
    assert tokenize("Hello, World! It's 3.14 in the U.S.A. now") == [
        "hello", ",", "world", "!", "it", "'s", "3.14", "in", "the", "u.s.a.", "now"]
    assert tokenize("") == [] and tokenize("  \t ") == []
    assert tokenize("a\x00b") == ["a", "b"]


def test_vocabulary_ids_counts_and_idf(tmp_path):
    (tmp_path / "c.tsv").write_text(HAND_MADE)
    vocab = build_vocabulary(tmp_path / "c.tsv", min_count=1)
    # counts: the 3, cat 2, then 1 each: ! , . dog sat zebra (ties by term)
    assert vocab.terms == ["<pad>", "<oov>", "the", "cat", "!", ",", ".", "dog", "sat", "zebra"]
    assert vocab.counts.tolist() == [0, 0, 3, 2, 1, 1, 1, 1, 1, 1]
    assert vocab.dfs.tolist() == [0, 0, 2, 2, 1, 1, 1, 1, 1, 1]
    assert vocab.documents == 4
    assert vocab.id("cat") == 3 and vocab.id("unicorn") == 1
    assert vocab.encode(["the", "unicorn", "cat"]).tolist() == [2, 1, 3]
    assert vocab.encode([]).dtype == np.int32
    idf = vocab.idf()
    assert idf.dtype == np.float32 and idf[:2].tolist() == [0, 0]
    assert idf[2] == pytest.approx(math.log(4 / 2)) and idf[9] == pytest.approx(math.log(4))

    frequent = build_vocabulary(tmp_path / "c.tsv", min_count=2)
    assert frequent.terms == ["<pad>", "<oov>", "the", "cat"] and frequent.id("dog") == 1

    (tmp_path / "q.tsv").write_text("q1\tunicorn cat\n")
    with_queries = build_vocabulary(tmp_path / "c.tsv", 1, extra_texts=read_queries(tmp_path / "q.tsv").values())
    assert with_queries.id("unicorn") > 1 and with_queries.counts[with_queries.id("cat")] == 3
    assert with_queries.dfs[with_queries.id("unicorn")] == 0
    assert with_queries.idf()[with_queries.id("unicorn")] == pytest.approx(math.log(4))  # df 0 counts as 1

    with_queries.save(tmp_path / "v")
    loaded = Vocabulary.load(tmp_path / "v")
    assert loaded.terms == with_queries.terms and loaded.documents == 4 and loaded.min_count == 1
    assert np.array_equal(loaded.counts, with_queries.counts) and np.array_equal(loaded.dfs, with_queries.dfs)
    assert json.loads((tmp_path / "v" / "vocab.json").read_text())["documents"] == 4
    assert (tmp_path / "v" / "vocab.tsv").read_text().splitlines()[2:4] == ["2\tcat\t3\t2", "3\tthe\t3\t2"]  # tie


def test_vocabulary_load_errors(tmp_path):
    with pytest.raises(StudyError, match="missing vocab.tsv"):
        Vocabulary.load(tmp_path)
    (tmp_path / "vocab.json").write_text('{"documents": 1, "min_count": 1}')
    (tmp_path / "vocab.tsv").write_text("0\t<pad>\t0\t0\n1\t<oov>\t0\t0\n5\tx\t1\t1\n")
    with pytest.raises(FormatError, match=r"vocab.tsv:3: expected 'id<TAB>term<TAB>count<TAB>df' with id 2"):
        Vocabulary.load(tmp_path)


@pytest.mark.parametrize("chunk_tokens", [7, 1 << 20])
def test_store_round_trip(tmp_path, small, chunk_tokens):
    vocab = Vocabulary.load(small / "vocab")
    collection = tmp_path / "collection.tsv"
    collection.write_text((small / "data" / "collection.tsv").read_text() + "EMPTY\t\n")
    build_store(collection, vocab, tmp_path / "store", chunk_tokens=chunk_tokens)
    store = TokenStore(tmp_path / "store")
    docs = list(iter_collection(collection))
    assert len(store) == len(docs) and store.ids == [docid for docid, _ in docs]
    for docid, text in docs:
        tokens = store.tokens(docid)
        assert tokens.dtype == np.int32
        assert np.array_equal(tokens, vocab.encode(tokenize(text)))
    assert store.token_array.dtype == np.int32 and store.offsets.dtype == np.int64
    assert len(store.tokens("EMPTY")) == 0

    ids = [docs[0][0], "EMPTY", docs[1][0]]
    lengths = store.lengths(ids)
    assert lengths.tolist() == [len(tokenize(docs[0][1])), 0, len(tokenize(docs[1][1]))]
    batch = store.batch(ids, max_length=10)
    assert batch.dtype == np.int64 and batch.shape == (3, 10)  # synthetic texts are longer than 10
    assert np.array_equal(batch[0], store.tokens(docs[0][0])[:10]) and not batch[1].any()
    wide = store.batch(ids, max_length=10_000)
    assert wide.shape == (3, lengths.max())
    assert np.array_equal(wide[2, :lengths[2]], store.tokens(docs[1][0])) and not wide[2, lengths[2]:].any()
    assert store.batch(["EMPTY"], max_length=5).shape == (1, 1)
    with pytest.raises(KeyError, match="nope"):
        store.tokens("nope")


def test_store_buffers_at_most_one_chunk(tmp_path, small, monkeypatch):
    """The token array is written chunk by chunk, never concatenated whole."""
    vocab = Vocabulary.load(small / "vocab")
    sizes = []
    concatenate = np.concatenate

    def spy(arrays, *args, **kwargs):
        result = concatenate(arrays, *args, **kwargs)
        sizes.append(result.size)
        return result

    monkeypatch.setattr(np, "concatenate", spy)
    count = build_store(small / "data" / "collection.tsv", vocab, tmp_path / "s", chunk_tokens=500)
    monkeypatch.undo()
    store = TokenStore(tmp_path / "s")
    longest = int(np.diff(store.offsets).max())
    assert count == len(store) and len(sizes) > 10
    assert max(sizes) < 500 + longest < len(store.token_array)


def test_queries_store(tmp_path, small):
    vocab = Vocabulary.load(small / "vocab")
    build_store(small / "data" / "queries.test.tsv", vocab, tmp_path / "q", kind="queries")
    store = TokenStore(tmp_path / "q")
    queries = read_queries(small / "data" / "queries.test.tsv")
    assert store.ids == list(queries)
    assert all(np.array_equal(store.tokens(q), vocab.encode(tokenize(t))) for q, t in queries.items())
    with pytest.raises(StudyError, match="store kind"):
        build_store(small / "data" / "queries.test.tsv", vocab, tmp_path / "x", kind="docs")
    assert not (tmp_path / "x").exists()


def test_missing_or_corrupt_store(tmp_path, small):
    with pytest.raises(StudyError, match=f"{tmp_path / 'none'}: not a token store"):
        TokenStore(tmp_path / "none")
    vocab = Vocabulary.load(small / "vocab")
    (tmp_path / "c.tsv").write_text(HAND_MADE)
    build_store(tmp_path / "c.tsv", vocab, tmp_path / "s")
    np.save(tmp_path / "s" / "offsets.npy", np.array([0, 1, 99], dtype=np.int64))
    with pytest.raises(StudyError, match=f"{tmp_path / 's'}: corrupt token store: offsets do not span"):
        TokenStore(tmp_path / "s")
    (tmp_path / "s" / "tokens.npy").write_bytes(b"garbage")
    with pytest.raises(StudyError, match="corrupt token store"):
        TokenStore(tmp_path / "s")


DETERMINISM_SCRIPT = textwrap.dedent("""
    import sys
    from rankstudy.store import TokenStore
    from rankstudy.text.embeddings import train_embeddings
    from rankstudy.text.vocab import Vocabulary
    root, method, out = sys.argv[1:]
    array = train_embeddings(TokenStore(root + "/store"), Vocabulary.load(root + "/vocab"), method,
                             dim=8, epochs=2, window=3, seed=7, min_count=2, bucket=5000)
    open(out, "wb").write(array.tobytes())
""")


@pytest.mark.parametrize("method", ["word2vec", "fasttext"])
def test_embeddings_deterministic_across_processes(tmp_path, small, method):
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"{method}.{hash_seed}.bin"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", DETERMINISM_SCRIPT, str(small), method, str(out)],
                       check=True, env=env, capture_output=True)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]

    vocab = Vocabulary.load(small / "vocab")
    array = np.frombuffer(outputs[0], dtype=np.float32).reshape(len(vocab), 8)
    assert not array[:2].any()
    rare = np.flatnonzero(vocab.counts == 1)  # below gensim's min_count=2: not learned
    assert len(rare) > 0
    if method == "word2vec":
        assert not array[rare].any()
    else:  # FastText builds them from character n-grams
        assert np.abs(array[rare]).sum(axis=1).min() > 0
    assert np.abs(array[vocab.counts >= 2]).sum(axis=1).min() > 0


def test_embeddings_read_several_stores_as_one_corpus(tmp_path, small):
    """Two stores train exactly what one store of their texts in the same order trains."""
    lines = (small / "data" / "collection.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    half = len(lines) // 2
    vocab = Vocabulary.load(small / "vocab")
    for name, part in (("first", lines[:half]), ("second", lines[half:]), ("both", lines)):
        (tmp_path / f"{name}.tsv").write_text("".join(part), encoding="utf-8")
        build_store(tmp_path / f"{name}.tsv", vocab, tmp_path / name)
    settings = dict(method="word2vec", dim=8, epochs=2, window=3, seed=7)
    together = train_embeddings(TokenStore(tmp_path / "both"), vocab, **settings)
    chained = build_embeddings(EmbeddingConfig(dim=8, epochs=2, window=3), vocab, 7,
                               store=[TokenStore(tmp_path / "first"), TokenStore(tmp_path / "second")])
    first_only = train_embeddings(TokenStore(tmp_path / "first"), vocab, **settings)
    assert np.array_equal(chained, together)
    assert not np.array_equal(first_only, together)
    with pytest.raises(StudyError, match="needs a token store"):
        build_embeddings(EmbeddingConfig(), vocab, 7, store=[])


def test_word2vec_learns_synonyms(tmp_path):
    """Forms of the same synthetic concept end up closer than forms of different concepts."""
    cfg = from_dict(SyntheticConfig, {
        "train_queries": 200, "dev_queries": 5, "test_queries": 5, "concepts": 100, "filler_vocabulary": 300,
        "context_vocabulary": 300, "background_documents": 20, "relevant": {"tail_exponent": 0.5, "max": 30}})
    data = generate(cfg, seed=1)
    data.write(tmp_path / "data")
    vocab = build_vocabulary(tmp_path / "data" / "collection.tsv", 1)
    build_store(tmp_path / "data" / "collection.tsv", vocab, tmp_path / "store")
    array = train_embeddings(TokenStore(tmp_path / "store"), vocab, "word2vec", dim=32, epochs=10, window=5, seed=3)
    unit = array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-9)

    def cos(a: str, b: str) -> float:
        return float(unit[vocab.id(a)] @ unit[vocab.id(b)])

    forms = data.truth["concept_forms"]
    rng = np.random.default_rng(0)
    same, different = [], []
    for index, concept in enumerate(forms):
        if len(concept) < 2:
            continue
        other = forms[(index + rng.integers(1, len(forms))) % len(forms)]
        same.append(cos(concept[0], concept[1]))
        different.append(cos(concept[0], other[-1]))
    same, different = np.array(same), np.array(different)
    assert len(same) >= 30
    assert same.mean() > different.mean() + 0.2, (same.mean(), different.mean())
    assert (same > different).mean() > 0.8


def test_glove(tmp_path):
    vocab = Vocabulary(["<pad>", "<oov>", "cat", "dog", "zebra"], [0, 0, 3, 2, 1], [0, 0, 1, 1, 1], 3)
    glove = tmp_path / "glove.txt"
    glove.write_text("the 1 1 1\ncat 0.5 -1 2\n. . . 9 9 9\ndog 1e-1 0 3\ncat 7 7 7\n")
    first = load_glove(glove, vocab, dim=3, seed=5)
    assert first.dtype == np.float32 and first.shape == (5, 3)
    assert not first[:2].any()
    assert first[2].tolist() == [0.5, -1, 2] and first[3].tolist() == pytest.approx([0.1, 0, 3])
    assert np.array_equal(first, load_glove(glove, vocab, dim=3, seed=5))  # zebra: seeded random
    assert not np.array_equal(first[4], load_glove(glove, vocab, dim=3, seed=6)[4])
    assert 0 < np.abs(first[4]).max() < 1

    glove.write_text("cat 1 2 3\ndog 1 2\n")
    with pytest.raises(FormatError, match=r"glove.txt:2: expected 4 space-separated fields"):
        load_glove(glove, vocab, dim=3, seed=5)
    glove.write_text("cat 1 2 3 4\n")  # a 4-d file read as 3-d
    with pytest.raises(FormatError, match=r"glove.txt:1: expected 4 space-separated fields"):
        load_glove(glove, vocab, dim=3, seed=5)


def test_an_encoders_input_table_gives_each_word_the_mean_of_its_pieces():
    from rankstudy.nn.pretrained import load_encoder, load_tokenizer
    from rankstudy.text.embeddings import encoder_table

    vocab = Vocabulary(["<pad>", "<oov>", "cat", "photosynthesis"], [0, 0, 3, 2], [0, 0, 1, 1], 2)
    vectors = encoder_table("minilm", vocab, dim=384)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32 and not vectors[:2].any()
    table = load_encoder("minilm").embeddings.word_embeddings.weight.detach().numpy()
    tokenizer = load_tokenizer("minilm")
    for row, word in ((2, "cat"), (3, "photosynthesis")):
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        assert np.allclose(vectors[row], table[ids].mean(axis=0), atol=1e-6)
    assert len(tokenizer("photosynthesis", add_special_tokens=False)["input_ids"]) > 1  # a word of several pieces
    scaled = build_embeddings(EmbeddingConfig(method="encoder_table", encoder="minilm", dim=384, norm=10.0), vocab, 0)
    assert np.linalg.norm(scaled[2:], axis=1).mean() == pytest.approx(10.0, rel=1e-5)
    assert np.allclose(scaled[2] / np.linalg.norm(scaled[2]), vectors[2] / np.linalg.norm(vectors[2]), atol=1e-6)
    with pytest.raises(StudyError, match="384-d input embeddings; set dim to it"):
        encoder_table("minilm", vocab, dim=300)


def test_embedding_files_and_config(tmp_path):
    array = np.arange(12, dtype=np.float32).reshape(4, 3)
    save_embeddings(tmp_path / "e.npy", array)
    assert np.array_equal(load_embeddings(tmp_path / "e.npy"), array)
    assert [p.name for p in tmp_path.iterdir()] == ["e.npy"]
    with pytest.raises(ValueError):
        save_embeddings(tmp_path / "f.npy", array.astype(np.float64))
    with pytest.raises(StudyError, match="cannot read embeddings"):
        load_embeddings(tmp_path / "missing.npy")

    assert EmbeddingConfig().method == "word2vec"
    assert from_dict(EmbeddingConfig, {"method": "glove", "path": "g.txt", "dim": 300}).dim == 300
    for bad in ({"method": "bert"}, {"dim": 0}, {"sg": 2}, {"method": "glove"}, {"path": "g.txt"}, {"dims": 5},
                {"method": "encoder_table"}, {"encoder": "minilm"}, {"norm": 0},
                {"method": "encoder_table", "encoder": "minilm", "norm": -1.0}):
        with pytest.raises(ConfigError):
            from_dict(EmbeddingConfig, bad)


def test_cli_end_to_end(tmp_path, small):
    data = small / "data"
    result = cli("vocab", "--collection", str(data / "collection.tsv"), "--queries", str(data / "queries.train.tsv"),
                 str(data / "queries.test.tsv"), "--min-count", "1", "--out", str(tmp_path / "vocab"))
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr
    vocab = Vocabulary.load(tmp_path / "vocab")
    for kind, source in (("collection", "collection.tsv"), ("queries", "queries.test.tsv")):
        result = cli("store", "--input", str(data / source), "--kind", kind, "--vocab", str(tmp_path / "vocab"),
                     "--out", str(tmp_path / kind))
        assert result.returncode == 0, result.stderr
    queries = TokenStore(tmp_path / "queries")
    assert all((queries.tokens(q) > 1).all() for q in queries.ids)  # queries joined the vocabulary: no OOV

    config = json.dumps({"method": "word2vec", "dim": 8, "epochs": 1})
    result = cli("embeddings", "--store", str(tmp_path / "collection"), "--vocab", str(tmp_path / "vocab"),
                 "--config", config, "--seed", "1", "--out", str(tmp_path / "emb.npy"), "--threads", "4")
    assert result.returncode == 0, result.stderr
    assert load_embeddings(tmp_path / "emb.npy", vocab).shape == (len(vocab), 8)

    (tmp_path / "glove.txt").write_text(f"{vocab.terms[2]} 1 2\n")
    result = cli("embeddings", "--vocab", str(tmp_path / "vocab"), "--seed", "1", "--out", str(tmp_path / "g.npy"),
                 "--config", json.dumps({"method": "glove", "dim": 2, "path": str(tmp_path / "glove.txt")}))
    assert result.returncode == 0, result.stderr
    assert load_embeddings(tmp_path / "g.npy")[2].tolist() == [1, 2]

    result = cli("store", "--input", str(data / "collection.tsv"), "--kind", "collection",
                 "--vocab", str(tmp_path / "nothing"), "--out", str(tmp_path / "bad"))
    assert result.returncode == 2 and "not a vocabulary directory" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "bad").exists()
    result = cli("embeddings", "--vocab", str(tmp_path / "vocab"), "--seed", "1", "--out", str(tmp_path / "x.npy"),
                 "--config", '{"method": "word2vec", "dimension": 3}')
    assert result.returncode == 2 and "unknown key(s) dimension" in result.stderr


def test_a_vocabulary_of_another_collection_is_refused_under_the_coverage_threshold(tmp_path, capsys):
    """Issue 43: a model's vocabulary applied to a collection it was not built on must know enough of its tokens;
    the store step (before any model runs) reports the share and, under the threshold, writes nothing."""
    from rankstudy.cli import main

    formats.write_collection(tmp_path / "own.tsv", [("a", "apple river guitar solar")])
    vocab = build_vocabulary(tmp_path / "own.tsv")
    vocab.save(tmp_path / "vocab")
    # 6 of 10 tokens known
    formats.write_collection(tmp_path / "other.tsv", [("x", "apple river guitar"), ("y", "solar apple river kiwi"),
                                                      ("z", "mango papaya lime")])
    assert build_store(tmp_path / "other.tsv", vocab, tmp_path / "ok", min_coverage=0.6) == 3
    with pytest.raises(StudyError, match=r"other.tsv: the vocabulary knows 60.0% of its 10 tokens, under the 70% of "
                                         r"neural.min_vocabulary_coverage"):
        build_store(tmp_path / "other.tsv", vocab, tmp_path / "refused", min_coverage=0.7)
    assert not (tmp_path / "refused").exists() and not list(tmp_path.glob("*.tmp*"))
    args = ["store", "--input", str(tmp_path / "other.tsv"), "--kind", "collection", "--vocab", str(tmp_path / "vocab"),
            "--out", str(tmp_path / "cli")]
    assert main([*args, "--min-coverage", "0.9"]) == 2 and "its own vocabulary" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()
    assert main(args) == 0  # no threshold: the vocabulary's own collection
