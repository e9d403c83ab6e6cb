"""The built-in chunker kinds: what ``"Recursive"``, ``"Hierarchical"``, ``"Semantic"``... mean.

Each :class:`~chunkwise.chunkers.registry.ChunkerKind` below is registered with
:func:`~chunkwise.chunkers.registry.register_chunker` when :mod:`chunkwise.chunkers` is imported
(its ``__init__`` imports this module last), in the order of
:data:`chunkwise.chunkers.specs.NAMES`. The kinds with a grammar of their own (Hierarchical,
Semantic) have their parsers, labels and spec strings here, beside their kinds.

The imports run one way: :mod:`~chunkwise.chunkers.registry` (kinds, lookup, plugins) knows no
spec; :mod:`~chunkwise.chunkers.specs` (the spec, parsing, the span cache) reads the registry;
this module, above both, builds the kinds from the chunker classes and the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chunkwise.chunkers.capped import CappedChunker
from chunkwise.chunkers.cluster import ClusterSemanticChunker
from chunkwise.chunkers.contextual import ContextualChunker
from chunkwise.chunkers.fixed import FixedTokenChunker
from chunkwise.chunkers.hierarchical import HierarchicalChunker
from chunkwise.chunkers.kamradt import KamradtModifiedChunker
from chunkwise.chunkers.llm import LLMSemanticChunker
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.chunkers.registry import ChunkerKind, register_chunker
from chunkwise.chunkers.semantic import SemanticChunker
from chunkwise.chunkers.sentence import SentenceChunker
from chunkwise.chunkers.specs import CONTEXTUAL_SETTINGS, SEMANTIC_THRESHOLD_TYPES, ChunkerSpec
from chunkwise.chunkers.structure import StructureChunker

if TYPE_CHECKING:  # pragma: no cover
    from chunkwise.llm.protocol import ChatModel

__all__ = ["BUILTIN_KINDS"]


def _parse_threshold(text: str, spec: str) -> int | float:
    try:
        value: int | float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(
                f"merge threshold {text!r} in {spec!r} must be an int >= 1 (retrieved children) or a fraction in (0, 1]."
            ) from None
        if not 0 < value <= 1:
            raise ValueError(f"merge threshold {text!r} in {spec!r} must be a fraction in (0, 1] or an int >= 1.")
        return value
    if value < 1:
        raise ValueError(f"merge threshold {text!r} in {spec!r} must be an int >= 1 or a fraction in (0, 1].")
    return value


def _parse_semantic(parts: list[str], text: str) -> ChunkerSpec:
    usage = "use 'Semantic:threshold_type:amount:buffer_size[:min_chunk_size]', e.g. 'Semantic:percentile:80:0:150'"
    if len(parts) not in (4, 5):
        raise ValueError(f"{text!r}: {usage}.")
    kind = parts[1]
    if kind not in SEMANTIC_THRESHOLD_TYPES:
        raise ValueError(f"{text!r}: threshold type {kind!r} is not one of {', '.join(SEMANTIC_THRESHOLD_TYPES)}.")
    try:
        amount = float(parts[2])
        buffer_size = int(parts[3])
        min_chunk = int(parts[4]) if len(parts) == 5 else None
    except ValueError as exc:
        raise ValueError(f"{text!r}: amount must be a number, buffer_size and min_chunk_size integers; {usage}.") from exc
    if kind in ("percentile", "gradient") and not 0 <= amount <= 100:
        raise ValueError(f"{text!r}: a {kind} amount must lie in [0, 100].")
    if buffer_size < 0:
        raise ValueError(f"{text!r}: buffer_size must be >= 0 sentences.")
    if min_chunk is not None and min_chunk < 1:
        raise ValueError(f"{text!r}: min_chunk_size must be >= 1 character.")
    options = (
        ("breakpoint_threshold_amount", amount),
        ("breakpoint_threshold_type", kind),
        ("buffer_size", buffer_size),
        ("min_chunk_size", min_chunk),
    )
    return ChunkerSpec("Semantic", None, 0, options=options)


def _semantic_label(spec: ChunkerSpec) -> str:
    o = dict(spec.options)
    text = f"Semantic {o['breakpoint_threshold_type']} {o['breakpoint_threshold_amount']:g} buffer {o['buffer_size']}"
    return text + (f" min {o['min_chunk_size']}" if o.get("min_chunk_size") else "")


def _semantic_spec_string(spec: ChunkerSpec) -> str:
    o = dict(spec.options)
    s = f"Semantic:{o['breakpoint_threshold_type']}:{o['breakpoint_threshold_amount']:g}:{o['buffer_size']}"
    return s + (f":{o['min_chunk_size']}" if o.get("min_chunk_size") else "")


def _hierarchical_label(spec: ChunkerSpec) -> str:
    return f"Hierarchical {spec.size}/{spec.parent_size} merge {spec.merge_threshold:g}"


def _hierarchical_spec_string(spec: ChunkerSpec) -> str:
    return f"Hierarchical:{spec.size}:{spec.parent_size}:{spec.merge_threshold!r}"


def _hierarchical_key_fields(spec: ChunkerSpec) -> str:
    return f"|{spec.parent_size}|{spec.merge_threshold!r}"


def _parse_hierarchical(parts: list[str], text: str) -> ChunkerSpec:
    if len(parts) not in (3, 4):
        raise ValueError(
            f"{text!r}: use 'Hierarchical:child_tokens:parent_tokens[:merge_threshold]', e.g. 'Hierarchical:100:400:0.5'."
        )
    try:
        child, parent = int(parts[1]), int(parts[2])
    except ValueError as exc:
        raise ValueError(f"child and parent sizes in {text!r} must be integers (tokens).") from exc
    if child < 1 or parent <= child:
        raise ValueError(f"{text!r}: child size must be >= 1 token and the parent size larger than the child's.")
    threshold = _parse_threshold(parts[3], text) if len(parts) == 4 else 0.5
    return ChunkerSpec("Hierarchical", child, 0, parent, threshold)


def _recursive_of(spec: ChunkerSpec) -> ChunkerSpec:
    return ChunkerSpec("Recursive", spec.size, 0)


def _recursive(spec: Any, embedder: Any, llm: ChatModel) -> Any:
    return RecursiveTokenChunker(spec.size, spec.overlap, keep_separator="start")


def _contextual(boundaries: Any, spec: Any, llm: ChatModel) -> Any:
    return ContextualChunker(boundaries, llm, **CONTEXTUAL_SETTINGS)


#: The built-in kinds, in :data:`~chunkwise.chunkers.specs.NAMES` order (the order of
#: :func:`~chunkwise.chunkers.registry.chunker_names` and of its error messages).
BUILTIN_KINDS: tuple[ChunkerKind, ...] = (
    ChunkerKind("TokenText", lambda s, e, lm: FixedTokenChunker(s.size, s.overlap),
                "fixed windows of size tokens (LangChain's TokenTextSplitter)", overlap=True),
    ChunkerKind("Recursive", _recursive, "recursive separators, chunks up to size tokens", overlap=True),
    ChunkerKind("Kamradt", lambda s, e, lm: SemanticChunker(e),  # LangChain defaults: buffer 1, percentile 95
                "LangChain's SemanticChunker at its defaults", size="none", needs="embedder"),
    ChunkerKind("KamradtMod", lambda s, e, lm: KamradtModifiedChunker(e, avg_chunk_size=s.size),
                "Chroma's Kamradt chunker with a target mean size in tokens", min_size=50, needs="embedder"),
    ChunkerKind("Cluster", lambda s, e, lm: ClusterSemanticChunker(e, max_chunk_size=s.size),
                "Chroma's cluster chunker, chunks up to size tokens", min_size=50, needs="embedder"),
    # no span cache: every run replays its calls from the LLM cache, so their cost is counted
    ChunkerKind("LLM", lambda s, e, lm: LLMSemanticChunker(lm), "an LLM names the split points (Chroma's report)",
                size="none", needs="llm", llm_cost="calls", span_cache=False),
    ChunkerKind("Sentence", lambda s, e, lm: SentenceChunker(s.size), "whole sentences packed to size tokens"),
    ChunkerKind("Structure", lambda s, e, lm: StructureChunker(s.size),
                "Markdown sections / blank-line blocks up to size tokens"),
    ChunkerKind(
        "Hierarchical",
        lambda s, e, lm: HierarchicalChunker(
            StructureChunker(s.parent_size), RecursiveTokenChunker(s.size, 0, keep_separator="start")
        ),
        "children of size tokens indexed, parents returned (small-to-big)",
        parse=_parse_hierarchical, index="parents", label=_hierarchical_label,
        spec_string=_hierarchical_spec_string, key_fields=_hierarchical_key_fields,
        table_fields=("size", "parent_size", "merge_threshold"),
        spec_help="Hierarchical:child_tokens:parent_tokens[:merge_threshold]",
    ),
    ChunkerKind(
        "Contextual",
        lambda s, e, lm: _contextual(RecursiveTokenChunker(s.size, 0, keep_separator="start"), s, lm),
        "recursive chunks indexed with an LLM-written context", needs="llm",
        boundaries_from=_recursive_of, wrap=_contextual, llm_cost="per_chunk",
    ),
    ChunkerKind("Late", _recursive, "recursive chunks embedded by late chunking",
                boundaries_from=_recursive_of, index="late"),
    ChunkerKind("KamradtSplit", lambda s, e, lm: CappedChunker(SemanticChunker(e), s.size),
                "LangChain's SemanticChunker at its defaults, chunks over size tokens split again",
                needs="embedder"),
    ChunkerKind(
        "Semantic", lambda s, e, lm: SemanticChunker(e, **dict(s.options)),
        "LangChain's SemanticChunker with explicit settings", size="none", needs="embedder",
        parse=_parse_semantic, spec_help="Semantic:threshold_type:amount:buffer_size[:min_chunk_size]",
        label=_semantic_label, spec_string=_semantic_spec_string,
        # a grid file's table names the settings as the spec's options do
        table_fields=("breakpoint_threshold_type", "breakpoint_threshold_amount", "buffer_size", "min_chunk_size"),
    ),
)

for _kind in BUILTIN_KINDS:
    register_chunker(_kind)
del _kind
