"""Chunker specs: the short strings that name a chunker and its settings (``"Recursive:200"``).

A :class:`ChunkerSpec` is one row of a comparison; :func:`parse_spec` reads it from text (CLI,
TOML grids, notebook parameters); :func:`make_chunker` builds the chunker; :func:`chunk_corpus`
chunks one document through a span cache on disk. The evaluation engine
(:mod:`chunkwise.evaluation.grid`) and chapter 2's driver (:mod:`chunkwise.experiments.chroma`)
both use them, so they live with the chunkers.

The span cache (``$CHUNKWISE_CACHE_DIR/spans``, default ``~/.cache/chunkwise/spans``) is keyed
by the package version, the spec, the identity of the model a chunker uses (embedder or LLM)
and the sha256 of the document text; a file holds only ``[start, end]`` pairs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers.registry import ChunkerKind, chunker_kind, chunker_names, is_import_path

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "NAMES", "ChunkerSpec", "chunk_corpus", "chunk_hierarchy", "make_chunker", "parse_spec", "span_cache_dir",
    "span_cache_file", "store_spans",
]


#: ContextualChunker settings of the ``Contextual`` spec. Blocks of 1000 cl100k_base tokens
#: instead of the whole document (Anthropic's prompt shows it all): a 2-core CPU server
#: processes a 1000-token block in minutes, not the tens of minutes of a whole Chroma corpus,
#: and reuses it for every chunk of the block. Changing them changes every prompt, hence the
#: LLM cache keys.
CONTEXTUAL_SETTINGS: dict[str, Any] = {"windows": "blocks", "max_document_tokens": 1000, "context_max_tokens": 80}

#: The built-in chunker kinds (defined in :mod:`chunkwise.chunkers.kinds`; :mod:`chunkwise.chunkers.registry`
#: holds them, with any kind a user registers: :func:`~chunkwise.chunkers.registry.chunker_names`).
NAMES: tuple[str, ...] = (
    "TokenText", "Recursive", "Kamradt", "KamradtMod", "Cluster", "LLM", "Sentence", "Structure",
    "Hierarchical", "Contextual", "Late", "KamradtSplit", "Semantic",
)

#: The breakpoint rules a ``Semantic`` spec may name (LangChain's ``breakpoint_threshold_type``).
SEMANTIC_THRESHOLD_TYPES: tuple[str, ...] = ("percentile", "standard_deviation", "interquartile", "gradient")


@dataclass(frozen=True)
class ChunkerSpec:
    """One row of the comparison: a chunker and its settings.

    Attributes
    ----------
    chunker : str
        The report's label: "TokenText", "Recursive", "Kamradt", "KamradtMod", "Cluster", "LLM";
        beyond the report, "Sentence" (whole sentences packed to ``size`` tokens), "Structure"
        (Markdown sections / blank-line blocks up to ``size`` tokens), "Hierarchical"
        (children of ``size`` tokens indexed, parents of ``parent_size`` tokens returned when
        ``merge_threshold`` of their children are retrieved), "Contextual" (recursive chunks of
        ``size`` tokens, each indexed with an LLM-written context) "Late" (recursive chunks
        of ``size`` tokens embedded by late chunking) and "Semantic" (LangChain's
        ``SemanticChunker`` with the settings in ``options``; "Kamradt" is the same chunker at
        its defaults).
    size : int or None
        Chunk size in cl100k_base tokens (max size for Cluster, target average for KamradtMod,
        child size for Hierarchical, None for Kamradt and LLM).
    overlap : int
        Overlap in tokens (0 for the semantic chunkers).
    parent_size : int or None
        Hierarchical only: the parents' maximum size in cl100k_base tokens.
    merge_threshold : int, float or None
        Hierarchical only: :func:`chunkwise.chunkers.merge_to_parents`'s rule (an int = a
        number of retrieved children, a float in (0, 1] = a fraction of the parent's children).
    """

    chunker: str
    size: int | None = None
    overlap: int = 0
    parent_size: int | None = None
    merge_threshold: int | float | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """The row name in tables (``"Recursive 200"``); a kind may format its own (``label``)."""
        kind = self.kind
        if kind.label is not None:
            return kind.label(self)
        if self.options and kind.plugin:  # a user's chunker with keyword arguments
            args = ", ".join(f"{k}={v!r}" for k, v in self.options)
            return f"{self.chunker.rsplit(':', 1)[-1]}({args})"
        parts = [self.chunker]
        if self.size is not None:
            parts.append(str(self.size))
        if self.overlap:
            parts.append(f"overlap {self.overlap}")
        return " ".join(parts)

    def key(self) -> str:
        """The cache key of the spec (unchanged for the specs chapter 2 cached)."""
        base = f"{self.chunker}|{self.size}|{self.overlap}"
        if self.kind.key_fields is not None:  # a kind's own settings (Hierarchical's parents and merge rule)
            base += self.kind.key_fields(self)
        if self.options:  # only specs with options (new kinds) carry them: older keys stay valid
            base += "|" + json.dumps(dict(self.options), sort_keys=True)
        return base

    def spec_string(self) -> str:
        """The spec as :func:`parse_spec` reads it (``"Recursive:400:100"``, ``"Hierarchical:100:400:0.5"``)."""
        s = self.chunker
        if self.kind.spec_string is not None:
            return self.kind.spec_string(self)
        if self.size is not None:
            s += f":{self.size}"
            if self.overlap:
                s += f":{self.overlap}"
        return s

    @property
    def kind(self) -> ChunkerKind:
        """The registered :class:`~chunkwise.chunkers.registry.ChunkerKind` of this spec."""
        return chunker_kind(self.chunker)

    @property
    def boundary_spec(self) -> ChunkerSpec:
        """The spec whose spans give this one's boundaries: ``Recursive:size`` for Late and
        Contextual (whose chunks are recursive chunks; they share its span cache; the kind's
        ``boundaries_from``), else itself."""
        kind = self.kind
        return kind.boundaries_from(self) if kind.boundaries_from is not None else self


def parse_spec(text: str) -> ChunkerSpec:
    """Parse a spec string into a :class:`ChunkerSpec`.

    Forms (sizes in cl100k_base tokens): ``"Recursive:250:125"`` (size, overlap),
    ``"TokenText:200"``, ``"Kamradt"``, ``"KamradtSplit:200"`` (Kamradt's chunks, each over
    200 tokens split again recursively), ``"KamradtMod:300"``, ``"Cluster:200"``, ``"LLM"``,
    ``"Sentence:200"``, ``"Structure:400"``, ``"Hierarchical:child:parent[:merge_threshold]"``
    (e.g. ``"Hierarchical:100:400"``, threshold default 0.5 = half of a parent's children;
    an int is a count), ``"Contextual:200"``, ``"Late:200"`` and
    ``"Semantic:threshold_type:amount:buffer_size[:min_chunk_size]"`` (LangChain's
    ``SemanticChunker`` with those settings, ``min_chunk_size`` in characters; e.g.
    ``"Semantic:percentile:80:0:150"``; ``"Kamradt"`` = ``"Semantic:percentile:95:1"``).
    A user's chunker is named by its import path, ``"package.module:ClassName"``, or by its
    entry point in the ``chunkwise.chunkers`` group (:mod:`chunkwise.chunkers.registry`); its
    keyword arguments come from a grid file's table (``kwargs``), see
    :class:`~chunkwise.evaluation.grid.GridConfig`.

    Raises
    ------
    ValueError
        For an unknown chunker name, a non-integer size/overlap, or settings the chunker does
        not take.
    """
    if not isinstance(text, str):
        raise ValueError(f"a chunker spec must be a string such as 'Recursive:200', got {text!r}.")
    if is_import_path(text) and text.split(":", 1)[0] not in _registered():
        chunker_kind(text)  # imports and registers it, or says why not
        return ChunkerSpec(text)
    parts = text.split(":")
    kind = chunker_kind(parts[0])
    if kind.parse is not None:
        return kind.parse(parts, text)
    name = parts[0]
    if len(parts) > 3:
        raise ValueError(f"{text!r} has too many fields; use '{kind.help}'.")
    try:
        size = int(parts[1]) if len(parts) > 1 and parts[1] else None
        overlap = int(parts[2]) if len(parts) > 2 else 0
    except ValueError as exc:
        raise ValueError(f"size and overlap in {text!r} must be integers (tokens).") from exc
    if kind.size == "required" and size is None:
        raise ValueError(f"{name} needs a size in tokens, e.g. '{name}:250'.")
    if kind.size == "none" and (size is not None or overlap):
        raise ValueError(f"{name} takes no size or overlap (LangChain / report defaults); got {text!r}.")
    if not kind.overlap and overlap:
        raise ValueError(f"{name} takes no overlap; got {text!r}.")
    if size is not None and size < 1:
        raise ValueError(f"size in {text!r} must be >= 1 token.")
    if not 0 <= overlap < (size or 1):
        raise ValueError(f"overlap in {text!r} must be in [0, size - 1] tokens.")
    if size is not None and size < kind.min_size:
        raise ValueError(f"{name} size must be >= {kind.min_size} tokens (the size of its pieces); got {text!r}.")
    return ChunkerSpec(name, size, overlap)


def _registered() -> tuple[str, ...]:
    return chunker_names()


def make_chunker(spec: ChunkerSpec, embedder: Any, llm: ChatModel | None = None) -> Any:
    """Build the chunker of a spec (the report's settings for each family).

    Hierarchical: :class:`~chunkwise.chunkers.HierarchicalChunker` with
    ``StructureChunker(parent_size)`` parents and ``RecursiveTokenChunker(size, 0)`` children.
    Contextual: :class:`~chunkwise.chunkers.ContextualChunker` over
    ``RecursiveTokenChunker(size, 0)`` with ``llm``, documents over 3000 cl100k_base tokens
    shown in fixed blocks (``windows="blocks"``: one prompt prefix per block, reused by a
    prefix-caching server). Late: the ``RecursiveTokenChunker(size, 0)``
    that gives its boundaries (the late-chunking vectors come from
    :class:`~chunkwise.chunkers.LateChunkingEmbedder`, not from a chunker).

    Raises
    ------
    ValueError
        If ``spec`` is an LLM or Contextual row and no ``llm`` client is given.
    """
    return spec.kind.make(spec, embedder, llm)


#: The span cache's folder below the cache root (it was ``chroma_chunks`` before every grid used it).
SPAN_CACHE_FOLDER = "spans"
_OLD_SPAN_CACHE_FOLDER = "chroma_chunks"


def span_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """The chunk-span cache folder: ``cache_dir`` if given, else ``$CHUNKWISE_CACHE_DIR/spans``
    (default ``~/.cache/chunkwise/spans``).

    A cache root that still has the folder's old name, ``chroma_chunks``, and no ``spans`` folder
    has it renamed (the files and their keys are unchanged), so a warm machine stays warm.
    """
    if cache_dir is not None:
        return Path(cache_dir)
    from chunkwise._env import cache_root

    root = cache_root()
    new, old = root / SPAN_CACHE_FOLDER, root / _OLD_SPAN_CACHE_FOLDER
    if old.is_dir() and not new.exists():
        try:
            old.rename(new)
        except OSError:  # another process renamed it first, or the root is read-only
            if not new.exists():
                return old
    return new


def _span_path(spec_key: str, file_stem: str, name: str, text: str, ident: str, cache_dir: str | Path | None) -> Path:
    from chunkwise import __version__

    # The package version is part of the key: a fixed chunker never serves spans cached by an old one.
    digest = hashlib.sha256(f"{__version__}\0{spec_key}\0{ident}\0".encode() + text.encode()).hexdigest()[:24]
    return span_cache_dir(cache_dir) / f"{name}-{file_stem}-{digest}.json"


def _write_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)  # atomic: an interrupted run never leaves a half-written cache file


class _Given:
    """A chunker that returns chunks already cut (cached spans given to a wrapping chunker)."""

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks

    def split(self, text: str) -> list[Chunk]:
        return list(self.chunks)


def span_cache_file(
    spec: ChunkerSpec,
    name: str,
    text: str,
    embedder: Any = None,
    llm: ChatModel | None = None,
    cache_dir: str | Path | None = None,
) -> Path:
    """The span-cache file that :func:`chunk_corpus` reads and writes for a spec and one corpus.

    Its content is a JSON list of ``[start, end]`` character offsets into ``text``, in the
    chunker's order. A distributed engine that chunks elsewhere writes the file here
    (:func:`store_spans`) and :func:`chunk_corpus` then reads it like its own.

    Parameters
    ----------
    spec : ChunkerSpec
        A spec whose kind has a span cache (its boundary spec for Late and Contextual).
    name, text : str
        The corpus name and its full text (the key hashes the text).
    embedder, llm : optional
        The model the chunker cuts with (its name or identity is part of the key).
    cache_dir : str or Path, optional
        See :func:`span_cache_dir`.

    Raises
    ------
    ValueError
        For a spec whose kind keeps no span cache (plugins without one, Hierarchical).
    """
    kind = spec.kind
    if not kind.span_cache or kind.index == "parents" or kind.wrap is not None:
        raise ValueError(f"{spec.label}: chunks of this kind are not kept in the span cache.")
    ident = ""
    if kind.needs == "embedder":
        ident = getattr(embedder, "name", type(embedder).__name__)
    elif kind.needs == "llm":
        ident = getattr(llm, "model_identity", repr(llm))
    stem = f"{spec.chunker}-{spec.size}-{spec.overlap}"
    if spec.options:
        stem += "-" + spec.spec_string().split(":", 1)[1].replace(":", "-")
    return _span_path(spec.key(), stem, name, text, ident, cache_dir)


def store_spans(path: Path, spans: list[tuple[int, int]]) -> None:
    """Write ``[start, end]`` pairs to a span-cache file (:func:`span_cache_file`), atomically."""
    _write_atomic(path, [[int(s), int(e)] for s, e in spans])


def chunk_corpus(
    spec: ChunkerSpec,
    name: str,
    text: str,
    embedder: Any,
    llm: ChatModel | None = None,
    cache_dir: str | Path | None = None,
) -> list[Chunk]:
    """Chunk one corpus, reading/writing the span cache.

    The cache key is the spec, the embedder's name (semantic chunkers) or the LLM's identity,
    and the sha256 of the corpus text. The file holds only spans; texts are re-sliced.

    Late and Contextual specs take their boundaries from ``Recursive:size`` (the same cache
    file). Contextual then adds each chunk's context through ``llm`` (whose own response
    cache makes a rerun free): the chunks carry ``metadata["index_text"]``. Hierarchical
    returns the children (with ``metadata["parent_id"]``), see :func:`chunk_hierarchy`.

    Returns
    -------
    list of Chunk
        With exact offsets into ``text``.

    Raises
    ------
    ValueError
        For a Contextual or LLM spec without ``llm``.
    """
    kind = spec.kind
    if kind.index == "parents":
        return chunk_hierarchy(spec, name, text, cache_dir)[1]
    if kind.wrap is not None:
        # built over another kind's chunks, read through that kind's span cache (contextual)
        if kind.needs == "llm" and llm is None:
            raise ValueError(f"the {spec.chunker} chunker needs an LLM client (chunkwise.llm.LLMClient); pass llm=.")
        base = chunk_corpus(spec.boundary_spec, name, text, embedder, None, cache_dir)
        return kind.wrap(_Given(base), spec, llm).split(text)
    spec = spec.boundary_spec
    kind = spec.kind
    if not kind.span_cache:
        chunker = kind.make(spec, embedder, llm)
        if not kind.plugin:
            return chunker.split(text)
        from chunkwise.chunkers.adapters import ChunkerPluginError, OffsetRecoveryError

        try:
            return chunker.split(text)
        except (ChunkerPluginError, OffsetRecoveryError) as exc:  # say which document
            raise type(exc)(f"document {name!r}: {exc}") from exc
    path = span_cache_file(spec, name, text, embedder, llm, cache_dir)
    if path.exists():
        spans = json.loads(path.read_text())
        return [Chunk(text[s:e], s, e) for s, e in spans]
    chunks = make_chunker(spec, embedder, llm).split(text)
    store_spans(path, [(c.start, c.end) for c in chunks])
    return chunks


def chunk_hierarchy(
    spec: ChunkerSpec, name: str, text: str, cache_dir: str | Path | None = None
) -> tuple[list[Chunk], list[Chunk]]:
    """Parents and children of a Hierarchical spec for one corpus, through the span cache.

    Returns
    -------
    (parents, children)
        As :meth:`chunkwise.chunkers.HierarchicalChunker.split_hierarchy`: parents with
        ``metadata["parent_id"]`` and ``["n_children"]``, children with ``["parent_id"]``.

    Raises
    ------
    ValueError
        If ``spec`` is not a Hierarchical spec.
    """
    if spec.kind.index != "parents":
        raise ValueError(f"chunk_hierarchy needs a Hierarchical spec, got {spec.label!r}.")
    path = _span_path(
        f"Hierarchical|{spec.size}|{spec.parent_size}", f"Hierarchical-{spec.size}-{spec.parent_size}", name, text, "",
        cache_dir,
    )
    if path.exists():
        data = json.loads(path.read_text())
    else:
        parents, children = make_chunker(spec, None).split_hierarchy(text)
        data = {
            "parents": [[p.start, p.end] for p in parents],
            "children": [[c.start, c.end, c.metadata["parent_id"]] for c in children],
        }
        _write_atomic(path, data)
    kids = [Chunk(text[s:e], s, e, {"parent_id": pid}) for s, e, pid in data["children"]]
    counts: dict[int, int] = {}
    for c in kids:
        counts[c.metadata["parent_id"]] = counts.get(c.metadata["parent_id"], 0) + 1
    parents = [
        Chunk(text[s:e], s, e, {"parent_id": i, "n_children": counts.get(i, 0)}) for i, (s, e) in enumerate(data["parents"])
    ]
    return parents, kids


# The name chapter 2's driver and older callers used.
_cache_dir = span_cache_dir
