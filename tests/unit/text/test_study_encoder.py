"""The study encoder (rankstudy.text.study_encoder): tokenizers, word-vector rows, masked-LM
pre-training, and loading through the same ``encoder:`` path as MiniLM."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.models.bert_cat import BertCat, BertCatConfig
from rankstudy.models.passage_bert import MaxP, PassageConfig
from rankstudy.nn.pretrained import load_encoder, load_tokenizer, special_ids
from rankstudy.store import TokenStore
from rankstudy.text.embeddings import save_embeddings
from rankstudy.text.study_encoder import SPECIAL_TOKENS, StudyEncoderConfig, build_study_encoder
from rankstudy.text.tokenize import tokenize
from rankstudy.text.vocab import build_vocabulary
from rankstudy.text.wordpiece import build_wordpiece_store, check_wordpiece_store

WORDS = "bada kiru lomo pita rugo sefa tuvi zoka".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny collection, its vocabulary (min count 1) and 16-d word vectors."""
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    collection = root / "collection.tsv"
    collection.write_text("".join(f"D{i}\t{' '.join(rng.choice(WORDS, size=40))}, Kiru!\n" for i in range(30)))
    vocab = build_vocabulary(collection, min_count=1)
    vocab.save(root / "vocab")
    vectors = rng.normal(size=(len(vocab), 16)).astype(np.float32)
    vectors[:2] = 0.0
    save_embeddings(root / "embeddings.npy", vectors)
    return root, vocab, vectors


def build(corpus, out, **settings):
    root, _, _ = corpus
    config = from_dict(StudyEncoderConfig, {"layers": 1, "heads": 2, "intermediate_size": 32, **settings}, "encoder")
    build_study_encoder(root / "collection.tsv", root / "vocab", root / "embeddings.npy", config, 7, out)
    return out


@pytest.fixture(scope="module")
def word_encoder(corpus, tmp_path_factory):
    return build(corpus, tmp_path_factory.mktemp("enc") / "study", mlm_steps=3, mlm_batch_size=4, mlm_length=16)


def test_word_tokenizer_round_trip(word_encoder):
    tokenizer = load_tokenizer(word_encoder)
    assert [tokenizer.convert_ids_to_tokens(i) for i in range(5)] == list(SPECIAL_TOKENS)
    assert special_ids(tokenizer, word_encoder) == (2, 3)  # [PAD] = 0 as the token stores pad
    text = "Tuvi bada, zoka! unknownword"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == ["tuvi", "bada", ",", "zoka", "!", "[UNK]"]
    # the study's own words (BlingFire), one token each
    assert tokenizer.decode(ids[:5]) == " ".join(tokenize("Tuvi bada, zoka!"))
    pair = tokenizer("bada", "kiru")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(pair) == ["[CLS]", "bada", "[SEP]", "kiru", "[SEP]"]


def test_wordpiece_tokenizer_round_trip(corpus, tmp_path):
    out = build(corpus, tmp_path / "wp", tokenizer="wordpiece", wordpiece_vocab_size=60)
    tokenizer = load_tokenizer(out)
    assert tokenizer.pad_token_id == 0 and len(tokenizer) <= 60
    ids = tokenizer("sefa rugo, pita", add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == "sefa rugo, pita"


def test_every_vocabulary_term_is_a_token_with_its_word_vector_row(corpus, word_encoder):
    _, vocab, _ = corpus
    tokenizer = load_tokenizer(word_encoder)
    meta = json.loads((word_encoder / "study_encoder.json").read_text())
    assert meta["word_vector_rows"] == len(vocab) - 2 and len(tokenizer) == len(vocab) - 2 + len(SPECIAL_TOKENS)
    assert load_encoder(word_encoder).embeddings.word_embeddings.weight.shape == (len(tokenizer), 16)


def test_embedding_rows_equal_the_word_vectors_they_were_initialised_from(corpus, tmp_path):
    _, vocab, vectors = corpus
    out = build(corpus, tmp_path / "plain")
    tokenizer = load_tokenizer(out)
    weights = load_encoder(out).embeddings.word_embeddings.weight.detach().numpy()
    for term in vocab.terms[2:]:
        np.testing.assert_array_equal(weights[tokenizer.convert_tokens_to_ids(term)], vectors[vocab.id(term)])


def test_pretraining_logs_and_is_deterministic(corpus, word_encoder, tmp_path):
    rows = list(csv.DictReader(open(word_encoder / "pretrain.csv")))
    assert [int(row["step"]) for row in rows] == [1, 2, 3]
    assert all(np.isfinite(float(row["loss"])) for row in rows)
    again = build(corpus, tmp_path / "again", mlm_steps=3, mlm_batch_size=4, mlm_length=16)
    first, second = load_encoder(word_encoder).state_dict(), load_encoder(again).state_dict()
    assert all(torch.equal(first[key], second[key]) for key in first)


def test_masked_lm_pretraining_reduces_its_loss(corpus, tmp_path):
    out = build(corpus, tmp_path / "mlm", mlm_steps=60, mlm_batch_size=8, mlm_length=16, mlm_learning_rate=3e-3)
    losses = [float(row["loss"]) for row in csv.DictReader(open(out / "pretrain.csv"))]
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.5


def test_saved_encoder_loads_through_the_encoder_path_and_scores_identically(corpus, word_encoder, tmp_path):
    root, _, _ = corpus
    store = tmp_path / "store"
    build_wordpiece_store(root / "collection.tsv", str(word_encoder), store)
    check_wordpiece_store(store, str(word_encoder))
    documents = torch.as_tensor(TokenStore(store).batch(["D0", "D1", "D2"], 64), dtype=torch.long)
    query = torch.as_tensor(load_tokenizer(word_encoder)(["bada kiru"] * 3, add_special_tokens=False)["input_ids"])
    scores = []
    for _ in range(2):
        torch.manual_seed(0)  # the head's initialisation
        model = BertCat(from_dict(BertCatConfig, {"encoder": str(word_encoder)}, "models.bert_cat")).eval()
        with torch.no_grad():
            scores.append(model(query, documents))
    torch.testing.assert_close(scores[0], scores[1], rtol=0, atol=0)
    assert scores[0].shape == (3,) and scores[0].std() > 0  # the documents are told apart


def test_frozen_word_embeddings_stay_out_of_training(word_encoder):
    settings = {"encoder": str(word_encoder), "train_embeddings": False, "passage_length": 8}
    model = MaxP(from_dict(PassageConfig, settings, "models.maxp"))
    assert not model.encoder.embeddings.word_embeddings.weight.requires_grad
    assert model.encoder.embeddings.position_embeddings.weight.requires_grad


def test_bad_settings_fail_clearly(corpus, tmp_path):
    with pytest.raises(ConfigError, match="tokenizer must be one of word, wordpiece"):
        from_dict(StudyEncoderConfig, {"tokenizer": "bpe"}, "encoder")
    with pytest.raises(ConfigError, match="unknown key"):
        from_dict(StudyEncoderConfig, {"layer": 2}, "encoder")
    with pytest.raises(StudyError, match="3 heads do not divide the word vectors' dimension 16"):
        build(corpus, tmp_path / "bad", heads=3)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer.json"])
@pytest.mark.parametrize("cut", [0.5, 0.0])
def test_a_damaged_study_encoder_is_a_one_line_error_naming_it(word_encoder, tmp_path, name, cut):
    """Weights, config or tokenizer cut short or emptied (issue 43): one line naming the encoder's directory."""
    damaged = Path(shutil.copytree(word_encoder, tmp_path / "encoder"))
    whole = (damaged / name).read_bytes()
    (damaged / name).write_bytes(whole[:int(len(whole) * cut)])
    load = load_tokenizer if name == "tokenizer.json" else load_encoder
    with pytest.raises(StudyError, match=f"encoder '{damaged}': cannot load the ") as error:
        load(str(damaged))
    assert "\n" not in str(error.value)
