"""The registry of chunker kinds: what a spec's first field (``"Recursive"`` in
``"Recursive:200"``) means, in one place.

A :class:`ChunkerKind` is a factory plus its rules: whether a spec of the kind takes a size and
an overlap (and the smallest size), what the chunker needs to run (nothing, an embedder or an
LLM client), where its boundaries come from when they are another kind's (late and contextual
chunking keep the recursive chunker's), how the evaluation engine indexes its chunks (the
chunks themselves, small-to-big parents, or late-chunking vectors) and how its LLM cost is
counted. :func:`chunkwise.chunkers.specs.parse_spec`, :func:`~chunkwise.chunkers.specs.make_chunker`,
:func:`~chunkwise.chunkers.specs.chunk_corpus` and :func:`chunkwise.evaluation.grid.run_grid`
read these fields instead of testing names.

Adding a chunker kind is one module (the chunker: a class with ``split(text) -> list[Chunk]``,
exact offsets) plus one :func:`register_chunker` call::

    from chunkwise.chunkers.registry import ChunkerKind, register_chunker

    register_chunker(ChunkerKind(
        name="Paragraph", summary="blank-line blocks packed to size tokens",
        build=lambda spec, embedder, llm: ParagraphChunker(spec.size), size="required",
    ))

after which ``"Paragraph:300"`` works in a grid file, ``chunkwise evaluate`` and the chapters.
The built-in kinds are defined in :mod:`chunkwise.chunkers.kinds` and registered when
:mod:`chunkwise.chunkers` is imported. This module imports no other module of the package (a
spec is only read through its fields): :mod:`~chunkwise.chunkers.specs` reads the registry, and
the built-in kinds read both.

A user's chunker needs no registration: a spec ``"package.module:ClassName"`` (the module
importable, or in the current folder) or the name of an entry point in the
``chunkwise.chunkers`` group becomes a kind on first use. A class is built with the keyword
arguments of the grid file's table (``{chunker = "mypkg.chunkers:ClauseSplitter", kwargs =
{max_len = 300}}``); the object is wrapped by :func:`chunkwise.chunkers.adapters.adapt_chunker`,
so LangChain text splitters and chonkie chunkers work as they are, with exact offsets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from chunkwise._importpath import is_import_path, load_import_path

if TYPE_CHECKING:  # pragma: no cover
    from chunkwise.llm.protocol import ChatModel

# A chunkwise.chunkers.specs.ChunkerSpec, named without importing it (specs imports this module;
# the registry reads a spec's fields only).
_Spec = Any

__all__ = ["ChunkerKind", "chunker_kind", "chunker_names", "register_chunker"]


@dataclass(frozen=True)
class ChunkerKind:
    """One kind of chunker and its rules.

    Attributes
    ----------
    name : str
        The spec's first field, e.g. ``"Recursive"``; letters and digits only.
    build : callable ``(spec, embedder, llm) -> chunker``
        The factory: returns an object with ``split(text) -> list[Chunk]`` (exact character
        offsets). ``embedder`` / ``llm`` are passed as the caller has them (``None`` when not
        given); the registry checks ``needs`` before calling.
    summary : str
        One line for listings and error messages.
    size : {"required", "none"}, default "required"
        Whether a spec gives a size in cl100k_base tokens (``"Recursive:200"``) or none
        (``"Kamradt"``).
    overlap : bool, default False
        Whether a spec may give an overlap in tokens after the size.
    min_size : int, default 1
        The smallest size a spec may give (tokens).
    needs : {"none", "embedder", "llm"}, default "none"
        What the chunker needs; ``"embedder"`` kinds have their embedder's name in their span
        cache key, ``"llm"`` kinds the LLM's identity.
    boundaries_from : callable ``spec -> spec``, optional
        For kinds whose boundaries are another kind's (late and contextual chunking: the
        recursive chunker's): the spec whose spans, and span cache file, they share.
    wrap : callable ``(boundary_chunker, spec, llm) -> chunker``, optional
        For kinds built over another kind's chunks (contextual chunking adds an LLM-written
        context to each recursive chunk): builds the chunker around a chunker that returns the
        boundary kind's chunks, so the span cache of ``boundaries_from`` is reused.
    parse : callable ``(fields, text) -> spec``, optional
        A grammar of the kind's own (``fields`` = ``text.split(":")``); default
        ``Name[:size[:overlap]]`` under the rules above.
    index : {"chunks", "parents", "late"}, default "chunks"
        How :func:`~chunkwise.evaluation.grid.run_grid` indexes the kind: its chunks embedded
        as text; children indexed and merged into their parents (small-to-big); or chunk
        vectors from late chunking.
    llm_cost : {"none", "calls", "per_chunk"}, default "none"
        How the grid counts LLM cost: the calls made while chunking, or one call per chunk
        (contextual chunking, whose contexts are cached per chunk).
    spec_help : str, optional
        The spec form for messages, e.g. ``"Recursive:size_tokens[:overlap_tokens]"``.
    label, spec_string : callable ``spec -> str``, optional
        For a kind with a grammar of its own (``parse``): its table row name (default ``"Name
        size overlap n"``) and the spec text :func:`~chunkwise.chunkers.specs.parse_spec` reads
        back (default ``Name[:size[:overlap]]``).
    table_fields : tuple of str, default ("size", "overlap")
        The keys of a grid file's chunker table (``{chunker = "Recursive", size = 200}``) that
        become the spec's fields after the name, in order (Hierarchical: ``size``,
        ``parent_size``, ``merge_threshold``).
    key_fields : callable ``spec -> str``, optional
        Text appended to the spec's cache key (after ``name|size|overlap``) for settings held
        outside ``options``; Hierarchical's parent size and merge rule. Part of every span cache
        key of the kind: changing it invalidates the kind's cached spans.
    span_cache : bool, default True
        Whether chunk spans are cached on disk (keyed by the spec, the model a kind needs and
        the document's sha256). Plugins are not: chunkwise cannot see when their code changes.
    plugin : bool, default False
        A user's chunker found by import path or entry point (its name is that path or name).
    """

    name: str
    build: Callable[[_Spec, Any, Any], Any]
    summary: str
    size: Literal["required", "none"] = "required"
    overlap: bool = False
    min_size: int = 1
    needs: Literal["none", "embedder", "llm"] = "none"
    boundaries_from: Callable[[_Spec], _Spec] | None = None
    wrap: Callable[[Any, _Spec, Any], Any] | None = None
    parse: Callable[[list[str], str], _Spec] | None = None
    index: Literal["chunks", "parents", "late"] = "chunks"
    llm_cost: Literal["none", "calls", "per_chunk"] = "none"
    spec_help: str = ""
    label: Callable[[_Spec], str] | None = None
    spec_string: Callable[[_Spec], str] | None = None
    key_fields: Callable[[_Spec], str] | None = None
    table_fields: tuple[str, ...] = ("size", "overlap")
    span_cache: bool = True
    plugin: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not (self.name.isalnum() or (self.plugin and _PLUGIN.match(self.name))):
            raise ValueError(f"a chunker kind's name must be letters and digits, got {self.name!r}.")
        if not callable(self.build):
            raise ValueError(f"chunker kind {self.name!r}: build must be callable (spec, embedder, llm) -> chunker.")
        for field, value, allowed in (
            ("size", self.size, ("required", "none")),
            ("needs", self.needs, ("none", "embedder", "llm")),
            ("index", self.index, ("chunks", "parents", "late")),
            ("llm_cost", self.llm_cost, ("none", "calls", "per_chunk")),
        ):
            if value not in allowed:
                raise ValueError(f"chunker kind {self.name!r}: {field} must be one of {allowed}, got {value!r}.")
        if isinstance(self.min_size, bool) or not isinstance(self.min_size, int) or self.min_size < 1:
            raise ValueError(f"chunker kind {self.name!r}: min_size must be an int >= 1, got {self.min_size!r}.")

    @property
    def help(self) -> str:
        """The spec form, e.g. ``"Recursive:size_tokens[:overlap_tokens]"``."""
        if self.spec_help:
            return self.spec_help
        if self.size == "none":
            return self.name
        return f"{self.name}:size_tokens" + ("[:overlap_tokens]" if self.overlap else "")

    def make(self, spec: _Spec, embedder: Any = None, llm: ChatModel | None = None) -> Any:
        """Build the chunker of ``spec`` after checking what the kind needs.

        Raises
        ------
        ValueError
            If the kind needs an LLM client and ``llm`` is None, or an embedder and
            ``embedder`` is None.
        """
        if self.needs == "llm" and llm is None:
            raise ValueError(
                f"the {self.name} chunker needs an LLM client (chunkwise.llm.LLMClient or OnDemandLocalClient); pass llm=."
            )
        if self.needs == "embedder" and embedder is None:
            raise ValueError(f"the {self.name} chunker needs an embedder (e.g. SentenceTransformerEmbedder()); pass embedder=.")
        return self.build(spec, embedder, llm)


_KINDS: dict[str, ChunkerKind] = {}

#: Entry-point group of chunker plugins: ``[project.entry-points."chunkwise.chunkers"]``,
#: ``name = "package.module:ClassOrFactory"`` (or a :class:`ChunkerKind`).
PLUGIN_GROUP = "chunkwise.chunkers"
_PLUGIN = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")


def _entry_point(name: str) -> Any | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        if ep.name == name:
            try:
                return ep.load()
            except Exception as exc:  # noqa: BLE001 - a plugin's import can fail in any way
                raise ValueError(f"chunker {name!r}: its entry point {ep.value!r} failed to load ({exc!r}).") from exc
    return None


def _plugin_kind(name: str, obj: Any) -> ChunkerKind:
    """A kind for a user's chunker: a class is built with the spec's keyword arguments, any
    other object is the splitter itself (or, given keyword arguments, its factory)."""
    import inspect

    from chunkwise.chunkers.adapters import adapt_chunker

    def build(spec: Any, embedder: Any, llm: ChatModel) -> Any:
        kwargs = dict(spec.options)
        if inspect.isclass(obj) or kwargs:
            try:
                signature = inspect.signature(obj)
            except (TypeError, ValueError):  # a builtin without one: the call itself says
                signature = None
            if signature is not None:
                try:
                    signature.bind(**kwargs)
                except TypeError as exc:  # a misspelled or missing keyword argument in the grid file
                    raise ValueError(
                        f"chunker {name!r}: building it with kwargs {kwargs} failed ({exc}); check the kwargs table "
                        "of the grid file."
                    ) from exc
        try:
            made = obj(**kwargs) if inspect.isclass(obj) or kwargs else obj
        except Exception as exc:  # noqa: BLE001 - the user's constructor can fail in any way; name it, one line
            raise ValueError(
                f"chunker {name!r}: its constructor raised {type(exc).__name__}: {exc}; the error is the chunker's "
                "own (a missing package, a model it loads, its arguments): fix that and rerun."
            ) from exc
        return adapt_chunker(made, name=name)

    doc = (inspect.getdoc(obj) or "").strip().splitlines()
    return ChunkerKind(name, build, doc[0] if doc else f"user chunker {name}", size="none", span_cache=False, plugin=True)


def _find_plugin(name: str) -> ChunkerKind | None:
    if is_import_path(name):
        return register_chunker(_plugin_kind(name, load_import_path(name, "chunker")))
    found = _entry_point(name) if name and _PLUGIN.match(name) else None
    if found is None:
        return None
    if isinstance(found, ChunkerKind):
        return register_chunker(found)
    return register_chunker(_plugin_kind(name, found))


def register_chunker(kind: ChunkerKind, *, replace: bool = False) -> ChunkerKind:
    """Register a chunker kind (once); returns it.

    Raises
    ------
    ValueError
        If ``kind`` is not a :class:`ChunkerKind`, or its name is taken and ``replace`` is False.
    """
    if not isinstance(kind, ChunkerKind):
        raise ValueError(f"register_chunker takes a ChunkerKind, got {type(kind).__name__}.")
    if kind.name in _KINDS and not replace:
        raise ValueError(f"a chunker kind named {kind.name!r} is registered already; pass replace=True to replace it.")
    _KINDS[kind.name] = kind
    return kind


def chunker_names() -> tuple[str, ...]:
    """The registered kinds' names, in registration order."""
    return tuple(_KINDS)


def chunker_kind(name: str) -> ChunkerKind:
    """The registered kind called ``name``; an import path ``"package.module:ClassName"`` or
    the name of an entry point of :data:`PLUGIN_GROUP` is registered on first use.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the registered ones).
    """
    if isinstance(name, str) and name in _KINDS:
        return _KINDS[name]
    found = _find_plugin(name) if isinstance(name, str) else None
    if found is not None:
        return found
    names = chunker_names()
    raise ValueError(
        f"unknown chunker {name!r}; use {', '.join(names[:-1])} or {names[-1]}, your own as "
        f"'package.module:ClassName', or a plugin registered under the entry-point group {PLUGIN_GROUP!r}."
    )
