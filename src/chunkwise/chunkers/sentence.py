"""Sentence-based packing: whole sentences packed into a token budget."""

from __future__ import annotations

from typing import Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers._packing import check_nonneg_int, make_counter, pack_units
from chunkwise.chunkers.base import check_positive_int
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.text import split_sentences
from chunkwise.tokens import DEFAULT_ENCODING, TokenSpanner, as_spanner

__all__ = ["SentenceChunker"]


class SentenceChunker:
    """Pack whole sentences into chunks of at most ``chunk_size`` tokens.

    The "sentence-based" row of the chunking guide the book starts from: sentences are
    found first and a chunk never ends inside one. This is the splitter behind LlamaIndex's
    ``SentenceSplitter`` and LangChain's NLTK/spaCy splitters, written here on chunkwise's
    robust sentence splitter (:func:`chunkwise.text.split_sentences`, ``mode="robust"``:
    abbreviations, decimals, CJK terminators, blank lines), so ``"Dr. Lee"`` and
    ``"9 a.m."`` never end a sentence.

    Rule, with the sentences ``s_0, s_1, ...`` of the text (spans without the whitespace
    between them):

    1. a chunk starts at a sentence and takes the following sentences while its text --
       the source from the first sentence's first character to the last sentence's last
       character, whitespace between sentences included -- measures at most
       ``chunk_size`` tokens as a whole;
    2. the next chunk starts ``sentence_overlap`` sentences before the end of the previous
       one (the overlap is whole sentences); it always starts after the previous chunk's
       first sentence, and drops repeated sentences from its front while they and the first
       new sentence together are over ``chunk_size`` (so each chunk adds a sentence);
    3. **a sentence over ``chunk_size`` on its own** is never packed with others: it is
       sub-split with :class:`~chunkwise.chunkers.recursive.RecursiveTokenChunker`
       (``chunk_size`` tokens, no overlap, default separators, so it is cut at lines,
       punctuation, spaces, then characters), and its pieces are emitted alone with
       ``metadata["split_sentence"] = True``. The sentences before and after it are packed
       separately; overlap never reaches across it.

    Every chunk therefore holds at most ``chunk_size`` tokens (the recursive chunker's
    only exception: a single character that is itself more tokens than ``chunk_size``).

    Parameters
    ----------
    chunk_size : int, default 256
        Token budget per chunk, ``>= 1``, in tokens of the tokenizer.
    sentence_overlap : int, default 0
        Number of sentences repeated at the start of the next chunk, ``>= 0``.
    encoding_name : str, default "cl100k_base"
        tiktoken encoding used when ``tokenizer`` is None.
    tokenizer : TokenSpanner, tiktoken-like object or str, optional
        Anything :func:`chunkwise.tokens.as_spanner` accepts, e.g.
        :class:`~chunkwise.tokens.WhitespaceSpanner` (words) for hand-checkable sizes.

    Attributes
    ----------
    spanner : TokenSpanner
        The tokenizer; ``spanner.name`` is recorded in every chunk's metadata.

    Raises
    ------
    ValueError
        If ``chunk_size`` is not an int ``>= 1`` or ``sentence_overlap`` is not an int
        ``>= 0``.
    TypeError
        If the tokenizer is of an unknown kind.

    References
    ----------
    .. [1] The semantic-chunking guide this book starts from (``shared/seeds``), table row
       "Sentence-based: packs whole sentences up to a size limit".
    .. [2] LlamaIndex, ``SentenceSplitter``,
       https://docs.llamaindex.ai/en/stable/api_reference/node_parsers/sentence_splitter/
    .. [3] Kiss, T. and Strunk, J. (2006). Unsupervised Multilingual Sentence Boundary
       Detection. *Computational Linguistics* 32(4) -- the punkt-style rules of the splitter.

    Examples
    --------
    >>> from chunkwise.tokens import WhitespaceSpanner
    >>> chunker = SentenceChunker(4, tokenizer=WhitespaceSpanner())
    >>> [c.text for c in chunker.split("A b. C d. E f g. H.")]
    ['A b. C d.', 'E f g. H.']
    """

    def __init__(
        self,
        chunk_size: int = 256,
        sentence_overlap: int = 0,
        encoding_name: str = DEFAULT_ENCODING,
        tokenizer: Any = None,
    ) -> None:
        self.chunk_size = check_positive_int("chunk_size", chunk_size, "tokens")
        self.sentence_overlap = check_nonneg_int("sentence_overlap", sentence_overlap, "sentences")
        self.encoding_name = encoding_name
        self.spanner: TokenSpanner = as_spanner(tokenizer, encoding_name)
        self._count = make_counter(self.spanner)
        self._splitter = RecursiveTokenChunker(
            self.chunk_size, 0, length_function=self._count, keep_separator="end"
        )

    def __repr__(self) -> str:
        return (
            f"SentenceChunker(chunk_size={self.chunk_size}, sentence_overlap={self.sentence_overlap}, "
            f"tokenizer={self.spanner!r})"
        )

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` into chunks of whole sentences.

        Parameters
        ----------
        text : str

        Returns
        -------
        list of Chunk
            In source order, ``text[c.start:c.end] == c.text``. ``metadata``:
            ``"n_tokens"`` and ``"tokenizer"`` (the chunk's size and the tokenizer's name),
            ``"sentence_start"``/``"sentence_end"`` (half-open range of sentence indices of
            :func:`~chunkwise.text.split_sentences`), and ``"split_sentence"`` (True for
            the pieces of a sentence over ``chunk_size``). ``""`` and whitespace give
            ``[]``.

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        sentences = split_sentences(text, mode="robust")
        name = self.spanner.name
        out: list[Chunk] = []

        def pack(lo: int, hi: int) -> None:
            spans = [(s.start, s.end) for s in sentences[lo:hi]]
            for i, j, n in pack_units(text, spans, self.chunk_size, self._count, self.sentence_overlap):
                a, b = spans[i][0], spans[j - 1][1]
                out.append(
                    Chunk(text[a:b], a, b, {
                        "n_tokens": n, "tokenizer": name, "sentence_start": lo + i,
                        "sentence_end": lo + j, "split_sentence": False,
                    })
                )

        run_start = 0
        for k, s in enumerate(sentences):
            n = self._count(s.text)
            if n <= self.chunk_size:
                continue
            pack(run_start, k)
            for piece in self._splitter.split(s.text):
                a, b = s.start + piece.start, s.start + piece.end
                out.append(
                    Chunk(text[a:b], a, b, {
                        "n_tokens": self._count(piece.text), "tokenizer": name, "sentence_start": k,
                        "sentence_end": k + 1, "split_sentence": True,
                    })
                )
            run_start = k + 1
        pack(run_start, len(sentences))
        return out
