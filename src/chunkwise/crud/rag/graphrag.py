"""Graph RAG: an LLM-extracted entity graph, its communities, and local search (a CRUD-RAG baseline).

Edge et al., 2024, "From Local to Global: A Graph RAG Approach to Query-Focused Summarization"
(arXiv 2404.16130). Section 2 of the paper builds the index in four steps, followed here:

1. **Element extraction** (2.2): an LLM reads every text unit (chunk) and lists its entities
   (name, type, description) and the relations between them (source, target, description);
2. **Element summaries** (2.3): mentions of the same entity (same normalised name) become one
   graph node; relations become weighted edges;
3. **Graph communities** (2.4): the graph is partitioned into communities (Leiden in the
   paper, Louvain here -- :func:`networkx.algorithms.community.louvain_communities`);
4. **Community summaries** (2.5): an LLM writes a report for every community.

Querying follows the *local search* mode of the authors' follow-up implementation (microsoft/
graphrag, "Local Search"): the question is embedded, the most similar entities are taken
(entity embeddings of ``"name: description"``), expanded to their 1-hop neighbours, and the
text units that mention the selected entities are ranked by how many of them they mention;
the top entity's community report leads the context. :class:`GraphRAGLocalRetriever`
implements it behind the :class:`~chunkwise.retrieval.Retriever` interface.

What differs from the paper: the prompts are our own (they ask for the text's language, so the
Chinese CRUD-RAG corpus gets Chinese descriptions); extraction is one JSON reply per chunk
(schema-validated with :meth:`chunkwise.llm.LLMClient.chat_json` and its repairs) without the
paper's "gleanings" rounds; an entity's mentions are merged by concatenating their distinct
descriptions instead of asking an LLM to summarise them; communities are one level of Louvain
(not a Leiden hierarchy); local search returns text units and one community report (no
relation or covariate tables, no token budgeting of the context).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkwise._jsonl import JSONLStore

from chunkwise.llm.client import LLMJSONError
from chunkwise._validation import Interval, check_param
from chunkwise.crud.rag.chunking import id_text_pairs
from chunkwise.crud.rag.retrievers import CRUD_TOP_K
from chunkwise.retrieval import Hit, check_top_k, unit_rows

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "COMMUNITY_PROMPT",
    "COMMUNITY_SCHEMA",
    "EXTRACTION_PROMPT",
    "EXTRACTION_SCHEMA",
    "GraphIndex",
    "GraphRAGLocalRetriever",
    "normalise_name",
]

logger = logging.getLogger(__name__)

#: The entity/relation extraction prompt (ours); ``{text}`` is replaced by the chunk's text.
EXTRACTION_PROMPT = (
    "Extract the entities and the relations between them from the text below.\n"
    "Entities are people, organisations, places, events, products, policies and other named "
    "things the text is about. For each entity give its name as written in the text, a short "
    "type (person, organization, location, event, product, concept, ...) and a one-sentence "
    "description based only on the text; keep names, numbers and dates.\n"
    "Relations connect two of the listed entities: give the source and target names exactly as "
    "in the entity list and a one-sentence description of how they are related.\n"
    "Write the descriptions in the same language as the text. Answer with JSON only, of the form\n"
    '{"entities": [{"name": "...", "type": "...", "description": "..."}], '
    '"relations": [{"source": "...", "target": "...", "description": "..."}]}\n'
    "Use empty lists when there is nothing to extract.\n\nText:\n{text}"
)

_NONEMPTY = {"type": "string", "pattern": r"\S"}

#: JSON Schema of an extraction reply.
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["entities", "relations"],
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],  # a missing type or description is "" (small models drop them)
                "properties": {"name": _NONEMPTY, "type": {"type": "string"}, "description": {"type": "string"}},
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["source", "target"],
                "properties": {"source": _NONEMPTY, "target": _NONEMPTY, "description": {"type": "string"}},
            },
        },
    },
}

#: The community report prompt (ours); ``{entities}`` and ``{relations}`` are replaced by lines
#: ``- name (type): description`` and ``- source -> target: description``.
COMMUNITY_PROMPT = (
    "Below are entities and relations that form one community of a knowledge graph built from "
    "news articles. Write a report on this community: a short title and a summary paragraph "
    "that says who or what the community is about and what the key facts are. Keep names, "
    "numbers and dates. Write in the same language as the entity descriptions. Answer with JSON "
    'only, of the form {"title": "...", "summary": "..."}\n\n'
    "Entities:\n{entities}\n\nRelations:\n{relations}"
)

#: JSON Schema of a community report reply.
COMMUNITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["title", "summary"],
    "properties": {"title": {"type": "string"}, "summary": _NONEMPTY},
}


def normalise_name(name: str) -> str:
    """An entity name's graph key: Unicode NFKC, runs of whitespace -> one space, stripped, casefolded.

    ``"  City\\u3000 LIBRARY "`` and ``"city library"`` give the same key; Chinese names only lose
    surrounding/duplicate whitespace (and full-width forms become half-width under NFKC).
    """
    return " ".join(unicodedata.normalize("NFKC", str(name)).split()).casefold()


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _check_int(name: str, value: Any, minimum: int | None) -> int:
    return int(check_param(name, value, [Interval(int, minimum, None)]))




def _reply_text(reply: Any) -> str:
    return str(getattr(reply, "text", reply))


class GraphIndex:
    """An entity graph over a chunked corpus, its Louvain communities and their LLM reports.

    Build it with :meth:`build`.

    Attributes
    ----------
    graph : networkx.Graph
        Nodes are normalised entity names (:func:`normalise_name`), in order of first mention;
        node attributes ``type`` (str, the most frequent extracted type, ties by first
        mention), ``description`` (str, the distinct extracted descriptions joined by a space,
        in order of first mention), ``chunk_ids`` (list of str, the chunks that mention it, in
        corpus order), ``community`` (int). Edge attributes ``weight`` (float, the number of
        extracted relation mentions between the two entities, over all chunks and both
        directions), ``description`` (str, distinct relation descriptions joined by a space),
        ``chunk_ids`` (list of str).
    chunk_ids : list of str
        Corpus order.
    chunk_texts : dict str -> str
    chunk_entities : dict str -> list of str
        Entities each chunk mentions (as an entity or a relation endpoint); empty for failed chunks.
    failed : dict str -> str
        Chunk id -> why its extraction failed (the LLM's JSON was unusable after repairs).
    communities : list of list of str
        Community ``c``'s entity names; communities sorted by size (largest first), ties by the
        first mention of their members.
    summaries : dict int -> str
        Community id -> its report (``"title\\nsummary"``); absent for communities not
        summarised (``summarize_communities=False``) or whose report failed.
    failed_communities : dict int -> str
        Community id -> why its report failed.
    entity_names : list of str
        Row order of ``entity_embeddings`` (= graph node order).
    entity_embeddings : numpy.ndarray, shape (n_entities, d), float32
        L2-normalised embeddings of ``"name: description"``; shape ``(0, 0)`` for an empty graph.
    llm_calls, reused_extractions, reused_summaries : int
        Of the build (``llm_calls`` counts ``chat_json`` calls, each possibly with repairs).
    """

    def __init__(self, graph: Any, *, chunk_ids: list[str], chunk_texts: dict[str, str],
                 chunk_entities: dict[str, list[str]], failed: dict[str, str], communities: list[list[str]],
                 summaries: dict[int, str], failed_communities: dict[int, str], entity_names: list[str],
                 entity_embeddings: np.ndarray, llm_calls: int = 0, reused_extractions: int = 0,
                 reused_summaries: int = 0) -> None:
        self.graph = graph
        self.chunk_ids = chunk_ids
        self.chunk_texts = chunk_texts
        self.chunk_entities = chunk_entities
        self.failed = failed
        self.communities = communities
        self.summaries = summaries
        self.failed_communities = failed_communities
        self.entity_names = entity_names
        self.entity_embeddings = entity_embeddings
        self.llm_calls = llm_calls
        self.reused_extractions = reused_extractions
        self.reused_summaries = reused_summaries

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def __repr__(self) -> str:
        return (f"GraphIndex({len(self.chunk_ids)} chunks, {self.graph.number_of_nodes()} entities, "
                f"{self.graph.number_of_edges()} edges, {len(self.communities)} communities, "
                f"{len(self.failed)} failed chunks)")

    def community_of(self, entity: str) -> int:
        """The community id of an entity (its name is normalised first); KeyError when absent."""
        return int(self.graph.nodes[normalise_name(entity)]["community"])

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        chunks: Iterable[Any],
        llm: ChatModel | None,
        embedder: Any,
        *,
        store: str | os.PathLike[str] | None = None,
        resolution: float = 1.0,
        seed: int = 0,
        summarize_communities: bool = True,
        min_community_size: int = 1,
        extraction_max_tokens: int = 1024,
        summary_max_tokens: int = 512,
        max_community_chars: int = 12000,
        retry_failed: bool = False,
        show_progress: bool = False,
    ) -> GraphIndex:
        """Extract, merge, partition and summarise (paper section 2.2-2.5).

        Parameters
        ----------
        chunks : iterable
            :class:`~chunkwise.crud.rag.chunking.CorpusChunk` objects (``chunk_id``, ``text``),
            objects with ``id`` and ``text``, ``(id, text)`` pairs, or strings (ids = index).
        llm : ChatModel
            Returning ``(value, response)`` and raising
            :class:`~chunkwise.llm.client.LLMJSONError` when no valid JSON came back (e.g.
            :class:`chunkwise.llm.LLMClient`). May be ``None`` when the store already holds
            every extraction and report needed.
        embedder : object with ``embed(texts) -> ndarray (n, d)``
            For the entities' ``"name: description"`` texts (rows are L2-normalised here).
        store : path, optional
            Folder for ``extractions.jsonl`` (one record per chunk, keyed by chunk id + sha1 of
            its text, appended and flushed as soon as the chunk is done, failures included) and
            ``community_summaries.jsonl`` (keyed by the sha1 of the report prompt). A later
            build reuses them and makes no LLM call for them; a cut last line is redone.
        resolution : float > 0, default 1.0
            Louvain resolution (higher: more, smaller communities).
        seed : int, default 0
            Louvain's random seed.
        summarize_communities : bool, default True
            Ask the LLM for a report per community (one call per community).
        min_community_size : int >= 1, default 1
            Only communities with at least this many entities get a report; 1 (default): every
            community, singletons included, as in the paper. A larger value saves one LLM call
            per small community; local search then gives no report for them.
        extraction_max_tokens, summary_max_tokens : int >= 1
            ``max_tokens`` of the extraction and report requests (completion tokens).
        max_community_chars : int >= 1, default 12000
            Character budget of a report prompt's entity and relation lines; entities are added
            by decreasing degree, then relations by decreasing weight, until it is spent.
        retry_failed : bool, default False
            Re-ask the LLM for chunks the store records as failed (otherwise they stay failed).
        show_progress : bool, default False
            Print progress lines to stderr.

        Returns
        -------
        GraphIndex

        Raises
        ------
        ValueError
            For empty ``chunks``, duplicate ids, a chunk without text, parameters out of range,
            an ``llm`` without ``chat_json`` when a call is needed, an embedder without
            ``embed`` or returning the wrong number of vectors, or a corrupt store line.
        chunkwise.llm.client.LLMRequestError
            When a request fails (network, server); only JSON failures are recorded and skipped.
        RuntimeError
            When the extraction failed for every chunk (an empty index would answer every
            question with nothing); the failures stay recorded in the store.
        """
        import networkx as nx
        from networkx.algorithms.community import louvain_communities

        if (isinstance(resolution, bool) or not isinstance(resolution, (int, float, np.number))
                or not 0 < float(resolution) < float("inf")):
            raise ValueError(f"resolution must be a finite number > 0, got {resolution!r}")
        if not isinstance(summarize_communities, (bool, np.bool_)):
            raise ValueError(f"summarize_communities must be True or False, got {summarize_communities!r}")
        seed = _check_int("seed", seed, None)
        extraction_max_tokens = _check_int("extraction_max_tokens", extraction_max_tokens, 1)
        summary_max_tokens = _check_int("summary_max_tokens", summary_max_tokens, 1)
        max_community_chars = _check_int("max_community_chars", max_community_chars, 1)
        min_community_size = _check_int("min_community_size", min_community_size, 1)
        if not callable(getattr(embedder, "embed", None)):
            raise ValueError("embedder must have an embed(texts) method")
        ids, texts = id_text_pairs(chunks, "a graph index needs at least one chunk")
        ext_store = JSONLStore(store, "extractions.jsonl") if store is not None else None
        sum_store = JSONLStore(store, "community_summaries.jsonl") if store is not None else None
        calls = [0]

        # 1. extraction, per chunk, resumable; the chunks not in the store go out as one batch
        #    (the LLM's cache first, the misses concurrently), stored in chunk order
        records: list[dict[str, Any] | None] = []
        reused_ext = 0
        asks: list[tuple[int, str, str]] = []  # (position, key, chunk id)
        for cid, text in zip(ids, texts):
            key = f"{cid}\t{_sha1(text)}"
            rec = ext_store.get(key) if ext_store is not None else None
            if rec is not None and not (retry_failed and rec.get("status") == "failed"):
                reused_ext += 1
                records.append(rec)
            else:
                asks.append((len(records), key, cid))
                records.append(None)
        if asks:
            if not callable(getattr(llm, "chat_json", None)):
                raise ValueError("llm must have a chat_json(messages, schema=..., ...) method "
                                 "(the store does not hold every result needed)")
            from chunkwise.llm.batch import chat_json_many

            calls[0] += len(asks)
            results = chat_json_many(
                llm, [[{"role": "user", "content": EXTRACTION_PROMPT.replace("{text}", texts[pos])}]
                      for pos, _, _ in asks],
                EXTRACTION_SCHEMA, temperature=0.0, max_tokens=extraction_max_tokens,
                progress="Graph RAG extraction" if show_progress else False,
            )
            first_error: Exception | None = None
            for (pos, key, cid), res in zip(asks, results):
                if res.ok:
                    value = res.value
                    rec = {"key": key, "chunk_id": cid, "status": "ok", "entities": value["entities"],
                           "relations": value["relations"], "error": None}
                elif isinstance(res.error, LLMJSONError):
                    reason = str(getattr(res.error, "error", "") or res.error)
                    logger.warning("Graph RAG extraction failed for chunk %s: %s", cid, reason)
                    rec = {"key": key, "chunk_id": cid, "status": "failed", "entities": [], "relations": [],
                           "error": reason}
                else:  # a request that failed: not recorded, raised after the others are stored
                    first_error = first_error or res.error
                    continue
                if ext_store is not None:
                    ext_store.put(rec)
                records[pos] = rec
            if first_error is not None:
                raise first_error

        # 2. merge into a graph
        graph = nx.Graph()
        types: dict[str, Counter[str]] = {}
        descs: dict[str, list[str]] = {}
        chunk_entities: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        edge_descs: dict[tuple[str, str], list[str]] = {}

        def add_mention(name: str, etype: str, desc: str, cid: str) -> None:
            if name not in graph:
                graph.add_node(name, chunk_ids=[])
                types[name] = Counter()
                descs[name] = []
            if etype:
                types[name][etype] += 1
            if desc and desc not in descs[name]:
                descs[name].append(desc)
            if cid not in graph.nodes[name]["chunk_ids"]:
                graph.nodes[name]["chunk_ids"].append(cid)
            if name not in chunk_entities[cid]:
                chunk_entities[cid].append(name)

        for cid, rec in zip(ids, records):
            chunk_entities[cid] = []
            if rec.get("status") == "failed":
                failed[cid] = str(rec.get("error"))
                continue
            for ent in rec["entities"]:
                name = normalise_name(ent["name"])
                if name:
                    add_mention(name, " ".join(str(ent.get("type", "")).split()).casefold(),
                                str(ent.get("description", "")).strip(), cid)
            for rel in rec["relations"]:
                src, tgt = normalise_name(rel["source"]), normalise_name(rel["target"])
                if not src or not tgt or src == tgt:
                    continue
                add_mention(src, "", "", cid)
                add_mention(tgt, "", "", cid)
                if graph.has_edge(src, tgt):
                    graph.edges[src, tgt]["weight"] += 1.0
                else:
                    graph.add_edge(src, tgt, weight=1.0, chunk_ids=[])
                    edge_descs[(src, tgt)] = []
                edge = graph.edges[src, tgt]
                if cid not in edge["chunk_ids"]:
                    edge["chunk_ids"].append(cid)
                ekey = (src, tgt) if (src, tgt) in edge_descs else (tgt, src)
                desc = str(rel.get("description", "")).strip()
                if desc and desc not in edge_descs[ekey]:
                    edge_descs[ekey].append(desc)
        if len(failed) == len(ids):
            first = next(iter(failed.items()))
            raise RuntimeError(
                f"Graph RAG: the extraction failed for all {len(ids)} chunks (e.g. chunk {first[0]}: "
                f"{first[1][:200]}); the index would be empty. The failures are recorded in the store; "
                "use a model that follows the JSON schema, then rebuild with retry_failed=True."
            )
        order = {cid: i for i, cid in enumerate(ids)}
        for name in graph.nodes:
            node = graph.nodes[name]
            node["type"] = types[name].most_common(1)[0][0] if types[name] else ""
            node["description"] = " ".join(descs[name])
            node["chunk_ids"].sort(key=order.__getitem__)
        for (a, b), ds in edge_descs.items():
            graph.edges[a, b]["description"] = " ".join(ds)
            graph.edges[a, b]["chunk_ids"].sort(key=order.__getitem__)

        # 3. communities
        names = list(graph.nodes)
        position = {name: i for i, name in enumerate(names)}
        if names:
            parts = louvain_communities(graph, weight="weight", resolution=float(resolution), seed=seed)
        else:
            parts = []
        communities = sorted((sorted(p, key=position.__getitem__) for p in parts),
                             key=lambda m: (-len(m), position[m[0]]))
        for c, members in enumerate(communities):
            for name in members:
                graph.nodes[name]["community"] = c

        # 4. community reports
        summaries: dict[int, str] = {}
        failed_comms: dict[int, str] = {}
        reused_sum = 0
        if summarize_communities:
            # the reports not in the store go out as one batch (cache first, misses concurrently)
            found: dict[int, dict[str, Any]] = {}
            todo: list[tuple[int, list[str], str, str]] = []  # (community, members, prompt, key)
            for c, members in enumerate(communities):
                if len(members) < min_community_size:
                    continue
                prompt = cls._community_prompt(graph, members, max_community_chars)
                key = _sha1(prompt)
                rec = sum_store.get(key) if sum_store is not None else None
                if rec is not None and not (retry_failed and rec.get("status") == "failed"):
                    reused_sum += 1
                    found[c] = rec
                else:
                    todo.append((c, members, prompt, key))
            first_error: Exception | None = None
            if todo:
                if not callable(getattr(llm, "chat_json", None)):
                    raise ValueError("llm must have a chat_json(messages, schema=..., ...) method "
                                     "(the store does not hold every result needed)")
                from chunkwise.llm.batch import chat_json_many

                calls[0] += len(todo)
                results = chat_json_many(llm, [[{"role": "user", "content": t[2]}] for t in todo], COMMUNITY_SCHEMA,
                                         temperature=0.0, max_tokens=summary_max_tokens)
                for (c, members, _prompt, key), res in zip(todo, results):
                    if res.ok:
                        value = res.value
                        title, summary = str(value["title"]).strip(), str(value["summary"]).strip()
                        rec = {"key": key, "members": members, "status": "ok",
                               "text": f"{title}\n{summary}" if title else summary, "error": None}
                    elif isinstance(res.error, LLMJSONError):
                        reason = str(getattr(res.error, "error", "") or res.error)
                        logger.warning("Graph RAG report failed for community %d: %s", c, reason)
                        rec = {"key": key, "members": members, "status": "failed", "text": None, "error": reason}
                    else:  # a request that failed: not recorded, raised after the others are stored
                        first_error = first_error or res.error
                        continue
                    if sum_store is not None:
                        sum_store.put(rec)
                    found[c] = rec
            if first_error is not None:
                raise first_error
            for c in sorted(found):
                rec = found[c]
                if rec.get("status") == "failed":
                    failed_comms[c] = str(rec.get("error"))
                else:
                    summaries[c] = str(rec["text"])
            if show_progress:
                print(f"Graph RAG: {len(communities)} communities, {len(summaries)} reports",
                      file=sys.stderr, flush=True)

        # entity embeddings
        if names:
            entity_texts = [f"{n}: {graph.nodes[n]['description']}" for n in names]
            vecs = unit_rows(embedder.embed(entity_texts))
            if vecs.shape[0] != len(names):
                raise ValueError(f"the embedder returned {vecs.shape[0]} vectors for {len(names)} texts")
        else:
            vecs = np.zeros((0, 0), dtype=np.float32)
        logger.info("Graph RAG: %d entities, %d edges, %d communities, %d failed chunks, %d LLM calls",
                    len(names), graph.number_of_edges(), len(communities), len(failed), calls[0])
        return cls(graph, chunk_ids=ids, chunk_texts=dict(zip(ids, texts)), chunk_entities=chunk_entities,
                   failed=failed, communities=communities, summaries=summaries, failed_communities=failed_comms,
                   entity_names=names, entity_embeddings=vecs, llm_calls=calls[0], reused_extractions=reused_ext,
                   reused_summaries=reused_sum)

    @staticmethod
    def _community_prompt(graph: Any, members: Sequence[str], budget: int) -> str:
        """:data:`COMMUNITY_PROMPT` for ``members``: entity lines by decreasing degree, then
        relation lines (edges inside the community) by decreasing weight, within ``budget`` characters."""
        member_set = set(members)
        rank = {m: i for i, m in enumerate(members)}
        ents = sorted(members, key=lambda m: (-graph.degree(m, weight="weight"), rank[m]))
        rels = sorted(((a, b) if rank[a] <= rank[b] else (b, a) for a, b in graph.subgraph(member_set).edges),
                      key=lambda e: (-graph.edges[e]["weight"], rank[e[0]], rank[e[1]]))
        used = 0
        ent_lines: list[str] = []
        for m in ents:
            node = graph.nodes[m]
            line = f"- {m} ({node['type'] or 'unknown'}): {node['description']}"
            if used + len(line) > budget and ent_lines:
                break
            ent_lines.append(line)
            used += len(line)
        rel_lines: list[str] = []
        for a, b in rels:
            line = f"- {a} -> {b}: {graph.edges[a, b]['description']}"
            if used + len(line) > budget:
                break
            rel_lines.append(line)
            used += len(line)
        return (COMMUNITY_PROMPT.replace("{entities}", "\n".join(ent_lines))
                .replace("{relations}", "\n".join(rel_lines) or "(none)"))


class GraphRAGLocalRetriever:
    """Graph RAG local search (microsoft/graphrag "Local Search", after Edge et al., 2024).

    For a question: embed it; take the ``top_entities`` entities with the highest cosine
    similarity of their ``"name: description"`` embedding (ties by graph order); add their
    1-hop neighbours; rank the chunks that mention any selected entity by the number of
    selected entities they mention (descending), ties by the highest cosine among those
    entities, then corpus order. The hits are the report of the top entity's community first
    (id ``"community:<c>"``, score = that entity's cosine; left out when the community has no
    report) and then the ranked chunks (score = the number of selected entities mentioned, a
    float), at most ``top_k`` in all.

    Parameters
    ----------
    index : GraphIndex
    query_embedder : object with ``embed(texts) -> ndarray``
        Must share the vector space of the index's entity embedder.
    top_entities : int >= 1, default 10
        Entities taken by similarity before the 1-hop expansion (graphrag's ``top_k_entities``).
    name : str, default "graph_rag"

    Raises
    ------
    ValueError
        For ``top_entities < 1``, an index that is not a :class:`GraphIndex`, or a query
        embedder without ``embed``.
    """

    def __init__(self, index: GraphIndex, query_embedder: Any, top_entities: int = 10, *,
                 name: str = "graph_rag") -> None:
        if not isinstance(index, GraphIndex):
            raise ValueError(f"index must be a GraphIndex, got {type(index).__name__}")
        if not callable(getattr(query_embedder, "embed", None)):
            raise ValueError("query_embedder must have an embed(texts) method")
        self.top_entities = _check_int("top_entities", top_entities, 1)
        self.index = index
        self.query_embedder = query_embedder
        self.name = name
        self._order = {cid: i for i, cid in enumerate(index.chunk_ids)}

    def similarities(self, question: str) -> np.ndarray:
        """Cosine of the question with every entity, shape (n_entities,), in ``index.entity_names`` order."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"question must be a non-empty string, got {question!r}")
        matrix = self.index.entity_embeddings
        if matrix.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        q = unit_rows(self.query_embedder.embed([question]))
        if q.shape != (1, matrix.shape[1]):
            raise ValueError(f"query embedding has shape {q.shape}, the entities have dimension {matrix.shape[1]}")
        return matrix @ q[0]

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """Hits: the top entity's community report, then chunks, best first, at most ``top_k``.

        Raises
        ------
        ValueError
            For an empty question, a ``top_k`` that is not an int >= 0, or a query embedding
            whose dimension differs from the entities'.
        """
        top_k = check_top_k(top_k)
        sims = self.similarities(question)
        if top_k == 0 or sims.size == 0:
            return []
        idx = self.index
        names = idx.entity_names
        ranked = np.lexsort((np.arange(len(sims)), -sims))[: self.top_entities]
        sim_of = {names[r]: float(sims[r]) for r in range(len(names))}
        selected: set[str] = set()
        for r in ranked:
            selected.add(names[r])
            selected.update(idx.graph.neighbors(names[r]))
        counts: dict[str, int] = {}
        best: dict[str, float] = {}
        for ent in selected:
            for cid in idx.graph.nodes[ent]["chunk_ids"]:
                counts[cid] = counts.get(cid, 0) + 1
                best[cid] = max(best.get(cid, -np.inf), sim_of[ent])
        chunks = sorted(counts, key=lambda c: (-counts[c], -best[c], self._order[c]))
        hits: list[Hit] = []
        top_entity = names[ranked[0]]
        community = idx.graph.nodes[top_entity].get("community")
        if community is not None and community in idx.summaries:
            hits.append(Hit(f"community:{community}", idx.summaries[community], sim_of[top_entity]))
        for cid in chunks:
            if len(hits) >= top_k:
                break
            hits.append(Hit(cid, idx.chunk_texts[cid], float(counts[cid])))
        return hits[:top_k]
