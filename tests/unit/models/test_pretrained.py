"""Pre-trained encoders (offline), WordPiece token stores and the BERT[CLS] cross-encoder."""

from __future__ import annotations

import json
import socket
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import loss_before_and_after
from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.experiment import export_encoder
from rankstudy.models.bert_cat import BertCat, BertCatConfig
from rankstudy.models.passage_bert import MaxP, PassageConfig
from rankstudy.nn.pretrained import encoder_path, load_encoder, load_tokenizer, pair_inputs, save_encoder, special_ids
from rankstudy.store import TokenStore
from rankstudy.text.tokenize import tokenize
from rankstudy.text.vocab import build_vocabulary
from rankstudy.text.word_store import build_store
from rankstudy.text.wordpiece import build_wordpiece_store, check_wordpiece_store, read_store_meta
from rankstudy.train.loop import optimizer_groups
from rankstudy.train.losses import pairwise_margin_loss


@pytest.fixture(scope="module", autouse=True)
def no_network():
    """Any attempt to open a network connection (e.g. to a model hub) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket, "create_connection", refuse)
        yield


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("minilm")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return BertCat(from_dict(BertCatConfig, {"encoder": "minilm", "dropout": 0.1}, "models.bert_cat"), None)


def wp(tokenizer, texts):
    """Padded [B, L] WordPiece ids (no special tokens), as TokenStore.batch returns them."""
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    out = np.zeros((len(rows), max(map(len, rows))), dtype=np.int64)
    for out_row, row in zip(out, rows):
        out_row[:len(row)] = row
    return torch.from_numpy(out)


def test_minilm_loads_offline(model):
    assert (encoder_path("minilm") / "config.json").is_file()
    config = model.encoder.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (6, 384, 12)
    assert model.encoder.pooler is None and (model.cls_id, model.sep_id) == (101, 102)
    groups = {g["name"]: g["params"] for g in optimizer_groups(model, {"encoder": 2e-5, "default": 1e-3})}
    assert sum(p.numel() for p in groups["default"]) == 384 + 1  # the head only
    assert sum(p.numel() for p in groups["encoder"]) == sum(p.numel() for p in model.encoder.parameters())


def test_wordpiece_store_round_trip(tmp_path, tokenizer):
    texts = {"d1": "Hello, World! Neural re-ranking with BERT.", "d2": "", "d3": "Café naïve résumé 1234x",
             "d4": "a literal [SEP] and [PAD] are text", "d5": "x " * 40}
    (tmp_path / "c.tsv").write_text("".join(f"{k}\t{v}\n" for k, v in texts.items()))
    assert build_wordpiece_store(tmp_path / "c.tsv", "minilm", tmp_path / "s", chunk_tokens=5, batch_texts=2) == 5
    store = TokenStore(tmp_path / "s")
    assert store.ids == list(texts)
    for docid, text in texts.items():
        assert store.tokens(docid).tolist() == tokenizer(text, add_special_tokens=False,
                                                         split_special_tokens=True)["input_ids"]
    assert store.tokens("d1").tolist() == tokenizer(texts["d1"], add_special_tokens=False)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(store.tokens("d3").tolist())[:2] == ["cafe", "naive"]  # lower-cased
    assert not set(store.tokens("d4").tolist()) & {0, 101, 102}  # literal special tokens stay text
    assert store.batch(["d2", "d1"], 4)[0].tolist() == [0, 0, 0, 0]  # padded with [PAD] = 0
    assert read_store_meta(tmp_path / "s")["tokenizer"] == "wordpiece"
    check_wordpiece_store(tmp_path / "s", "minilm")

    (tmp_path / "q.tsv").write_text("q1\tneural ranking\n")
    build_wordpiece_store(tmp_path / "q.tsv", "minilm", tmp_path / "q", kind="queries", max_tokens=1)
    assert TokenStore(tmp_path / "q").tokens("q1").tolist() == tokenizer("neural", add_special_tokens=False)["input_ids"]

    vocab = build_vocabulary(tmp_path / "c.tsv")  # build_store's vocabulary path is unchanged
    build_store(tmp_path / "c.tsv", vocab, tmp_path / "v", chunk_tokens=3)
    assert [TokenStore(tmp_path / "v").tokens(k).tolist() for k in texts] == \
        [vocab.encode(tokenize(t)).tolist() for t in texts.values()]
    with pytest.raises(StudyError, match="not a WordPiece token store"):
        check_wordpiece_store(tmp_path / "v", "minilm")

    # training and scoring check the stores against the ids the model reads (Ranker.TOKENIZER)
    from rankstudy.experiment import check_token_stores

    check_token_stores("bert_cat", {"encoder": "minilm"}, tmp_path / "s", tmp_path / "q")
    check_token_stores("knrm", {}, tmp_path / "v")
    with pytest.raises(StudyError, match="not a WordPiece token store"):
        check_token_stores("bert_cat", {"encoder": "minilm"}, tmp_path / "s", tmp_path / "v")
    with pytest.raises(StudyError, match=r"/s: WordPiece ids of encoder 'minilm', but KNRM reads word ids"):
        check_token_stores("knrm", {}, tmp_path / "s")


def test_padding_id_must_be_zero():
    with pytest.raises(StudyError, match="padding id is 1"):
        special_ids(SimpleNamespace(pad_token_id=1, cls_token_id=0, sep_token_id=2), "roberta")


def test_pair_inputs_by_hand():
    query = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    document = torch.tensor([[8, 0, 0], [9, 10, 11]])
    ids, types, mask = pair_inputs(query, document, cls_id=101, sep_id=102)
    assert ids.tolist() == [[101, 5, 6, 102, 8, 102, 0], [101, 7, 102, 9, 10, 11, 102]]
    assert types.tolist() == [[0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]]
    assert mask.tolist() == [[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]]
    ids, types, mask = pair_inputs(query, document, 101, 102, max_length=6)  # the document is truncated
    assert ids.tolist() == [[101, 5, 6, 102, 8, 102], [101, 7, 102, 9, 10, 102]]
    assert types.tolist() == [[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1]] and mask.all()
    ids, _, _ = pair_inputs(torch.tensor([[0, 5, 0, 6]]), torch.tensor([[8, 0, 9]]), 101, 102)  # padding anywhere
    assert ids.tolist() == [[101, 5, 6, 102, 8, 9, 102]]


def test_bert_cat_scores_ignore_extra_padding(model, tokenizer):
    model.eval()
    query = wp(tokenizer, ["what is bm25", "neural ranking"])
    document = wp(tokenizer, ["bm25 is a ranking function", "transformers re-rank passages with attention"])
    wide_q = torch.nn.functional.pad(query, (0, 5))
    wide_d = torch.nn.functional.pad(document, (0, 9))
    with torch.no_grad():
        scores = model(query, document)
        assert scores.shape == (2,)
        assert torch.allclose(model(wide_q, wide_d), scores, atol=1e-6)
        assert torch.allclose(model(query[1:], document[1:]), scores[1:], atol=1e-5)  # batch-independent


def test_bert_cat_training_reduces_pairwise_loss(model, tokenizer):
    topics = ["apple pie", "solar panel", "jazz guitar", "river fishing"]
    query = wp(tokenizer, topics)
    positive = wp(tokenizer, [f"{t} guide" for t in topics])
    negative = wp(tokenizer, [f"{t} guide" for t in topics[1:] + topics[:1]])
    docs = torch.cat([positive, torch.nn.functional.pad(negative, (0, positive.shape[1] - negative.shape[1]))])

    def loss():
        scores = model(torch.cat([query, query]), docs)
        return pairwise_margin_loss(scores[:4], scores[4:])

    torch.manual_seed(0)
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)  # half the parameters: a faster test
    optimizer = torch.optim.Adam(optimizer_groups(model, {"encoder": 3e-5, "default": 1e-3}))
    before, after = loss_before_and_after(model, optimizer, loss)
    assert after < before - 0.2, (before, after)


def test_missing_encoder_fails_clearly(tmp_path):
    with pytest.raises(StudyError, match=r"'.*nowhere'.*is not a directory"):
        encoder_path(tmp_path / "nowhere")
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "config.json").write_text("{}")
    with pytest.raises(StudyError, match=r"partial is not a complete.*missing weights .*tokenizer"):
        load_encoder(tmp_path / "partial")
    with pytest.raises(StudyError, match="nowhere"):
        BertCat(BertCatConfig(encoder=str(tmp_path / "nowhere")), None)
    with pytest.raises(ConfigError, match="exceeds"):
        BertCat(BertCatConfig(max_length=1024), None)
    with pytest.raises(ConfigError, match="dropout"):
        from_dict(BertCatConfig, {"dropout": 1.5}, "models.bert_cat")


def test_encoder_keeps_its_first_layers():
    full, two = load_encoder("minilm"), load_encoder("minilm", layers=2)
    assert len(two.encoder.layer) == 2 and two.config.num_hidden_layers == 2
    ids = torch.tensor([[101, 2054, 2003, 102]])
    expected = full.embeddings(ids)
    for layer in full.encoder.layer[:2]:
        output = layer(expected)
        expected = output[0] if isinstance(output, tuple) else output
    assert torch.allclose(two(ids).last_hidden_state, expected, atol=1e-5)
    with pytest.raises(StudyError, match="has 6 layers; cannot keep 7"):
        load_encoder("minilm", layers=7)


def _trained_model_dir(tmp_path, model_name, settings, model):
    """A model directory as `rankstudy train` leaves it: config.json and model.pt."""
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"model_name": model_name, "model_settings": settings,
                                                 "train": {"max_query_length": 30, "max_doc_length": 200}}))
    torch.save(model.state_dict(), out / "model.pt")
    return out


def test_exported_encoder_warm_starts_another_model(tmp_path, tokenizer):
    settings = {"encoder": "minilm", "encoder_layers": 2, "attention_dropout": 0.0}
    torch.manual_seed(0)
    trained = BertCat(from_dict(BertCatConfig, settings, "models.bert_cat"), None)
    with torch.no_grad():  # stands in for fine-tuning: the exported weights must be these, not MiniLM's
        for parameter in trained.encoder.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    empty = tmp_path / "empty.npy"
    np.save(empty, np.zeros((0, 0), dtype=np.float32))
    export_encoder(_trained_model_dir(tmp_path, "bert_cat", settings, trained), empty, tmp_path / "encoder")

    exported = load_encoder(tmp_path / "encoder")
    assert exported.config.num_hidden_layers == 2 and exported.config.attention_probs_dropout_prob == 0.0
    for name, tensor in trained.encoder.state_dict().items():
        assert torch.equal(exported.state_dict()[name], tensor), name
    # the scoring model dropped BERT's pooler; the export puts the pre-trained one back
    assert torch.equal(exported.pooler.dense.weight, load_encoder("minilm").pooler.dense.weight)
    assert load_tokenizer(tmp_path / "encoder")("punoda gilini")["input_ids"] == tokenizer("punoda gilini")["input_ids"]

    torch.manual_seed(1)  # another seed: the head must come from the export, not from the same draw
    warm = BertCat(BertCatConfig(encoder=str(tmp_path / "encoder")), None).eval()
    trained.eval()
    query, document = wp(tokenizer, ["kapimu barona"]), wp(tokenizer, ["vofuza kapimu nufofo barona"])
    hidden = trained.encoder(**trained.inputs(query, document)).last_hidden_state
    assert torch.allclose(warm.encoder(**warm.inputs(query, document)).last_hidden_state, hidden, atol=1e-6)
    # the fine-tuned head goes along: the warm-started model scores exactly as the trained one
    assert torch.equal(warm.score.weight, trained.score.weight) and torch.equal(warm.score.bias, trained.score.bias)
    assert torch.allclose(warm(query, document), trained(query, document), atol=1e-6)
    maxp = MaxP(from_dict(PassageConfig, {"encoder": str(tmp_path / "encoder")}, "models.maxp"), None).eval()
    assert torch.allclose(maxp(query, document), trained(query, document), atol=1e-5)  # one passage: MaxP = BERT[CLS]


def test_a_bad_exported_head_fails_cleanly(tmp_path):
    directory = tmp_path / "encoder"
    save_encoder(load_encoder("minilm", layers=1), "minilm", directory, head=torch.nn.Linear(8, 1))
    with pytest.raises(StudyError, match=r"score_head.pt: expected the state of a Linear\(384 → 1\) scoring head"):
        BertCat(BertCatConfig(encoder=str(directory)), None)


def test_export_needs_an_encoder_model(tmp_path):
    from rankstudy.models.knrm import KNRM, KNRMConfig

    vectors = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    np.save(tmp_path / "vectors.npy", vectors)
    model_dir = _trained_model_dir(tmp_path, "knrm", {}, KNRM(KNRMConfig(), vectors))
    with pytest.raises(StudyError, match="has no pre-trained encoder to export"):
        export_encoder(model_dir, tmp_path / "vectors.npy", tmp_path / "encoder")
    assert not (tmp_path / "encoder").exists()


def test_single_inputs_by_hand():
    from rankstudy.nn.pretrained import single_inputs

    ids, mask = single_inputs(torch.tensor([[5, 6, 0], [0, 7, 0]]), cls_id=101, sep_id=102)
    assert ids.tolist() == [[101, 5, 6, 102], [101, 7, 102, 0]] and mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    ids, mask = single_inputs(torch.tensor([[5, 6, 7]]), 101, 102, max_length=4)  # cut to max_length
    assert ids.tolist() == [[101, 5, 6, 102]] and mask.all()


def test_the_untrained_bi_encoder_is_the_sentence_encoders_cosine(tokenizer):
    """Mean-pooled, unit-length MiniLM vectors as sentence-transformers computes them, times the scale: the
    zero-shot dense re-scorer it starts from (docs/trec-dl.md)."""
    from rankstudy.models.bi_encoder import BiEncoder, BiEncoderConfig

    model = BiEncoder(from_dict(BiEncoderConfig, {"encoder": "minilm"}, "models.bi_encoder"), None).eval()
    queries = ["what is bm25", "how do plants make food"]
    passages = ["bm25 is a ranking function used by search engines", "photosynthesis turns light into sugar"]
    reference = load_encoder("minilm").eval()

    def sentence_vectors(texts):
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        hidden = reference(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(2).float()
        return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)

    with torch.no_grad():
        expected = 20 * (sentence_vectors(queries) * sentence_vectors(passages)).sum(1)
        scores = model(wp(tokenizer, queries), wp(tokenizer, passages))
        assert torch.allclose(scores, expected, atol=1e-4)
        assert torch.allclose(model(torch.nn.functional.pad(wp(tokenizer, queries), (0, 4)), wp(tokenizer, passages)),
                              scores, atol=1e-5)  # padding changes nothing
    assert model.PARAM_GROUPS == {"encoder.": "encoder"} and model.TOKENIZER == "wordpiece"
    with pytest.raises(ValueError, match="pooling must be one of mean, cls"):
        BiEncoderConfig(pooling="max")
