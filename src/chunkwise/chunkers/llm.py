"""Chunking by asking a language model where the topic changes (Chroma's "LLM" chunker).

The method of Chroma's technical report (Smith & Troynikov, 2024): cut the text into small
pieces (50 tokens by recursive splitting), show the model a window of consecutive numbered
pieces (about 800 tokens), and ask after which pieces a new theme starts. The window then moves
to the last split the model chose, until the text is covered.

chunkwise's version asks for JSON (``{"split_after": [ids]}``) through
:class:`chunkwise.llm.LLMClient`, so answers are cached, validated and re-asked a bounded number
of times; a model that never gives a usable answer raises instead of producing silent chunks.
A window in which the model sees no theme change moves on to its end, so the walk always
terminates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers.base import check_positive_int
from chunkwise.chunkers.kamradt import chroma_piece_splitter
from chunkwise.chunkers.semantic import group_sentences
from chunkwise.tokens import count_tokens

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

SYSTEM_PROMPT = (
    "You split documents into sections that each keep to one theme. The document is given as "
    "numbered pieces, each wrapped as [[n]] ... [[/n]]. Decide after which pieces a new theme "
    "begins. Reply with JSON only, in the form {\"split_after\": [n1, n2, ...]}: piece numbers "
    "in ascending order, taken from the pieces shown. Reply {\"split_after\": []} when all the "
    "pieces shown share one theme."
)

SPLIT_SCHEMA = {
    "type": "object",
    "properties": {"split_after": {"type": "array", "items": {"type": "integer"}}},
    "required": ["split_after"],
}


class LLMSemanticChunker:
    """Chunks whose boundaries a language model chooses.

    Parameters
    ----------
    client : chunkwise.llm.ChatModel
        E.g. :class:`chunkwise.llm.LLMClient`; its ``chat_json(messages, schema=..., validator=..., **kw)
        -> (obj, response)`` is used.
    piece_size : int, default 50
        Size of the recursive pieces in tokens of ``encoding_name``.
    window_tokens : int, default 800
        Tokens of pieces shown to the model per request (the window ends at the first piece
        that takes it past this size).
    max_repairs : int, default 2
        Re-asks per window when the reply is not valid.
    temperature : float, default 0.0
    encoding_name : str, default "cl100k_base"

    Attributes
    ----------
    last_stats : dict
        Of the latest :meth:`split`: ``windows`` (windows shown, one answered request each),
        ``repairs`` (re-asks after an invalid reply: JSON that does not parse or fit the schema,
        or piece numbers outside the window; counted from the client's ``stats()["calls"]``,
        None for a client without stats), ``windows_without_split`` (windows where the model
        named no split), ``splits`` (split points named and kept), ``pieces``.

    References
    ----------
    B. Smith and A. Troynikov, "Evaluating Chunking Strategies for Retrieval", Chroma technical
    report, 2024 (LLMSemanticChunker, GPT-4o in the report).
    """

    def __init__(
        self,
        client: ChatModel,
        piece_size: int = 50,
        window_tokens: int = 800,
        max_repairs: int = 2,
        temperature: float = 0.0,
        encoding_name: str = "cl100k_base",
    ) -> None:
        if not callable(getattr(client, "chat_json", None)):
            raise TypeError(
                "client must be a chunkwise.llm.LLMClient (or have chat_json); configure one with "
                "CHUNKWISE_LLM_BASE_URL / CHUNKWISE_LLM_MODEL or start the local model."
            )
        check_positive_int("piece_size", piece_size)
        check_positive_int("window_tokens", window_tokens)
        if window_tokens < piece_size:
            raise ValueError(f"window_tokens ({window_tokens}) must be >= piece_size ({piece_size}).")
        self.client = client
        self.piece_size = piece_size
        self.window_tokens = window_tokens
        self.max_repairs = max_repairs
        self.temperature = temperature
        self.encoding_name = encoding_name
        self.splitter = chroma_piece_splitter(piece_size, encoding_name)
        self.last_stats: dict[str, Any] = {}

    def _window(self, pieces: list[Chunk], first: int) -> int:
        """Index one past the last piece of the window starting at ``first``."""
        total = 0
        for i in range(first, len(pieces)):
            total += count_tokens(pieces[i].text, self.encoding_name)
            if total > self.window_tokens:
                return i + 1
        return len(pieces)

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` where the model sees theme changes.

        Returns
        -------
        list of Chunk
            Verbatim slices; ``metadata`` has the piece range.

        Raises
        ------
        chunkwise.llm.LLMJSONError
            When a window gets no valid answer after ``max_repairs`` re-asks.
        """
        pieces = self.splitter.split(text)
        stats = getattr(self.client, "stats", None)
        calls_before = stats()["calls"] if callable(stats) else None
        self.last_stats = {"windows": 0, "repairs": 0 if callable(stats) else None, "windows_without_split": 0,
                           "splits": 0, "pieces": len(pieces)}
        if len(pieces) <= 1:
            return group_sentences(text, pieces, [])
        breakpoints: list[int] = []
        first = 0
        while first < len(pieces) - 1:
            end = self._window(pieces, first)
            shown = "".join(f"[[{i + 1}]]{pieces[i].text}[[/{i + 1}]]" for i in range(first, end))
            lo, hi = first + 1, end  # 1-based piece numbers shown

            def validate(obj: Any, lo: int = lo, hi: int = hi) -> None:
                ids = obj.get("split_after") if isinstance(obj, dict) else None
                if not isinstance(ids, list) or not all(
                    isinstance(n, int) and not isinstance(n, bool) for n in ids
                ):
                    raise ValueError(f"split_after must be a list of integer piece numbers, got {ids!r}.")
                if ids != sorted(ids) or len(set(ids)) != len(ids):
                    raise ValueError(f"split_after must be strictly ascending, got {ids}.")
                bad = [n for n in ids if not lo <= n <= hi]
                if bad:
                    raise ValueError(f"piece numbers {bad} are outside the pieces shown ({lo}..{hi}).")

            messages = [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"PIECES {lo} to {hi}:\n{shown}"},
            ]
            obj, _ = self.client.chat_json(
                messages,
                schema=SPLIT_SCHEMA,
                validator=validate,
                max_repairs=self.max_repairs,
                temperature=self.temperature,
            )
            ids = [n for n in obj["split_after"] if n < len(pieces)]  # a split after the last piece is no split
            breakpoints.extend(n - 1 for n in ids)
            self.last_stats["windows"] += 1
            self.last_stats["windows_without_split"] += not ids
            if end >= len(pieces):
                break
            # Continue from the last split inside the window (Chroma's walk), or from the window's
            # end when the model saw no theme change; always move forward.
            nxt = ids[-1] if ids else end - 1
            first = max(nxt, first + 1)
        bps = sorted(set(b for b in breakpoints if 0 <= b <= len(pieces) - 2))
        self.last_stats["splits"] = len(bps)
        if calls_before is not None:
            self.last_stats["repairs"] = int(stats()["calls"] - calls_before - self.last_stats["windows"])
        return group_sentences(text, pieces, bps)
