"""Lexical retrieval: Okapi BM25 (``bm25s``) over English or Chinese tokens.

The tokenizer is chosen by the chunks' language:

==========  ============  =====================================================================
language    tokenizer     tokens
==========  ============  =====================================================================
``"en"``    ``"stem"``    bm25s' English pipeline (scikit-learn's ``CountVectorizer`` words):
            (default)     lower-case, the regex ``(?u)\\b\\w\\w+\\b`` (words of two or more
                          letters/digits), bm25s' English stopword list removed, then the
                          Snowball English ("Porter2") stemmer (NLTK's implementation), so
                          ``chunking`` and ``chunks`` both become ``chunk``
``"en"``    ``"words"``   the same without stemming
``"zh"``    ``"jieba"``   jieba's search-engine mode (:func:`tokenize_zh`)
            (default)
``"zh"``    ``"char"``    one token per CJK character, like Elasticsearch's standard analyzer
==========  ============  =====================================================================

jieba is not a core dependency: it comes with the ``crud`` extra (``pip install
'chunkwise[crud]'``), and the ``"jieba"`` tokenizer raises an ImportError saying so when it is
missing; ``"char"`` needs nothing.

English tokens equal ``bm25s.tokenize(texts, stopwords="en", stemmer=...)``'s (a test checks
the scores against bm25s used directly), with two documented differences: a chunk without any
token stays empty (bm25s gives it one empty-string token, which counts in the average length),
and the tokenization runs here so that it can be split across processes and cached.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.retrieval.base import DEFAULT_TOP_K, Hit, as_pairs, check_top_k

__all__ = ["LANGUAGES", "BM25Retriever", "tokenize", "tokenize_en", "tokenize_zh"]

#: The tokenizers of each language, the default first.
LANGUAGES: dict[str, tuple[str, ...]] = {"en": ("stem", "words"), "zh": ("jieba", "char")}

# ---------------------------------------------------------------------------------------------
# Chinese
# ---------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"\w", re.UNICODE)
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CHAR_TOKEN_RE = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+", re.UNICODE)


def _import_jieba() -> Any:
    """The ``jieba`` module, or an ImportError that says which extra installs it."""
    try:
        import jieba
    except ImportError as exc:
        raise ImportError(
            "Chinese BM25 tokens (tokenizer 'jieba') need the jieba package, which comes with the "
            "crud extra: pip install 'chunkwise[crud]' (or use tokenizer 'char', which needs nothing)."
        ) from exc
    return jieba


@functools.cache
def _jieba() -> Any:
    jieba = _import_jieba()
    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def tokenize_zh(text: str, mode: str = "jieba") -> list[str]:
    """Tokens of a (mostly Chinese) text for BM25.

    Parameters
    ----------
    text : str
    mode : {"jieba", "char"}, default "jieba"
        ``"jieba"``: jieba's search-engine mode (``jieba.lcut_for_search``: the words of the
        accurate mode, HMM on, plus the dictionary words inside long ones, so ``苹果公司`` also
        gives ``苹果`` and ``公司`` and matches a query about ``苹果手机``), lower-cased, tokens
        without any letter or digit (punctuation, spaces) dropped. ``"char"``: every CJK character is a
        token and every run of other letters/digits one lower-cased token -- how Elasticsearch's
        standard analyzer (CRUD-RAG's BM25) treats Chinese.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        For another ``mode``.
    """
    if mode == "jieba":
        return [t.lower() for t in _jieba().lcut_for_search(text) if _WORD_RE.search(t)]
    if mode == "char":
        return _CHAR_TOKEN_RE.findall(text.lower())
    raise ValueError(f"tokenizer mode must be 'jieba' or 'char', got {mode!r}")


# ---------------------------------------------------------------------------------------------
# English
# ---------------------------------------------------------------------------------------------

# bm25s' (and scikit-learn CountVectorizer's) default token pattern.
_EN_TOKEN_RE = re.compile(r"(?u)\b\w\w+\b")


@functools.cache
def _en_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


@functools.cache
def _en_stemmer() -> Callable[[str], str]:
    """NLTK's Snowball English stemmer, memoised per word (a corpus repeats its words)."""
    from nltk.stem.snowball import EnglishStemmer

    return functools.cache(EnglishStemmer().stem)


def tokenize_en(text: str, mode: str = "stem") -> list[str]:
    """Tokens of an English text for BM25 (bm25s' English pipeline).

    Parameters
    ----------
    text : str
    mode : {"stem", "words"}, default "stem"
        Both: lower-cased words of two or more letters/digits (regex ``(?u)\\b\\w\\w+\\b``),
        bm25s' English stopwords removed. ``"stem"`` then applies the Snowball English stemmer
        (NLTK's ``EnglishStemmer``; no data download needed).

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        For another ``mode``.
    """
    if mode not in ("stem", "words"):
        raise ValueError(f"tokenizer mode must be 'stem' or 'words', got {mode!r}")
    stop = _en_stopwords()
    words = [w for w in _EN_TOKEN_RE.findall(text.lower()) if w not in stop]
    if mode == "words":
        return words
    stem = _en_stemmer()
    return [stem(w) for w in words]


def tokenize(text: str, language: str, tokenizer: str | None = None) -> list[str]:
    """Tokens of ``text`` for BM25 in ``language`` (see :data:`LANGUAGES`).

    Parameters
    ----------
    text : str
    language : {"en", "zh"}
    tokenizer : str, optional
        One of ``LANGUAGES[language]``; default the first.

    Raises
    ------
    ValueError
        For an unknown language or a tokenizer of another language.
    """
    tok = _check_language(language, tokenizer)
    return tokenize_en(text, tok) if language == "en" else tokenize_zh(text, tok)


def _check_language(language: Any, tokenizer: Any) -> str:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {sorted(LANGUAGES)}, got {language!r}")
    allowed = LANGUAGES[language]
    if tokenizer is None:
        return allowed[0]
    if tokenizer not in allowed:
        raise ValueError(f"tokenizer for language {language!r} must be one of {list(allowed)}, got {tokenizer!r}")
    return str(tokenizer)


# Batch functions at module level, so that a process pool can pickle them by name.
def _tokenize_jieba_batch(texts: list[str]) -> list[list[str]]:
    return [tokenize_zh(t, "jieba") for t in texts]


def _tokenize_char_batch(texts: list[str]) -> list[list[str]]:
    return [tokenize_zh(t, "char") for t in texts]


def _tokenize_stem_batch(texts: list[str]) -> list[list[str]]:
    return [tokenize_en(t, "stem") for t in texts]


def _tokenize_words_batch(texts: list[str]) -> list[list[str]]:
    return [tokenize_en(t, "words") for t in texts]


_BATCH_FNS = {
    "jieba": _tokenize_jieba_batch,
    "char": _tokenize_char_batch,
    "stem": _tokenize_stem_batch,
    "words": _tokenize_words_batch,
}


def _tokenize_to_ids(
    texts: Sequence[str], mode: str, n_jobs: int, show_progress: bool
) -> tuple[list[Any], dict[str, int]]:
    """Token ids of every text (``array('i')`` each, 4 bytes a token) and the vocabulary.

    Tokens are mapped to ids as batches arrive, so a large corpus never sits in memory as
    Python strings (the whole CRUD-RAG mirror corpus has about 28 million jieba tokens).
    """
    from array import array

    fn = _BATCH_FNS.get(mode)
    if fn is None:
        raise ValueError(f"tokenizer must be one of {sorted(_BATCH_FNS)}, got {mode!r}")
    if mode == "jieba":
        _jieba()  # load the dictionary once, before any fork
    elif mode == "stem":
        _en_stemmer()
    vocab: dict[str, int] = {}
    ids: list[Any] = []

    def add(batch_tokens: list[list[str]]) -> None:
        for toks in batch_tokens:
            row = array("i")
            for t in toks:
                i = vocab.get(t)
                if i is None:
                    i = vocab[t] = len(vocab)
                row.append(i)
            ids.append(row)

    size = 256
    batches = (list(texts[i : i + size]) for i in range(0, len(texts), size))
    bar = None
    if show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(texts), desc=f"tokenize ({mode})", unit="doc")
    try:
        if n_jobs > 1 and len(texts) > size:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            with ctx.Pool(n_jobs) as pool:
                for toks in pool.imap(fn, batches):
                    add(toks)
                    if bar is not None:
                        bar.update(len(toks))
        else:
            for b in batches:
                add(fn(b))
                if bar is not None:
                    bar.update(len(b))
    finally:
        if bar is not None:
            bar.close()
    return ids, vocab


class BM25Retriever:
    """Okapi BM25 over English or Chinese chunks, with the ``bm25s`` library.

    Scores are Lucene's BM25 (``bm25s`` method ``"lucene"``:
    ``idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with
    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, summed over the query's tokens, a token
    repeated in the query counting each time), the function Elasticsearch uses, with its defaults
    ``k1 = 1.2``, ``b = 0.75``. Like Elasticsearch's ``match`` query, only chunks sharing a token
    with the question are returned (zero scores are dropped).

    Parameters
    ----------
    chunks : iterable
        Chunk objects (``chunk_id``, ``text``), ``(id, text)`` pairs, or strings.
    language : {"en", "zh"}
        The chunks' language; it chooses the tokenizer (module docstring).
    tokenizer : str, optional
        ``"stem"`` (default) or ``"words"`` for English, ``"jieba"`` (default) or ``"char"`` for
        Chinese; see :func:`tokenize_en` and :func:`tokenize_zh`.
    k1, b : float
        BM25 parameters (Elasticsearch defaults).
    n_jobs : int, default 1
        Processes for tokenizing (jieba runs about 0.2 M characters per second per core).
    cache_dir : str or os.PathLike, optional
        Save the index under ``<cache_dir>/bm25-<key>`` and load it next time; the key hashes the
        texts, their order and every setting.
    show_progress : bool, default False
    name : str, default "bm25"

    Attributes
    ----------
    ids, texts : list of str
    language, tokenizer : str
    index_seconds : float
        Time spent tokenizing and indexing (0 when loaded from the cache).

    Raises
    ------
    ValueError
        For an unknown language, a tokenizer of another language, or repeated chunk ids.

    References
    ----------
    S. Robertson and H. Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
    Foundations and Trends in Information Retrieval 3(4), 2009. X. H. Lù, "BM25S: Orders of
    magnitude faster lexical search via eager sparse scoring", arXiv:2407.03618, 2024.
    """

    def __init__(
        self,
        chunks: Iterable[Any],
        *,
        language: str,
        tokenizer: str | None = None,
        k1: float = 1.2,
        b: float = 0.75,
        n_jobs: int = 1,
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress: bool = False,
        name: str = "bm25",
    ) -> None:
        import bm25s

        self.tokenizer = _check_language(language, tokenizer)
        self.language = language
        self.ids, self.texts = as_pairs(chunks)
        self.k1, self.b = float(k1), float(b)
        self.name = name
        t0 = time.perf_counter()
        path = self._cache_path(cache_dir) if cache_dir is not None else None
        if path is not None and (path / "params.index.json").is_file():
            self._bm25 = bm25s.BM25.load(str(path))
            self.index_seconds = 0.0
            return
        token_ids, vocab = _tokenize_to_ids(self.texts, self.tokenizer, max(1, int(n_jobs)), show_progress)
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        if self.texts:
            self._bm25.index((token_ids, vocab), show_progress=show_progress)
        del token_ids
        self.index_seconds = time.perf_counter() - t0
        if path is not None and self.texts:
            path.mkdir(parents=True, exist_ok=True)
            self._bm25.save(str(path))

    def _cache_path(self, cache_dir: str | os.PathLike[str]) -> Path:
        import bm25s

        h = hashlib.sha256()
        if self.language == "zh":  # the key of the Chinese-only version, so its saved indexes still load
            settings = f"bm25s={bm25s.__version__}|tok={self.tokenizer}|k1={self.k1}|b={self.b}|lucene"
        else:
            settings = f"bm25s={bm25s.__version__}|lang={self.language}|tok={self.tokenizer}|k1={self.k1}|b={self.b}|lucene"
        if self.tokenizer == "jieba":
            settings += f"|jieba={_import_jieba().__version__}"
        elif self.tokenizer == "stem":
            import nltk

            settings += f"|nltk={nltk.__version__}"
        h.update(settings.encode())
        for cid, text in zip(self.ids, self.texts):
            h.update(b"\0" + cid.encode("utf-8", "surrogatepass") + b"\1" + text.encode("utf-8", "surrogatepass"))
        return Path(cache_dir).expanduser() / f"bm25-{h.hexdigest()[:20]}"

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        return (
            f"BM25Retriever(n={len(self)}, language={self.language!r}, tokenizer={self.tokenizer!r}, "
            f"k1={self.k1}, b={self.b})"
        )

    def scores(self, question: str) -> np.ndarray:
        """BM25 score of every chunk for ``question`` (float32, shape (n,), corpus order)."""
        if not self.texts:
            return np.zeros(0, dtype=np.float32)
        q = tokenize(question, self.language, self.tokenizer)
        vocab = self._bm25.vocab_dict
        q = [t for t in q if t in vocab]
        if not q:
            return np.zeros(len(self.texts), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(q), dtype=np.float32)

    def retrieve(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:
        """The ``top_k`` best chunks with a positive score; ties by corpus order.

        Raises
        ------
        ValueError
            If ``top_k`` is not an int >= 0.
        """
        top_k = check_top_k(top_k)
        s = self.scores(question)
        if top_k == 0 or s.size == 0:
            return []
        positive = np.flatnonzero(s > 0)
        if positive.size == 0:
            return []
        order = positive[np.lexsort((positive, -s[positive]))][:top_k]
        return [Hit(self.ids[i], self.texts[i], float(s[i])) for i in order]
