"""The base of every re-ranker and the capabilities it declares (docs/neural.md, "Models")."""

from __future__ import annotations

from typing import ClassVar, Mapping

from torch import Tensor, nn

from rankstudy.nn.pretrained import load_encoder, load_tokenizer, pair_inputs, special_ids, uses_token_types


class Ranker(nn.Module):
    """``forward(query ids [B, Lq], document ids [B, Ld]) -> scores [B]``; id 0 is padding.

    Capabilities, class attributes that training and scoring read (a model overrides what applies):

    - ``PARAM_GROUPS``: parameter-name prefix -> the ``training.learning_rates`` group of those
      parameters (e.g. ``{"encoder.": "encoder"}``); the rest are in group ``default``.
    - ``NEEDS_IDF``: ``build_model`` passes ``idf``, ln(N / df) per token id over the training documents.
    - ``CLS_HEAD``: ``self.score`` reads h_[CLS], so ``export-encoder`` saves it with the encoder and a
      warm-started model first scores as this one.
    - ``LENGTH_GROUPS``: a training pass may score the documents in groups of similar length, each group padded
      to its own longest (``train.length_groups``); False where the training output is not per document.
    - ``THREAD_GROUPS``: with several torch threads, a training pass's length groups may run forward and backward
      on separate threads (``train.length_groups.backward_in_length_groups``): the forward pass changes no
      module state, and draws random numbers only through dropout (checked at run time).
    - ``TOKENIZER``: the ids the model reads: ``"word"`` (the study's vocabulary, with its word vectors)
      or ``"wordpiece"`` (its encoder's own ids, ``rankstudy.text.wordpiece``); training and scoring
      check the token stores against it (``experiment.check_token_stores``).
    - ``DOCUMENT_ENCODING``: the model contextualises a document without its query (TK, TKL):
      ``encode_documents(document ids [B, Ld])`` -> a tuple of tensors, the documents first, and
      ``score_encoded(query ids [P, Lq], encoding, rows [P])`` -> scores [P] of each query against document
      ``rows[p]`` of the encoding, ``forward``'s scores up to float rounding; re-ranking can then encode each
      document once for all the queries that rank it (``rankstudy.rerank``).
    - ``REGIONS``: the model selects regions of a document and says which (``score_with_regions(query,
      document) -> (scores, region positions)``; TKL), read by the ``regions`` step.
    """

    PARAM_GROUPS: ClassVar[Mapping[str, str]] = {}
    NEEDS_IDF: ClassVar[bool] = False
    CLS_HEAD: ClassVar[bool] = False
    LENGTH_GROUPS: ClassVar[bool] = True
    THREAD_GROUPS: ClassVar[bool] = False
    TOKENIZER: ClassVar[str] = "word"
    DOCUMENT_ENCODING: ClassVar[bool] = False
    REGIONS: ClassVar[bool] = False


class EncoderRanker(Ranker):
    """A ranker over a pre-trained encoder (BERT[CLS], FirstP/MaxP/PARADE/IDCM, the sparse BERTs,
    Socialformer): it reads the encoder's own WordPiece ids, builds [CLS] q [SEP] d [SEP] inputs and
    fine-tunes the encoder in optimiser group ``encoder``."""

    PARAM_GROUPS = {"encoder.": "encoder"}
    TOKENIZER = "wordpiece"  # token stores of the encoder's WordPiece ids (rankstudy.text.wordpiece)

    def _load_encoder(self, config, **options) -> None:
        """Set ``cls_id``, ``sep_id``, ``encoder`` (``config.encoder``'s first ``config.encoder_layers`` layers,
        word embeddings trained if ``config.train_embeddings``) and ``use_token_types``; ``options`` go to
        ``nn.pretrained.load_encoder``. The encoder is the first module a model creates (its weights do not
        depend on the seed's draws)."""
        self.cls_id, self.sep_id = special_ids(load_tokenizer(config.encoder), config.encoder)
        self.encoder = load_encoder(config.encoder, layers=config.encoder_layers,
                                    train_embeddings=config.train_embeddings, **options)
        self.use_token_types = uses_token_types(self.encoder)

    def encoder_inputs(self, query: Tensor, document: Tensor, max_length: int) -> dict[str, Tensor]:
        """The encoder's keyword inputs for padded query and document ids (``nn.pretrained.pair_inputs``)."""
        input_ids, token_type_ids, attention_mask = pair_inputs(query, document, self.cls_id, self.sep_id, max_length)
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.use_token_types:
            inputs["token_type_ids"] = token_type_ids
        return inputs
