"""The shared stages' inputs and settings, as the workflow's rules read them: the first stage (Lucene, official
and dense systems) and the neural text pipeline (vocabularies, token stores, word vectors, study encoders)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from rankstudy.papers.section import Study

# the keys of a dense system that are its encoder's settings (rankstudy.dense.DenseConfig)
DENSE_KEYS = ("encoder", "kind", "pooling", "l2_norm", "max_length", "batch_size")


@dataclass(frozen=True)
class FirstStage:
    plan: Study

    def names(self, *models: str) -> list[str]:
        """The first-stage systems of these models: bm25/ql search the index, official systems are an irds
        split's own candidate lists (scoreddocs), dense ones pyserini's dense retrieval (rankstudy.dense)."""
        return [name for name, spec in self.plan.systems.items() if spec["model"] in models]

    @property
    def threads(self) -> int:
        """first_stage.threads: Anserini's threads (and the rules' thread request)."""
        return self.plan.config["first_stage"]["threads"]

    @property
    def terms_tolerance(self) -> float:
        """The allowed relative gap between an index's total terms and the collection's estimate."""
        return self.plan.config["first_stage"]["terms_tolerance"]

    def index_stats(self, dataset: str) -> dict[str, int]:
        """The exact statistics a dataset's index must have (its index_stats; none: checked against the collection)."""
        return self.plan.datasets[dataset].get("index_stats", {})

    def model(self, system: str) -> str:
        """A system's retrieval model: bm25, ql, official or dense."""
        return self.plan.systems[system]["model"]

    def device(self, system: str) -> str:
        """A dense system's encoder device: its ``device``, else auto."""
        return self.plan.systems[system].get("device", "auto")

    def search_params(self, system: str) -> dict[str, Any]:
        """A Lucene system's ranking parameters (k1 and b, or mu)."""
        return {key: value for key, value in self.plan.systems[system].items()
                if key not in ("model", "splits", "hits", "label")}

    def hits(self, system: str) -> int:
        """Candidates per query of a first-stage system: its own ``hits``, else first_stage.hits."""
        return self.plan.systems[system].get("hits", self.plan.config["first_stage"]["hits"])

    def rescored(self, dataset: str, system: str, split: str) -> list[str]:
        """The lists a dense system with ``rescore`` scores instead of searching (none for a dense search)."""
        source = self.plan.systems[system].get("rescore")
        return [f"runs/{dataset}/{source}.{split}.run"] if source else []

    def dense_settings(self, system: str) -> dict[str, Any]:
        """A dense system's DenseConfig settings (its encoder's, no first-stage keys)."""
        return {key: value for key, value in self.plan.systems[system].items() if key in DENSE_KEYS}

    def official_run(self, dataset: str) -> list[str]:
        """A local dataset's given candidates (``local.candidates``, exported by its dataset rule) that its official
        lists come from; none for an irds dataset (its scoreddocs) nor a fold (rule fold_candidates; Snakemake asks
        every rule whose output matches)."""
        spec = self.plan.datasets.get(dataset, {"source": "fold"})
        return [f"data/{dataset}/candidates.run"] if spec["source"] == "local" and "candidates" in spec["local"] else []

    def official_source(self, dataset: str, split: str) -> str:
        """official-candidates' source option: the local dataset's candidates, or the irds split's ids (quoted)."""
        given = self.official_run(dataset)
        if given:
            return f"--run {given[0]}"
        return "--ids " + " ".join(shlex.quote(i) for i in self.irds_ids(dataset, split))

    def irds_ids(self, dataset: str, split: str) -> list[str]:
        """The ir_datasets id(s) of an irds dataset's split."""
        ids = self.plan.datasets[dataset]["irds"]["splits"][split]
        return [ids] if isinstance(ids, str) else ids

    def metrics(self) -> list[str]:
        """The metric files of every first-stage system on every split it runs."""
        return [f"results/metrics/{dataset}/{system}.{split}.csv" for dataset in self.plan.studied
                for system in self.plan.systems for split in self.plan.system_splits(system, dataset)]


@dataclass(frozen=True)
class Text:
    plan: Study

    @property
    def embeddings(self) -> Mapping[str, Mapping[str, Any]]:
        return self.plan.config["neural"]["embeddings"]

    def is_wordpiece(self, emb: str) -> bool:
        """Text of this entry is a pre-trained encoder's WordPiece ids (no vocabulary, no word vectors)."""
        return self.embeddings[emb].get("method") == "wordpiece"

    def min_count(self, emb: str) -> int:
        """The vocabulary keeps terms seen at least this often."""
        return self.embeddings[emb]["vocab_min_count"]

    def vocabulary_inputs(self, emb: str) -> dict[str, Any]:
        """The collection (and, with include_queries, every split's queries) a vocabulary counts."""
        dataset = self.embeddings[emb]["dataset"]
        queries = [f"data/{dataset}/queries.{split}.tsv" for split in self.plan.dataset_splits(dataset)]
        return {"collection": f"data/{dataset}/collection.tsv",
                "queries": queries if self.embeddings[emb].get("include_queries") else []}

    def store_inputs(self, emb: str) -> dict[str, Any]:
        """What a token store of this entry needs besides its text: the vocabulary, or the encoder's build."""
        if self.is_wordpiece(emb):
            return {"vocab": [], "encoder": self.plan.encoder_build(self.embeddings[emb]["encoder"])}
        return {"vocab": f"text/{emb}/vocab", "encoder": []}

    def tokens_arg(self, emb: str, dataset: str) -> str:
        """The store command's tokenizer option, the encoder's path shell-quoted (it comes from the config); a
        vocabulary applied to a dataset that neither it nor its word vectors were built on must know
        neural.min_vocabulary_coverage of that dataset's tokens (a model reused across collections)."""
        entry = self.embeddings[emb]
        if self.is_wordpiece(emb):
            return f"--encoder {shlex.quote(self.plan.encoder_location(entry['encoder']))}"
        if dataset == entry["dataset"] or dataset in entry.get("corpus", []):
            return f"--vocab text/{emb}/vocab"
        return f"--vocab text/{emb}/vocab --min-coverage {self.plan.config['neural']['min_vocabulary_coverage']}"

    def vectors_inputs(self, emb: str) -> dict[str, Any]:
        """The vocabulary and token stores word vectors train on (default corpus: the vocabulary's dataset)."""
        if self.is_wordpiece(emb):
            return {"vocab": [], "store": []}
        corpus = self.embeddings[emb].get("corpus") or [self.embeddings[emb]["dataset"]]
        return {"vocab": f"text/{emb}/vocab", "store": [f"text/{emb}/{dataset}/collection" for dataset in corpus]}

    def vectors_settings(self, emb: str) -> dict[str, Any]:
        """The embeddings command's settings: the entry less what only the workflow reads."""
        return {key: value for key, value in self.embeddings[emb].items()
                if key not in ("dataset", "corpus", "vocab_min_count", "include_queries")}

    def encoder_inputs(self, name: str) -> dict[str, str]:
        """A study encoder's pre-training inputs: its collection and the word vectors it starts from."""
        spec = self.plan.encoders[name]
        return {"collection": f"data/{spec['dataset']}/collection.tsv", "vocab": f"text/{spec['embeddings']}/vocab",
                "embeddings": f"text/{spec['embeddings']}/embeddings.npy"}

    def encoder_settings(self, name: str) -> dict[str, Any]:
        return {key: value for key, value in self.plan.encoders[name].items() if key not in ("dataset", "embeddings")}


# the keys of a neural.teachers encoder entry that are its encoder's settings (train.teachers.TeacherConfig)
TEACHER_KEYS = ("kind", "encoder", "pooling", "l2_norm", "scale", "max_length", "query_max_length", "batch_size")


@dataclass(frozen=True)
class Teachers:
    """neural.teachers: Margin-MSE teachers whose scores the training triples carry (train.teachers). An entry is
    an encoder (``kind``, ``encoder``, ...: its vectors are made once per dataset) or an ensemble (``members``:
    names of encoder entries); either may mine harder negatives (``mining``)."""
    plan: Study

    @property
    def entries(self) -> Mapping[str, Mapping[str, Any]]:
        return self.plan.config["neural"].get("teachers", {})

    def members(self, name: str) -> list[str]:
        """The encoder entries whose vectors a teacher reads: its members, or itself."""
        return list(self.entries[name].get("members", [name]))

    def encoder_settings(self, name: str) -> dict[str, Any]:
        """An encoder teacher's TeacherConfig settings (its vectors' job)."""
        return {key: value for key, value in self.entries[name].items() if key in TEACHER_KEYS}

    def vectors(self, dataset: str, name: str) -> list[str]:
        """The vectors directories of a teacher's members over a dataset's collection and queries."""
        return [f"teachers/{dataset}/{member}" for member in self.members(name)]

    def triples_args(self, dataset: str, name: str) -> str:
        """rankstudy teacher-triples' settings: the members' scales, the mining, the students' validation measure
        and depth (the teacher is validated as they are), the dataset's training grade, the seed."""
        scales = " ".join(str(float(self.entries[member].get("scale", 1.0))) for member in self.members(name))
        training = self.plan.config["neural"]["training"]
        mining = json.dumps(dict(self.entries[name].get("mining", {})), sort_keys=True)
        return (f"--scales {scales} --mining {shlex.quote(mining)} --metric {shlex.quote(training['metric'])}"
                f" --validation-depth {training['validation_depth']}"
                f" --rel-threshold {self.plan.train_min_grade(dataset)} --seed {self.plan.seed}")
