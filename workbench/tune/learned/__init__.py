"""Learned sampling (TLM-style): tensor sentences, a decision model trained from databases of
measured records, the ``LearnedSampling`` search strategy, and a decision-aware ranking cost
model. See ``docs/design.md`` ("Learned sampling") for what was measured and why this model."""

from .sentence import TensorSentence, Word, sentence_of, sentence_of_record
from .model import DecisionModel, Proposer, tasks_of
from .strategy import LearnedSampling
from .cost import DecisionAwareModel, decision_vector, rank_metrics

__all__ = [
    "TensorSentence",
    "Word",
    "sentence_of",
    "sentence_of_record",
    "DecisionModel",
    "Proposer",
    "tasks_of",
    "LearnedSampling",
    "DecisionAwareModel",
    "decision_vector",
    "rank_metrics",
]
