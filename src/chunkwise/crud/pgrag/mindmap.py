"""Stage 2 of PG-RAG indexing: the LLM organises a document's verified FCIs into a mind map.

PG-RAG (arXiv 2405.16933, section 3.2) gives the LLM the main topic and the verified FCIs and
asks for a hierarchical mind map centred on the topic: topic -> keyword routes -> facts. Every
root-to-leaf path is a *fact path*; it is the unit the retrieval walk selects.

We ask for a fixed, shallow JSON form that small models can write reliably:
``{"topic": ..., "branches": [{"keyword": ..., "facts": [...], "branches": [...]}]}`` (branches
nest for deeper routes). :func:`parse_mindmap` also accepts free nested JSON -- an object whose
keys are node labels and whose values are a string (a leaf fact), a list, or another object --
turns either into a :class:`MindMapNode` tree and checks it; :func:`fact_paths` lists its
root-to-leaf paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "generate_mindmaps",
    "MAX_DEPTH",
    "MindMapNode",
    "fact_paths",
    "generate_mindmap",
    "mindmap_messages",
    "parse_mindmap",
]

#: Deepest mind map accepted (root = depth 1).
MAX_DEPTH = 8

_SYSTEM = "You organise facts into a mind map. Reply with one JSON object only, in the language of the facts."

_INSTRUCTIONS = (
    "Build a mind map of the facts below around the main topic. Group related facts under short "
    "keywords (2-8 words each). Reply with JSON of this form:\n"
    '{"topic": "<main topic>", "branches": [{"keyword": "<keyword>", "facts": ["<fact>", "<fact>"]}, '
    '{"keyword": "<keyword>", "branches": [{"keyword": "<sub-keyword>", "facts": ["<fact>"]}]}]}\n'
    "Copy each fact with its numbers, names and dates; keep every fact; use each fact once.\n\n"
)


@dataclass
class MindMapNode:
    """A node of a mind map: a label and its children (none for a leaf fact)."""

    label: str
    children: list[MindMapNode] = field(default_factory=list)

    def to_json(self) -> Any:
        """Nested-JSON form (leaves as strings) -- the inverse of :func:`parse_mindmap`."""
        if not self.children:
            return self.label
        return {self.label: _children_json(self.children)}

    def n_nodes(self) -> int:
        return 1 + sum(c.n_nodes() for c in self.children)

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children), default=0)


def _children_json(children: list[MindMapNode]) -> Any:
    if all(not c.children for c in children):
        return [c.label for c in children] if len(children) > 1 else children[0].label
    out: dict[str, Any] = {}
    for c in children:
        out[c.label] = _children_json(c.children) if c.children else c.label
    return out


def mindmap_messages(topic: str, facts: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages asking for the mind map of ``facts`` around ``topic`` (our prompt)."""
    body = f"Main topic: {topic}\nFacts:\n" + "\n".join(f"- {f}" for f in facts)
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _INSTRUCTIONS + body}]


def _label(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        raise ValueError(f"a mind-map label must be text or a number, got {x!r}")
    if not isinstance(x, (str, int, float)):
        raise ValueError(f"a mind-map label must be text or a number, got {type(x).__name__}")
    s = " ".join(str(x).split())
    if not s:
        raise ValueError("a mind-map label is empty")
    return s


def _build(value: Any, depth: int) -> list[MindMapNode]:
    if depth > MAX_DEPTH:
        raise ValueError(f"the mind map is deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        nodes = []
        for k, v in value.items():
            kids = _build(v, depth + 1) if v not in (None, "", [], {}) else []
            nodes.append(MindMapNode(_label(k), kids))
        return nodes
    if isinstance(value, list):
        out: list[MindMapNode] = []
        for v in value:
            out += _build(v, depth)
        return out
    return [MindMapNode(_label(value))]


def _branches(value: Any, depth: int) -> list[MindMapNode]:
    if depth > MAX_DEPTH:
        raise ValueError(f"the mind map is deeper than {MAX_DEPTH} levels")
    if not isinstance(value, list):
        raise ValueError('"branches" must be a list of {"keyword": ..., "facts": [...]} objects')
    out: list[MindMapNode] = []
    for b in value:
        if not isinstance(b, dict) or "keyword" not in b:
            raise ValueError('each branch must be an object with a "keyword" and "facts" (or "branches")')
        facts = b.get("facts", [])
        facts = [facts] if isinstance(facts, str) else facts
        if not isinstance(facts, list):
            raise ValueError('"facts" must be a list of strings')
        kids = [MindMapNode(_label(f)) for f in facts if not (isinstance(f, str) and not f.strip())]
        kids += _branches(b.get("branches", []), depth + 1)
        if kids:
            out.append(MindMapNode(_label(b["keyword"]), kids))
    return out


def parse_mindmap(value: Any, topic: str | None = None) -> MindMapNode:
    """Turn the model's nested JSON into a checked :class:`MindMapNode` tree.

    Parameters
    ----------
    value : Any
        Decoded JSON. An object with one key is that key's tree; an object with several keys
        (or a list) is placed under ``topic``.
    topic : str, optional
        The document's main topic: the root label when the JSON has no single root.

    Returns
    -------
    MindMapNode
        The root; it has at least one child (one fact path).

    Raises
    ------
    ValueError
        If the value is not an object/list, has no fact path, is deeper than :data:`MAX_DEPTH`,
        or has empty labels. The message is meant to be sent back to the model.
    """
    if not isinstance(value, (dict, list)):
        raise ValueError("the mind map must be a JSON object whose key is the main topic")
    if isinstance(value, dict) and "branches" in value:
        label = value.get("topic") or topic
        if label is None:
            raise ValueError('the mind map needs a "topic"')
        root = MindMapNode(_label(label), _branches(value["branches"], 2))
        if not root.children:
            raise ValueError("the mind map has no facts under its main topic")
        return root
    if isinstance(value, dict) and len(value) == 1:
        (root,) = _build(value, 1)
    else:
        if topic is None:
            raise ValueError("the mind map must have a single top-level key (the main topic)")
        root = MindMapNode(_label(topic), _build(value, 2))
    if not root.children:
        raise ValueError("the mind map has no facts under its main topic")
    return root


def fact_paths(root: MindMapNode) -> list[list[str]]:
    """Every root-to-leaf path of labels, in depth-first (document) order.

    >>> fact_paths(parse_mindmap({"T": {"a": ["x", "y"], "b": "z"}}))
    [['T', 'a', 'x'], ['T', 'a', 'y'], ['T', 'b', 'z']]
    """
    out: list[list[str]] = []

    def walk(node: MindMapNode, prefix: list[str]) -> None:
        path = prefix + [node.label]
        if not node.children:
            out.append(path)
        for c in node.children:
            walk(c, path)

    walk(root, [])
    return out


def generate_mindmap(
    topic: str, facts: Sequence[str], llm: ChatModel, *, max_repairs: int = 2, max_tokens: int = 1536
) -> MindMapNode:
    """Ask the LLM for the mind map of a document's FCIs; malformed replies are repaired.

    A batch of one through :func:`generate_mindmaps` (the step is written once).

    Parameters
    ----------
    topic : str
    facts : sequence of str
        The verified FCIs (:func:`chunkwise.crud.pgrag.extract.extract_verified_fcis`).
    llm : chunkwise.llm.ChatModel
    max_repairs : int, default 2
        Re-asks (with the parse error) when the reply is not a usable mind map.
    max_tokens : int, default 1536

    Returns
    -------
    MindMapNode

    Raises
    ------
    ValueError
        If ``facts`` is empty.
    chunkwise.llm.LLMJSONError
        If no reply is a usable mind map after the repairs (quotes the last reply).
    """
    if not any(f.strip() for f in facts):
        raise ValueError("generate_mindmap needs at least one fact")
    (result,), _calls = generate_mindmaps([(topic, facts)], llm, max_repairs=max_repairs, max_tokens=max_tokens)
    if isinstance(result, Exception):
        raise result
    return result


def generate_mindmaps(
    items: Sequence[tuple[str, Sequence[str]]], llm: ChatModel, *, max_repairs: int = 2, max_tokens: int = 1536
) -> tuple[list[MindMapNode | Exception], list[int]]:
    """:func:`generate_mindmap` for many documents, as one LLM batch.

    The requests (and so the replies and cache keys) are those of :func:`generate_mindmap`
    per document; they go through :func:`chunkwise.llm.batch.chat_json_many` (cached replies
    first, the misses at most ``llm.max_concurrency`` at once).

    Parameters
    ----------
    items : sequence of (topic, facts)
    llm, max_repairs, max_tokens
        As in :func:`generate_mindmap`.

    Returns
    -------
    (maps, calls) : (list of MindMapNode or Exception, list of int)
        Per document, in input order: the mind map or the exception (e.g.
        :class:`chunkwise.llm.LLMJSONError`) :func:`generate_mindmap` would have raised; and
        the chat calls made (repairs included; 0 when the llm does not count them).

    Raises
    ------
    ValueError
        If a document has no non-empty fact (before any request).
    """
    from chunkwise.llm.batch import chat_json_many

    requests = []
    for i, (topic, facts) in enumerate(items):
        kept = [f for f in facts if f.strip()]
        if not kept:
            raise ValueError(f"generate_mindmap needs at least one fact (document {i})")

        def validator(value: Any, topic: str = topic) -> None:
            parse_mindmap(value, topic)

        requests.append({"messages": mindmap_messages(topic, kept), "validator": validator})
    results = chat_json_many(llm, requests, max_repairs=max_repairs, temperature=0.0, max_tokens=max_tokens)
    maps: list[MindMapNode | Exception] = [
        res.error if res.error is not None else parse_mindmap(res.value, items[res.index][0]) for res in results
    ]
    return maps, [res.calls or 0 for res in results]
