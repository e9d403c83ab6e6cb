"""Chunker specs: the short strings that name a chunker and its settings (``"Recursive:200"``).

A :class:`ChunkerSpec` is one row of a comparison; :func:`parse_spec` reads it from text (CLI,
TOML grids, notebook parameters); :func:`make_chunker` builds the chunker; :func:`chunk_corpus`
chunks one document through a span cache on disk. The evaluation engine
(:mod:`chunkwise.evaluation.grid`) and chapter 2's driver (:mod:`chunkwise.experiments.chroma`)
both use them, so they live with the chunkers.

The span cache (``$CHUNKWISE_CACHE_DIR/chroma_chunks``, default ``~/.cache/chunkwise``) is keyed
by the package version, the spec, the identity of the model a chunker uses (embedder or LLM)
and the sha256 of the document text; a file holds only ``[start, end]`` pairs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.chunk import Chunk

__all__ = ["ChunkerSpec", "chunk_corpus", "make_chunker", "parse_spec", "span_cache_dir"]


@dataclass(frozen=True)
class ChunkerSpec:
    """One row of the comparison: a chunker and its settings.

    Attributes
    ----------
    chunker : str
        The report's label: "TokenText", "Recursive", "Kamradt", "KamradtMod", "Cluster", "LLM";
        beyond the report, "Sentence" (whole sentences packed to ``size`` tokens) and "Structure"
        (Markdown sections / blank-line blocks up to ``size`` tokens).
    size : int or None
        Chunk size in cl100k_base tokens (max size for Cluster, target average for KamradtMod,
        None for Kamradt and LLM).
    overlap : int
        Overlap in tokens (0 for the semantic chunkers).
    """

    chunker: str
    size: int | None = None
    overlap: int = 0

    @property
    def label(self) -> str:
        parts = [self.chunker]
        if self.size is not None:
            parts.append(str(self.size))
        if self.overlap:
            parts.append(f"overlap {self.overlap}")
        return " ".join(parts)

    def key(self) -> str:
        return f"{self.chunker}|{self.size}|{self.overlap}"


def parse_spec(text: str) -> ChunkerSpec:
    """Parse ``"Recursive:250:125"``, ``"TokenText:200"``, ``"Kamradt"`` or ``"LLM"`` into a spec.

    Raises
    ------
    ValueError
        For an unknown chunker name or a non-integer size/overlap.
    """
    parts = text.split(":")
    name = parts[0]
    if name not in ("TokenText", "Recursive", "Kamradt", "KamradtMod", "Cluster", "LLM", "Sentence", "Structure"):
        raise ValueError(
            f"unknown chunker {name!r} in {text!r}; use TokenText, Recursive, Kamradt, KamradtMod, Cluster, LLM, "
            "Sentence or Structure."
        )
    if len(parts) > 3:
        raise ValueError(f"{text!r} has too many fields; use 'Name:size_tokens:overlap_tokens'.")
    try:
        size = int(parts[1]) if len(parts) > 1 and parts[1] else None
        overlap = int(parts[2]) if len(parts) > 2 else 0
    except ValueError as exc:
        raise ValueError(f"size and overlap in {text!r} must be integers (tokens).") from exc
    if name in ("TokenText", "Recursive", "Cluster", "KamradtMod", "Sentence", "Structure") and size is None:
        raise ValueError(f"{name} needs a size in tokens, e.g. '{name}:250'.")
    if name in ("Kamradt", "LLM") and (size is not None or overlap):
        raise ValueError(f"{name} takes no size or overlap (LangChain / report defaults); got {text!r}.")
    if name in ("Cluster", "KamradtMod", "Sentence", "Structure") and overlap:
        raise ValueError(f"{name} takes no overlap; got {text!r}.")
    if size is not None and size < 1:
        raise ValueError(f"size in {text!r} must be >= 1 token.")
    if not 0 <= overlap < (size or 1):
        raise ValueError(f"overlap in {text!r} must be in [0, size - 1] tokens.")
    if name in ("Cluster", "KamradtMod") and size < 50:
        raise ValueError(f"{name} size must be >= 50 tokens (the size of its pieces); got {text!r}.")
    return ChunkerSpec(name, size, overlap)


def make_chunker(spec: ChunkerSpec, embedder: Any, llm: Any = None) -> Any:
    """Build the chunker of a spec (the report's settings for each family).

    Raises
    ------
    ValueError
        If ``spec`` is an LLM row and no ``llm`` client is given.
    """
    from chunkwise.chunkers import (
        ClusterSemanticChunker,
        FixedTokenChunker,
        KamradtModifiedChunker,
        LLMSemanticChunker,
        RecursiveTokenChunker,
        SemanticChunker,
    )

    if spec.chunker == "TokenText":
        return FixedTokenChunker(spec.size, spec.overlap)
    if spec.chunker == "Recursive":
        return RecursiveTokenChunker(spec.size, spec.overlap, keep_separator="start")
    if spec.chunker == "Kamradt":
        return SemanticChunker(embedder)  # LangChain defaults: buffer 1, percentile 95
    if spec.chunker == "KamradtMod":
        return KamradtModifiedChunker(embedder, avg_chunk_size=spec.size)
    if spec.chunker == "Cluster":
        return ClusterSemanticChunker(embedder, max_chunk_size=spec.size)
    if spec.chunker == "Sentence":
        from chunkwise.chunkers import SentenceChunker

        return SentenceChunker(spec.size)
    if spec.chunker == "Structure":
        from chunkwise.chunkers import StructureChunker

        return StructureChunker(spec.size)
    if spec.chunker == "LLM":
        if llm is None:
            raise ValueError("The LLM chunker needs an LLM client (chunkwise.llm.LLMClient).")
        return LLMSemanticChunker(llm)
    raise ValueError(f"unknown chunker {spec.chunker!r}")


def span_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """The chunk-span cache folder: ``cache_dir`` if given, else ``$CHUNKWISE_CACHE_DIR/chroma_chunks``
    (default ``~/.cache/chunkwise/chroma_chunks``)."""
    if cache_dir is not None:
        return Path(cache_dir)
    base = os.environ.get("CHUNKWISE_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "chunkwise") / "chroma_chunks"


def chunk_corpus(
    spec: ChunkerSpec,
    name: str,
    text: str,
    embedder: Any,
    llm: Any = None,
    cache_dir: str | Path | None = None,
) -> list[Chunk]:
    """Chunk one corpus, reading/writing the span cache.

    The cache key is the spec, the embedder's name (semantic chunkers) or the LLM's identity,
    and the sha256 of the corpus text. The file holds only spans; texts are re-sliced.
    """
    ident = ""
    if spec.chunker in ("Kamradt", "KamradtMod", "Cluster"):
        ident = getattr(embedder, "name", type(embedder).__name__)
    elif spec.chunker == "LLM":
        ident = getattr(llm, "model_identity", repr(llm))
    from chunkwise import __version__

    # The package version is part of the key: a fixed chunker never serves spans cached by an old one.
    digest = hashlib.sha256(f"{__version__}\0{spec.key()}\0{ident}\0".encode() + text.encode()).hexdigest()[:24]
    path = span_cache_dir(cache_dir) / f"{name}-{spec.chunker}-{spec.size}-{spec.overlap}-{digest}.json"
    if path.exists():
        spans = json.loads(path.read_text())
        return [Chunk(text[s:e], s, e) for s, e in spans]
    chunks = make_chunker(spec, embedder, llm).split(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([[c.start, c.end] for c in chunks]))
    tmp.replace(path)  # atomic: an interrupted run never leaves a half-written cache file
    return chunks



# The name chapter 2's driver and older callers used.
_cache_dir = span_cache_dir
