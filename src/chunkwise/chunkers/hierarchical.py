"""Hierarchical (small-to-big) chunking: small child chunks indexed, their parent returned
when enough of its children are retrieved."""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.chunkers.structure import StructureChunker

__all__ = ["HierarchicalChunker", "merge_to_parents"]


def _check_chunker(name: str, chunker: Any) -> Any:
    if isinstance(chunker, (str, bytes)) or not callable(getattr(chunker, "split", None)):
        raise TypeError(
            f"{name} must have a split(text) -> list[Chunk] method, e.g. "
            f"chunkwise.chunkers.RecursiveTokenChunker(200, 0); got {type(chunker).__name__}."
        )
    return chunker


class HierarchicalChunker:
    """Two-level chunks: parents cut by one chunker, children cut inside each parent by another.

    Small children are what gets embedded and searched (a precise match); a parent is what
    may be returned instead, by :func:`merge_to_parents`, when enough of its children are
    retrieved. This is the "hierarchical" row of the chunking guide the book starts from
    ("several chunk sizes with parent links; retrieve small, return the parent"), known as
    small-to-big retrieval and implemented in LlamaIndex as ``HierarchicalNodeParser`` with
    the ``AutoMergingRetriever``.

    Every child lies inside its parent: the child chunker splits ``parent.text`` and the
    child's offsets are shifted by ``parent.start``, so ``text[c.start:c.end] == c.text``
    holds in the document.

    Parameters
    ----------
    parent_chunker : object with ``split(text) -> list[Chunk]``, optional
        Default :class:`~chunkwise.chunkers.structure.StructureChunker` with
        ``chunk_size=1024`` tokens (cl100k_base): Markdown sections or blank-line blocks.
    child_chunker : object with ``split(text) -> list[Chunk]``, optional
        Default :class:`~chunkwise.chunkers.recursive.RecursiveTokenChunker` with
        ``chunk_size=200, chunk_overlap=0`` tokens (cl100k_base; small enough for
        all-MiniLM-L6-v2's 256 word pieces; a size the Chroma report also uses).

    Raises
    ------
    TypeError
        If a chunker has no ``split`` method.

    References
    ----------
    .. [1] The semantic-chunking guide this book starts from (``shared/seeds``), table row
       "Hierarchical" and its note on hierarchical versus semantic chunking.
    .. [2] LlamaIndex, ``HierarchicalNodeParser`` and ``AutoMergingRetriever``,
       https://docs.llamaindex.ai/en/stable/examples/retrievers/auto_merging_retriever/

    Examples
    --------
    >>> from chunkwise.chunkers import RecursiveTokenChunker
    >>> h = HierarchicalChunker(RecursiveTokenChunker(30, 0, length_function=len),
    ...                         RecursiveTokenChunker(12, 0, length_function=len))
    >>> parents, children = h.split_hierarchy("Kites fly. Boats sail.\\n\\nTrains run. Cars park.")
    >>> [p.text for p in parents]
    ['Kites fly. Boats sail.', 'Trains run. Cars park.']
    >>> [(c.text, c.metadata["parent_id"]) for c in children]
    [('Kites fly.', 0), ('Boats sail.', 0), ('Trains run.', 1), ('Cars park.', 1)]
    """

    def __init__(self, parent_chunker: Any = None, child_chunker: Any = None) -> None:
        self.parent_chunker = _check_chunker(
            "parent_chunker", parent_chunker if parent_chunker is not None else StructureChunker(1024)
        )
        self.child_chunker = _check_chunker(
            "child_chunker", child_chunker if child_chunker is not None else RecursiveTokenChunker(200, 0)
        )

    def __repr__(self) -> str:
        return f"HierarchicalChunker(parent_chunker={self.parent_chunker!r}, child_chunker={self.child_chunker!r})"

    def split_hierarchy(self, text: str) -> tuple[list[Chunk], list[Chunk]]:
        """Cut ``text`` into parents and the children inside them.

        Parameters
        ----------
        text : str

        Returns
        -------
        parents : list of Chunk
            The parent chunker's chunks, with ``metadata["parent_id"]`` (their index in this
            list) and ``metadata["n_children"]`` added.
        children : list of Chunk
            Parent by parent, in order; each keeps the child chunker's metadata plus
            ``"parent_id"``, ``"parent_start"``, ``"parent_end"``, ``"child_index"``
            (position among its parent's children) and ``"n_siblings"`` (its parent's
            number of children, itself included).

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        ValueError
            If a chunker returns a chunk that is not an exact slice of what it was given.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        parents: list[Chunk] = []
        children: list[Chunk] = []
        for pid, p in enumerate(self.parent_chunker.split(text)):
            if text[p.start : p.end] != p.text:
                raise ValueError(f"parent_chunker returned chunk {pid} whose text is not text[start:end].")
            kids = self.child_chunker.split(p.text)
            for ci, c in enumerate(kids):
                if p.text[c.start : c.end] != c.text:
                    raise ValueError(
                        f"child_chunker returned chunk {ci} of parent {pid} whose text is not parent.text[start:end]."
                    )
                children.append(
                    Chunk(c.text, p.start + c.start, p.start + c.end, {
                        **c.metadata, "parent_id": pid, "parent_start": p.start, "parent_end": p.end,
                        "child_index": ci, "n_siblings": len(kids),
                    })
                )
            parents.append(Chunk(p.text, p.start, p.end, {**p.metadata, "parent_id": pid, "n_children": len(kids)}))
        return parents, children

    def split(self, text: str) -> list[Chunk]:
        """The children of :meth:`split_hierarchy` (the chunks to embed and index)."""
        return self.split_hierarchy(text)[1]


def _threshold_count(merge_threshold: Any, n_children: int) -> int:
    if isinstance(merge_threshold, numbers.Integral):
        return int(merge_threshold)
    return max(1, math.ceil(float(merge_threshold) * n_children - 1e-9))


def merge_to_parents(
    retrieved: Sequence[Chunk],
    parents: Sequence[Chunk] | Mapping[Hashable, Chunk],
    merge_threshold: int | float = 0.5,
) -> list[Chunk]:
    """Replace retrieved children by their parent when enough of the parent's children are retrieved.

    The rule (small-to-big / auto-merging retrieval):

    1. ``retrieved`` is the ranked top-k list of child chunks, best first. Repeats (same
       ``parent_id`` and span) are dropped, keeping the first;
    2. for each parent, count its distinct retrieved children ``m``. The parent is *merged*
       when ``m >= merge_threshold`` if the threshold is an int (a count), or when
       ``m >= ceil(merge_threshold * n_children)`` if it is a float in ``(0, 1]`` (a fraction
       of the parent's ``metadata["n_children"]``);
    3. the output walks the de-duplicated list in rank order: a child of a merged parent is
       replaced by its parent at the rank of the parent's best-ranked child, and the
       parent's other children are dropped; every other child stays where it was.

    So the output has no duplicates, is ordered by each item's best rank, and may be shorter
    than ``retrieved``. LlamaIndex's ``AutoMergingRetriever`` uses a strict ratio ``>`` 0.5;
    here the comparison is ``>=`` and the threshold is a parameter.

    Parameters
    ----------
    retrieved : sequence of Chunk
        Ranked children; each needs ``metadata["parent_id"]`` (as set by
        :meth:`HierarchicalChunker.split_hierarchy`).
    parents : sequence or mapping of Chunk
        The parents, indexed by ``parent_id`` (the list from ``split_hierarchy``, or a mapping
        when ids are e.g. ``(doc_id, parent_id)`` pairs across documents). A fraction
        threshold needs ``metadata["n_children"]`` on the parents of retrieved children.
    merge_threshold : int >= 1 or float in (0, 1], default 0.5

    Returns
    -------
    list of Chunk
        Children as given, and parents with ``metadata["merged_children"]`` (the number of
        their children that were retrieved) added.

    Raises
    ------
    ValueError
        If ``merge_threshold`` is not an int ``>= 1`` or a float in ``(0, 1]``, a child has no
        ``parent_id``, or a ``parent_id`` is not among ``parents``, or a parent lacks
        ``n_children`` when a fraction is used.
    TypeError
        If ``retrieved`` holds something other than Chunk objects.

    Examples
    --------
    >>> ps = [Chunk("ab", 0, 2, {"n_children": 2}), Chunk("cd", 2, 4, {"n_children": 2})]
    >>> kids = [Chunk("a", 0, 1, {"parent_id": 0}), Chunk("c", 2, 3, {"parent_id": 1}),
    ...         Chunk("b", 1, 2, {"parent_id": 0})]
    >>> [c.text for c in merge_to_parents(kids, ps, merge_threshold=2)]
    ['ab', 'c']
    """
    is_int = isinstance(merge_threshold, numbers.Integral) and not isinstance(merge_threshold, bool)
    is_float = isinstance(merge_threshold, numbers.Real) and not isinstance(merge_threshold, (bool, numbers.Integral))
    if not (is_int and merge_threshold >= 1) and not (is_float and 0 < float(merge_threshold) <= 1):
        raise ValueError(
            "merge_threshold must be an int >= 1 (a number of children) or a float in (0, 1] "
            f"(a fraction of the parent's children), got {merge_threshold!r}."
        )

    def parent_of(pid: Hashable) -> Chunk:
        if not isinstance(parents, Mapping) and not (
            isinstance(pid, numbers.Integral) and not isinstance(pid, bool) and 0 <= pid < len(parents)
        ):
            raise ValueError(f"parent_id {pid!r} of a retrieved child is not an index into the {len(parents)} parents given.")
        try:
            return parents[pid]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"parent_id {pid!r} of a retrieved child is not among the {len(parents)} parents given.") from None

    seen: set[tuple[Hashable, int, int]] = set()
    ranked: list[Chunk] = []
    counts: dict[Hashable, int] = {}
    for c in retrieved:
        if not isinstance(c, Chunk):
            raise TypeError(f"retrieved must hold Chunk objects, got {type(c).__name__}.")
        if "parent_id" not in c.metadata:
            raise ValueError(
                "every retrieved child needs metadata['parent_id'] (from HierarchicalChunker.split_hierarchy); "
                f"chunk [{c.start}, {c.end}) has none."
            )
        pid = c.metadata["parent_id"]
        key = (pid, c.start, c.end)
        if key in seen:
            continue
        seen.add(key)
        ranked.append(c)
        counts[pid] = counts.get(pid, 0) + 1

    merged: set[Hashable] = set()
    for pid, m in counts.items():
        p = parent_of(pid)
        if is_int:
            need = int(merge_threshold)
        else:
            if "n_children" not in p.metadata:
                raise ValueError(
                    f"parent {pid!r} has no metadata['n_children']; a fraction merge_threshold needs it "
                    "(use HierarchicalChunker.split_hierarchy's parents, or an int threshold)."
                )
            need = _threshold_count(merge_threshold, int(p.metadata["n_children"]))
        if m >= need:
            merged.add(pid)

    out: list[Chunk] = []
    emitted: set[Hashable] = set()
    for c in ranked:
        pid = c.metadata["parent_id"]
        if pid not in merged:
            out.append(c)
        elif pid not in emitted:
            emitted.add(pid)
            p = parent_of(pid)
            out.append(Chunk(p.text, p.start, p.end, {**p.metadata, "parent_id": pid, "merged_children": counts[pid]}))
    return out
