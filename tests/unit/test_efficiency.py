"""The throughput benchmark (rankstudy.efficiency): a model entry's random_encoder measures an encoder model with a
random BERT of the named size, so a machine without bert-base-uncased measures bert-base's architecture."""

from __future__ import annotations

import mmap

from rankstudy.efficiency import RandomEncoder, anonymous_peak_mb, anonymous_rss_mb, measure_models, reset_peak_rss

SETUP = {"batch": 2, "doc_length": 12, "query_length": 3, "dim": 8, "vocab": 50, "repeats": 1, "threads": 1,
         "train_batch": 1}


def test_an_encoder_model_is_measured_with_a_random_bert_of_the_named_size(monkeypatch):
    sizes = []
    import rankstudy.text.study_encoder as study_encoder

    real = study_encoder.random_bert

    def recording(out, layers, hidden, heads, intermediate):
        sizes.append((layers, hidden, heads, intermediate))
        return real(out, layers, hidden, heads, intermediate)

    monkeypatch.setattr(study_encoder, "random_bert", recording)
    size = {"layers": 2, "hidden": 16, "heads": 2, "intermediate": 32}
    table = measure_models({"bert_cat": {"model": "bert_cat", "random_encoder": size},
                            "knrm": {"model": "knrm"}}, SETUP, ["cpu"])
    assert sizes == [(2, 16, 2, 32)]  # made once, in the parent process
    assert list(table["encoder"]) == ["random BERT, layers 2, hidden 16", ""]
    assert (table["docs_per_ms"] > 0).all() and (table["train_steps_per_s"] > 0).all()


def test_the_random_bert_has_the_named_dimensions(tmp_path):
    from transformers import AutoConfig

    from rankstudy.text.study_encoder import random_bert

    config = AutoConfig.from_pretrained(random_bert(tmp_path / "bert", 3, 24, 4, 48), local_files_only=True)
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size,
            config.vocab_size) == (3, 24, 4, 48, 30522)
    assert RandomEncoder(12, 768, 12, 3072).describe() == "random BERT, layers 12, hidden 768"


def test_an_encoder_with_a_vocabulary_smaller_than_the_setups_is_measured_on_its_own_ids(tmp_path):
    """The setup's ``vocab`` (30,000 at paper scale) is a range of random token ids; an encoder's embedding table
    may be smaller (a miniature BERT's), and an id past it would fail the measurement."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    encoder = tmp_path / "bert"
    encoder.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrst"]
    (encoder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(encoder / "vocab.txt")).save_pretrained(str(encoder))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=16, max_position_embeddings=512)).save_pretrained(str(encoder))
    table = measure_models({"bert_cat": {"model": "bert_cat", "encoder": str(encoder)}}, SETUP, ["cpu"])
    assert (table["docs_per_ms"] > 0).all() and (table["train_steps_per_s"] > 0).all()
    from rankstudy.efficiency import token_range

    assert token_range(torch.nn.Linear(2, 2), 50) == 50  # a model without an encoder: the setup's range


def test_each_model_has_its_own_peak_memory():
    """One process per model, forked from a server that only imported: a large model's peak does not carry over
    into the small one's measured after it."""
    large = {"model": "knrm", "dim": 500_000}  # 50 words x 500,000: 100 MB of embeddings
    table = measure_models({"large": large, "small": {"model": "knrm"}}, SETUP, ["cpu"]).set_index("model")
    assert table.loc["large", "peak_memory_mb"] > 90
    assert table.loc["small", "peak_memory_mb"] < 60


def test_anonymous_peak_counts_memory_freed_before_it_is_read():
    reset_peak_rss()
    before = anonymous_rss_mb()
    # 50 MB of fresh pages, unmapped when closed (an array could reuse heap pages that are resident already when
    # an earlier test kept freed memory in the process: rankstudy.malloc)
    block = mmap.mmap(-1, 50 * 2**20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for page in range(0, len(block), mmap.PAGESIZE):
        block[page] = 1
    block.close()
    assert anonymous_rss_mb() - before < 10
    assert 49 < anonymous_peak_mb() - before < 60
