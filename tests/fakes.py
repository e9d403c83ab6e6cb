"""Test doubles and hand corpora shared by the tests, which import them from here, never from one another.

Fake embedders (each differs from the others in the vectors it gives; pick by behaviour):

- :class:`CharEmbedder`: a bag of characters over a corpus's alphabet, unit length.
- :class:`WordEmbedder`: a bag of a fixed word list (the grid's ten ``WORDS`` unless given),
  optionally plus a constant, not normalised.
- :class:`FakeEmbedder`: a deterministic bag-of-hashed-words embedder (24-d), counting what it embeds.
- :class:`SeededNormalEmbedder`: a standard-normal vector seeded by the sha256 of the text
  (:func:`seeded_normal_vector`); texts share nothing, so it suits cache and order tests.
- :class:`TableEmbedder`: the vector a table gives each text (hand-chosen cosines).
- :class:`ConstantEmbedder`: the vector of ones for every text; :class:`WindowedConstantEmbedder`
  also knows a window of whitespace words (``max_tokens``, ``token_counts``).
- :class:`WrongCountEmbedder` and :class:`FixedOutputEmbedder`: broken embedders returning the
  wrong number of vectors, or one fixed array whatever the texts, for the error paths.

(The Ray engine's :class:`ray_fakes.HashEmbedder` lives in a module of its own, which Ray's workers
import; tests/plugin_embedders.py is a user's plugin module, named by import path.)

Other doubles and hand data:

- :class:`FakeChatModel` (its calls are :class:`FakeCall`): the one fake chat model, below.
- The grid's hand example (worked by hand in test_grid.py): ``GRID_DOCS`` (two documents of the
  words one..ten), :func:`questions` (their two questions) and :class:`WordEmbedder` (a bag of
  those ``WORDS``).
- :class:`ScriptedLLM`: a real :class:`~chunkwise.llm.LLMClient` whose endpoint answers from a
  list of replies (model identity ``SCRIPTED_IDENTITY``), and the question generation's two
  documents ``TEXT_A``, ``TEXT_B`` and ``QUESTION_DOCS``.
- :func:`text_pdf` and :func:`make_docx`: a one-page PDF and a Word file, built in the test.

:class:`FakeChatModel` is the chat model of every test that does not talk to a server (the
LLMClient tests use :class:`chunkwise.llm.fake_server.FakeChatServer`): it implements
:class:`chunkwise.llm.ChatModel` with scripted replies and keeps a record of every call.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.llm import LLMClient, LLMJSONError, LLMResponse, SequentialBatches, iter_json_candidates


class CharEmbedder:
    """Bag of characters over a fixed alphabet (the corpus's characters), L2-normalised.

    ``calls`` counts the batches. It has no ``name`` unless one is given (a nameless embedder is
    one the library does not cache by name).
    """

    def __init__(self, texts, name: str | None = None):
        chars = sorted({ch for t in texts for ch in t if not ch.isspace()})
        self.index = {ch: i for i, ch in enumerate(chars)}
        self.calls = 0
        if name is not None:
            self.name = name

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), len(self.index)), dtype=np.float32)
        for r, t in enumerate(texts):
            for ch in t:
                j = self.index.get(ch)
                if j is not None:
                    out[r, j] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


# -- the shared fake chat model -----------------------------------------------------------


@dataclass
class FakeCall:
    """One chat call the fake answered: a ``chat`` call, or one turn of a ``chat_json`` exchange.

    ``turn`` is 0 for the request as the caller made it and ``k`` for its ``k``-th repair (the
    messages then end with the rejected reply and the error, as LLMClient sends them).
    """

    method: str  # "chat" or "chat_json"
    messages: list[dict[str, Any]]
    kwargs: dict[str, Any]  # the chat parameters (temperature, max_tokens, seed, ...)
    schema: Any = None
    turn: int = 0

    @property
    def prompt(self) -> str:
        """The content of the last message."""
        return str(self.messages[-1].get("content", ""))


class FakeChatModel(SequentialBatches):
    """A :class:`~chunkwise.llm.ChatModel` for tests: scripted replies, a record of every call.

    ``chat_many`` / ``chat_json_many`` are the loops of :class:`~chunkwise.llm.SequentialBatches`
    (one call at a time, in input order).

    Parameters
    ----------
    reply : str, sequence, or callable, default ""
        What each call answers: a str (always that), a sequence (in turn, the last one
        repeating), or a function of the :class:`FakeCall`. For ``chat`` the answer is the
        reply's text. For ``chat_json`` a str is searched for JSON as LLMClient does
        (:func:`chunkwise.llm.iter_json_candidates`) and anything else is the JSON value itself;
        the value must pass ``schema`` and ``validator``, else the model is asked again with
        the error, at most ``max_repairs`` times, then :class:`~chunkwise.llm.LLMJSONError`.
    fail : exception, or callable returning an exception or None, optional
        Raised instead of answering (for every call, or for the calls the function returns an
        exception for); the call is recorded and counted first, as LLMClient counts it.
    check_schema : bool, default True
        False: ``chat_json`` does not apply its ``schema`` (the ``validator`` still runs), so a
        value of the wrong shape reaches the caller, as from a client that does not validate.
    cached, latency_s : bool, float
        Of every reply (:class:`~chunkwise.llm.LLMResponse`); cached replies count as cache hits.
    model_identity : str, default "fake-model"
    max_concurrency : int, default 1

    Attributes
    ----------
    calls : list of FakeCall
        Every call in order (a chat_json repair is a call, as in ``stats()["calls"]``).
    prompts : list of str
        The last message of each call made by the caller (repairs left out).
    """

    def __init__(
        self,
        reply: Any = "",
        *,
        fail: Any = None,
        check_schema: bool = True,
        cached: bool = False,
        latency_s: float = 0.0,
        model_identity: str = "fake-model",
        max_concurrency: int = 1,
    ) -> None:
        self.reply = reply
        self.fail = fail
        self.check_schema = check_schema
        self.cached = cached
        self.latency_s = latency_s
        self.model_identity = model_identity
        self.max_concurrency = max_concurrency
        self.calls: list[FakeCall] = []
        self._replies = 0
        self._reset_at = 0
        self._lock = threading.Lock()

    # -- records -------------------------------------------------------------------

    @property
    def prompts(self) -> list[str]:
        return [c.prompt for c in self.calls if c.turn == 0]

    def stats(self) -> dict[str, Any]:
        """LLMClient's counters: ``calls`` (turns included), ``cache_hits``, ``requests``, ``latency_s``, ..."""
        with self._lock:
            n = len(self.calls) - self._reset_at
            hits = n if self.cached else 0
            return {"calls": n, "cache_hits": hits, "requests": n - hits, "retries": 0,
                    "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                    "latency_s": self.latency_s * (n - hits)}

    def reset_stats(self) -> None:
        """Counters to zero (the record of calls is kept)."""
        with self._lock:
            self._reset_at = len(self.calls)

    # -- answering -----------------------------------------------------------------

    def _answer(self, call: FakeCall) -> Any:
        with self._lock:
            self.calls.append(call)
            k = self._replies
            self._replies += 1
        error = self.fail(call) if callable(self.fail) else self.fail
        if error is not None:
            raise error
        if callable(self.reply):
            return self.reply(call)
        if isinstance(self.reply, (list, tuple)):
            return self.reply[min(k, len(self.reply) - 1)]
        return self.reply

    def _response(self, text: str) -> LLMResponse:
        return LLMResponse(text=text, model=self.model_identity, latency_s=self.latency_s, cached=self.cached,
                           finish_reason="stop")

    def chat(self, messages: Any, **kwargs: Any) -> LLMResponse:
        return self._response(str(self._answer(FakeCall("chat", _messages(messages), dict(kwargs)))))

    def chat_json(self, messages: Any, schema: Any = None, validator: Any = None, max_repairs: int = 2,
                  json_mode: bool = True, **kwargs: Any) -> tuple[Any, LLMResponse]:
        base = _messages(messages)
        convo = base
        for turn in range(max_repairs + 1):
            answer = self._answer(FakeCall("chat_json", convo, dict(kwargs), schema, turn))
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            candidates = list(iter_json_candidates(answer)) if isinstance(answer, str) else [answer]
            error = "the reply contains no valid JSON" if not candidates else None
            for value in candidates:
                why = _invalid(value, schema if self.check_schema else None, validator)
                if why is None:
                    return value, self._response(text)
                error = error or why
            convo = [*base, {"role": "assistant", "content": text},
                     {"role": "user", "content": f"Your previous reply could not be used: {error}."}]
        raise LLMJSONError(f"no valid JSON after {max_repairs + 1} attempts: {error}", reply=text, error=str(error),
                           attempts=max_repairs + 1, response=self._response(text))


def _messages(messages: Any) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return [dict(m) for m in messages]


def _invalid(value: Any, schema: Any, validator: Any) -> str | None:
    """Why a JSON value is rejected (as LLMClient words it), or None."""
    if schema is not None:
        import jsonschema

        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as exc:
            return f"schema validation failed: {exc.message}"
    if validator is not None:
        try:
            verdict = validator(value)
        except (ValueError, TypeError, KeyError, AssertionError) as exc:
            return f"validation failed: {type(exc).__name__}: {exc}"
        if verdict is False:
            return "validation failed: the value was rejected by the validator"
        if verdict is not None and verdict is not True:
            return f"validation failed: {verdict}"
    return None


# -- the grid's hand example (test_grid.py) ---------------------------------------------


WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
GRID_DOCS = {"a.txt": "one two three four five six", "b.txt": "seven eight nine ten"}


class WordEmbedder:
    """Bag of words over a fixed word list (float32, not normalised), recording every batch it embeds.

    A text's vector counts each of ``words`` (default: the ten WORDS) among its lower-cased ``\\w+``
    words, plus ``offset`` in every dimension (default 0: a text of none of the words is the zero
    vector; a small offset keeps every vector away from zero).
    """

    name = "test-words"

    def __init__(self, words=WORDS, name: str | None = None, offset: float = 0.0):
        self.words = list(words)
        self.offset = offset
        if name is not None:
            self.name = name
        self.calls = []

    def embed(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), len(self.words)), dtype=np.float32)
        for r, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                if w in self.words:
                    out[r, self.words.index(w)] += 1
        return out + self.offset if self.offset else out


def questions():
    """The grid's two hand questions over GRID_DOCS, one reference each."""
    return pd.DataFrame(
        {
            "question_id": ["Q1", "Q2"],
            "question": ["three four", "one two nine"],
            "corpus_id": ["a.txt", "b.txt"],
            "references": [
                [{"content": "three four", "start_index": 8, "end_index": 18}],
                [{"content": "nine ten", "start_index": 12, "end_index": 20}],
            ],
        }
    )


# -- a hashed bag-of-words embedder (test_semantic.py) ----------------------------------


class FakeEmbedder:
    """Deterministic bag-of-hashed-words embedder (float64, 24-d), counting every text it embeds."""

    name = "fake-hash-24"

    def __init__(self, dim: int = 24):
        self.dim = dim
        self.calls = 0
        self.n_embedded = 0
        self.texts: list[str] = []

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim)
        for w in re.findall(r"\w+", text.lower()):
            h = hashlib.sha256(w.encode()).digest()
            idx = h[0] % self.dim
            v[idx] += 1.0 + h[1] / 255.0
            v[(idx + h[2]) % self.dim] += 0.5 * (h[3] / 255.0)
        return v

    def embed(self, texts):
        self.calls += 1
        self.n_embedded += len(texts)
        self.texts.extend(texts)
        return np.array([self.vector(t) for t in texts]).reshape(len(texts), self.dim)


# -- embedders whose vectors are given, constant, or wrong -------------------------------


def seeded_normal_vector(text: str, dim: int = 4) -> np.ndarray:
    """A standard-normal float32 vector seeded by the first 8 bytes of the text's sha256."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


class _RecordsBatches:
    """``calls`` lists the batches an embedder was sent; ``sent`` every text in order."""

    calls: list[list[str]]

    @property
    def sent(self) -> list[str]:
        return [t for call in self.calls for t in call]


class SeededNormalEmbedder(_RecordsBatches):
    """:func:`seeded_normal_vector` of each text (float32, 4-d unless ``dim``), recording every batch.

    ``calls`` lists the batches, ``sent`` every text in order. The dimension is ``dim_`` (not
    ``dim``, which the library would read as the model's own).
    """

    def __init__(self, name: str = "fake/v1", dim: int = 4) -> None:
        self.name = name
        self.dim_ = dim
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.stack([seeded_normal_vector(t, self.dim_) for t in texts]) if texts else np.zeros((0, self.dim_))


class TableEmbedder(_RecordsBatches):
    """The vector ``table[text]`` of each text (a KeyError for a text not in it), recording every batch.

    ``calls`` lists the batches, ``sent`` every text in order. The vectors come back as a float32
    array (``dtype``; None: the rows' own dtype). ``unit=True`` scales each row to unit length
    once, at construction (the float32 row divided by its norm, which makes it float64).
    """

    def __init__(self, table, name: str = "table", *, unit: bool = False, dtype=np.float32) -> None:
        self.name = name
        self.table = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in table.items()} if unit else table
        self.dtype = dtype
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.asarray([self.table[t] for t in texts], dtype=self.dtype)


class ConstantEmbedder:
    """The vector of ones (float32, ``dim`` wide) for every text: every cosine ties. Records nothing."""

    def __init__(self, dim: int = 3, name: str = "constant") -> None:
        self.dim = dim
        self.name = name

    def embed(self, texts):
        return np.ones((len(texts), self.dim), dtype=np.float32)


class WindowedConstantEmbedder(ConstantEmbedder):
    """A :class:`ConstantEmbedder` that knows its window, as the truncation diagnostics read it.

    A text is ``len(text.split()) + specials`` tokens (one per whitespace word, plus the model's
    special tokens); ``max_tokens`` is the window. ``truncates`` is set only when given (an
    embedder that does not say whether it truncates has no such attribute).
    """

    def __init__(self, max_tokens: int, dim: int = 3, name: str = "windowed-constant", *, specials: int = 0,
                 truncates: bool | None = None) -> None:
        super().__init__(dim, name)
        self.max_tokens = max_tokens
        self.specials = specials
        if truncates is not None:
            self.truncates = truncates

    def token_counts(self, texts):
        return np.array([len(t.split()) + self.specials for t in texts], dtype=np.int64)


class WrongCountEmbedder:
    """Broken: ``len(texts) + extra`` vectors of ones (``dim`` wide, ``dtype``), whatever it is asked."""

    def __init__(self, extra: int, dim: int = 3, dtype=np.float64) -> None:
        self.extra, self.dim, self.dtype = extra, dim, dtype

    def embed(self, texts):
        return np.ones((len(texts) + self.extra, self.dim), dtype=self.dtype)


class FixedOutputEmbedder:
    """Broken: returns ``out`` itself, whatever the texts (a wrong count, dimension or shape).

    It has a ``name`` only when one is given.
    """

    def __init__(self, out, name: str | None = None) -> None:
        self.out = out
        if name is not None:
            self.name = name

    def embed(self, texts):
        return self.out


# -- a scripted LLMClient and the question generation's documents (test_questions_generate.py)


TEXT_A = (
    "The river Elbe rises in the Krkonose mountains.\n"
    "It flows for 1094 kilometres to the North Sea near Cuxhaven.\n"
    "Hamburg lies on its lower course."
)
TEXT_B = (
    "Basalt is a fine-grained volcanic rock. It forms from the rapid cooling of lava rich in "
    "magnesium and iron.\nMost of the ocean floor is basalt."
)
QUESTION_DOCS = {"b.txt": TEXT_B, "a.txt": TEXT_A}  # generation sorts names: candidate i uses a, b, a, b, ...
SCRIPTED_IDENTITY = "scripted-model@sha256:test"


class _Completions:
    """The ``chat.completions`` endpoint of a :class:`ScriptedLLM`: pops the next reply text."""

    def __init__(self, owner: ScriptedLLM) -> None:
        self.owner = owner

    def create(self, **params):
        self.owner.requests.append(params)
        if not self.owner.script:
            raise AssertionError("the scripted LLM was asked more often than scripted (a cached reply was re-requested?)")
        text = self.owner.script.pop(0)
        usage = SimpleNamespace(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        choice = SimpleNamespace(message=SimpleNamespace(content=text), finish_reason="stop")
        return SimpleNamespace(choices=[choice], usage=usage, model="scripted")


class ScriptedLLM(LLMClient):
    """An LLMClient whose endpoint answers from a list of reply texts, in order."""

    def __init__(self, script, cache) -> None:
        super().__init__(base_url="http://127.0.0.1:9/v1", model="scripted", api_key="k", cache=cache,
                         model_identity=SCRIPTED_IDENTITY, max_retries=0)
        self.script = list(script)
        self.requests: list[dict] = []
        self._client = SimpleNamespace(chat=SimpleNamespace(completions=_Completions(self)))


# -- small PDF and Word files (test_loaders.py) -----------------------------------------


def text_pdf(lines: list[str]) -> bytes:
    """A one-page PDF drawing each line with Tj (Helvetica); cross-reference table computed."""
    content = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
    objs = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(content)} >>\nstream\n{content}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{o}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def make_docx(path):
    """A Word file at ``path``: two paragraphs, a 2x2 table (crop, spacing / kale, 45 cm), one more paragraph."""
    import docx

    d = docx.Document()
    d.add_paragraph("Raised beds")
    d.add_paragraph("Fill the beds with compost in March.")
    t = d.add_table(rows=2, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text = "crop", "spacing"
    t.cell(1, 0).text, t.cell(1, 1).text = "kale", "45 cm"
    d.add_paragraph("Water weekly.")
    d.save(path)
