"""The contract every registered chunker kind and retriever kind keeps (issue 41).

In the manner of scikit-learn's ``parametrize_with_checks``: one table of examples per registry,
and every check run on every kind. A kind registered without a row in the table fails
:func:`test_every_chunker_kind_has_an_example` / :func:`test_every_retriever_kind_has_an_example`,
so a new kind cannot ship without passing the same checks as the built-in ones.

Chunkers (each kind: one representative spec, and a second one where it takes a size), on the
texts of :data:`TEXTS` (a ~3,000-character Markdown document, one sentence, trailing
whitespace, Unicode with CRLF line ends and the inputs of ``shared/docs/bug-cases.md``):

- verbatim: ``chunk.text == doc[start:end]``, non-empty, inside the document;
- ordered: sorted by start; without overlap no two chunks overlap; every non-whitespace
  character is in some chunk;
- deterministic: two splits give the same chunks;
- empty and whitespace-only text: ``[]`` and no model call (B20);
- spec round trip through ``spec_string()`` and through a grid file's table;
- pinned names: ``label``, ``spec_string()``, ``key()`` and the span-cache file that
  :func:`~chunkwise.chunkers.specs.chunk_corpus` writes are literal strings here, because the
  committed caches and tables depend on them: a change to any of them must be deliberate (edit
  the pin in the same commit, and say so);
- the span cache: a second :func:`chunk_corpus` builds no chunker and calls no model.

Retrievers: kinds that rank a grid's chunks (``rank``) give distinct valid positions, as many as
the depth asks (or every item), the same twice; dense's first hit is the argmax cosine
computed here with numpy, BM25's the one chunk sharing a rare word with the question, hybrid's
order is reciprocal rank fusion of the kinds it ``uses`` computed here by hand. Kinds that build
a per-question retriever (``build``) return at most ``top_k`` hits. Every kind's
``needs_embedder`` is what it does: a kind that says False never reads a vector.

No real model: :class:`fakes.CharEmbedder` and :class:`fakes.FakeChatModel` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import chunkwise
from chunkwise.chunkers import specs as S
from chunkwise.chunkers.registry import chunker_kind, chunker_names
from chunkwise.chunkers.specs import chunk_corpus, make_chunker, parse_spec
from chunkwise.evaluation.grid import GridConfig
from chunkwise.retrieval.registry import (
    RankInputs,
    Ranking,
    build_retriever_set,
    rerank_kind,
    retriever_kind,
    retriever_names,
)
from fakes import CharEmbedder, FakeChatModel

# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------

LONG = """# Community Garden Handbook

Welcome to the Riverside Community Garden. This handbook explains how plots are assigned, how
water is shared, and what members agree to do each season. Read it once before your first
workday; keep it nearby when questions come up.

## Plots and membership

Each member household receives one raised bed of about four by eight feet. Beds are assigned in
March, in the order applications arrive. A household that leaves a bed untended for six weeks
receives a reminder, and after two reminders the bed is offered to the waiting list.

Membership costs 40 dollars per year. The fee pays for water, compost, tool repairs and the
insurance the city requires. Members on a low income may ask the treasurer for a reduced fee;
nobody is turned away for lack of money.

- Attend at least three workdays each season.
- Keep paths next to your bed clear of tools and hoses.
- Label your bed with your name and a phone number.
- Report broken tools to the tool steward, Dr. Okafor, within a week.

## Water

The garden draws water from a single city meter, so watering follows a schedule. Odd-numbered
beds water on Monday, Wednesday and Friday; even-numbered beds on Tuesday, Thursday and
Saturday. Sunday is left for the shared herb spiral and the orchard.

Water early, before 9 a.m., or late, after 6 p.m. Midday watering loses up to 3.5 times more
water to evaporation. Use the watering cans for seedlings and the drip lines for established
plants. Never leave a hose running unattended.

### Drought rules

When the city declares a drought, hand watering only is allowed. The drip lines are shut off at
the valve by the water steward. Mulch every bed with at least five centimetres of straw.

## Soil and compost

Our soil is a sandy loam with a pH near 6.5. Most vegetables grow well in it, but blueberries
need the acidified bed by the east fence. Test kits are in the shed for anyone who wants to
check their own bed.

The compost bays are turned every second Saturday. Bay one takes fresh green material; bay two
is resting; bay three is ready to use. Please do not add meat, dairy, diseased plants or weeds
that have gone to seed.

1. Chop large stems into short pieces.
2. Add a layer of brown material for every layer of green.
3. Water the pile if it feels dry.
4. Tell the compost steward when bay one is full.

## Pests and neighbours

Slugs are the main pest in spring. Beer traps and copper tape both work; slug pellets are not
allowed because they harm the hedgehogs that live under the orchard. Aphids are usually eaten by
ladybirds within two weeks, so wait before spraying anything.

The garden shares a fence with the primary school. Children visit on Thursday afternoons to look
after the pumpkin patch. Be kind, answer their questions, and keep sharp tools out of reach.

## Contact

Questions go to the coordinator, Ms. Lindqvist, at the monthly meeting or by the noticeboard.
Urgent problems such as a burst pipe go to the water steward at any hour.
"""

TEXTS: dict[str, str] = {
    "long_markdown": LONG,
    "one_sentence": "Tea is served at noon.",  # B01
    "trailing_whitespace": "Sky is blue. Grass is green.\n",  # B04
    "trailing_blank_lines": "The gate opens at dawn. It closes at dusk.  \n\n \t",
    "unicode_crlf": (
        "Café crème — a naïve façade.\r\nThe 猫 sat by the 鱼 pond; 🚀 launched at 3.5 km/s.\r\n\r\n"
        "## Ünïcödé heading\r\n- item één\r\n- item två  \r\n\r\n上海今天晴转多云。明天有雨。\r\n"
    ),
    "b03_two_sentences": "Rain fell. Sun rose.",
    "b05_abbreviations": "Dr. Lee arrived at 9 a.m. today. The dose was 3.5 mg.",
    "b07_four_sentences": "Ann ate an apple. Ben ate a bean. Cal ate a carrot. Dan ate a date.",
    "b09_short_sentences": "Hi. Ok. The committee approved the new budget after a long debate.",
    "b10_giant_sentence": " ".join(f"word{i} is here" for i in range(100)),
    "b14_words": "alpha beta gamma delta epsilon zeta eta theta",
    "b15_cjk": "猫狗鱼",
    "b15_emoji": "🚀",
    "b16_verbatim": "Line one.\n\nLine two. Dr. Kim left;; see ../notes",
    "b17_separator": "Red fox. Blue jay. Green frog.",
    "b18_punctuation": "Kites fly. Boats sail. Trains run.",
    "b19_unsplittable": "go extraordinarily\nfar",
}

#: B20: every chunker returns [] for these, without a model call.
EMPTY_TEXTS = {"empty": "", "whitespace_only": "   \n\t"}

DOC_NAME = "handbook.md"
#: The package version the pinned span-cache file names are computed at (the version is part of
#: the key, see test_the_package_version_is_part_of_the_span_cache_key).
PINNED_VERSION = "0.1.0"


def embedder() -> CharEmbedder:
    """One alphabet for every text, so no window of a test text embeds to the zero vector."""
    return CharEmbedder([*TEXTS.values(), *RETRIEVAL_TEXTS, *QUESTIONS])


def _llm_reply(call):
    """LLM chunker: a split after every third piece shown; Contextual: a fixed context."""
    if call.method == "chat_json":
        lo, hi = map(int, re.search(r"PIECES (\d+) to (\d+)", call.prompt).groups())
        return {"split_after": [n for n in range(lo, hi + 1) if n % 3 == 0]}
    return "This passage is part of the test document."


def llm() -> FakeChatModel:
    return FakeChatModel(_llm_reply)


# --------------------------------------------------------------------------------------------
# the chunker table: one row per registered kind
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """One spec of a kind, and its names as they must stay.

    ``span_file``: the one file :func:`chunk_corpus` writes for ``DOC_NAME`` / ``LONG`` at
    :data:`PINNED_VERSION` (None: the kind keeps no span cache).
    """

    spec: str
    label: str
    spec_string: str
    key: str
    span_file: str | None


@dataclass(frozen=True)
class ChunkerExample:
    """A kind's row: its specs, and what of the contract it documents otherwise.

    ``covers``: every non-whitespace character of the text is inside some chunk.
    """

    pins: tuple[Pin, ...]
    covers: bool = True


CHUNKER_EXAMPLES: dict[str, ChunkerExample] = {
    "TokenText": ChunkerExample((
        Pin("TokenText:100", "TokenText 100", "TokenText:100",
            "TokenText|100|0",
            "handbook.md-TokenText-100-0-b08ba042efeb5941c62b2b36.json"),
        Pin("TokenText:4:1", "TokenText 4 overlap 1", "TokenText:4:1",
            "TokenText|4|1",
            "handbook.md-TokenText-4-1-b2864e73527530915e676645.json"),
    )),
    "Recursive": ChunkerExample((
        Pin("Recursive:100", "Recursive 100", "Recursive:100",
            "Recursive|100|0",
            "handbook.md-Recursive-100-0-fb0ed744849814473f9d4109.json"),
        Pin("Recursive:6:2", "Recursive 6 overlap 2", "Recursive:6:2",
            "Recursive|6|2",
            "handbook.md-Recursive-6-2-9ad9b2dc259a9cf3ba1507fd.json"),
    )),
    "Kamradt": ChunkerExample((
        Pin("Kamradt", "Kamradt", "Kamradt",
            "Kamradt|None|0",
            "handbook.md-Kamradt-None-0-13882f49c2bf231aac0c6eda.json"),
    )),
    "KamradtMod": ChunkerExample((
        Pin("KamradtMod:50", "KamradtMod 50", "KamradtMod:50",
            "KamradtMod|50|0",
            "handbook.md-KamradtMod-50-0-923aa21524abca1a77109e33.json"),
        Pin("KamradtMod:100", "KamradtMod 100", "KamradtMod:100",
            "KamradtMod|100|0",
            "handbook.md-KamradtMod-100-0-c902c47e0e4b6ae78e8fdab9.json"),
    )),
    "Cluster": ChunkerExample((
        Pin("Cluster:50", "Cluster 50", "Cluster:50",
            "Cluster|50|0",
            "handbook.md-Cluster-50-0-72a2efd5668a6d5e96306219.json"),
        Pin("Cluster:100", "Cluster 100", "Cluster:100",
            "Cluster|100|0",
            "handbook.md-Cluster-100-0-1d7fe1a22d18383bb4d69b37.json"),
    )),
    "LLM": ChunkerExample((
        Pin("LLM", "LLM", "LLM",
            "LLM|None|0",
            None),
    )),
    "Sentence": ChunkerExample((
        Pin("Sentence:50", "Sentence 50", "Sentence:50",
            "Sentence|50|0",
            "handbook.md-Sentence-50-0-dbd7679830ab544394002200.json"),
        Pin("Sentence:5", "Sentence 5", "Sentence:5",
            "Sentence|5|0",
            "handbook.md-Sentence-5-0-8f98305c68feb2fa71ea9dca.json"),
    )),
    "Structure": ChunkerExample((
        Pin("Structure:100", "Structure 100", "Structure:100",
            "Structure|100|0",
            "handbook.md-Structure-100-0-117b132afddc7d69d36bb85e.json"),
        Pin("Structure:5", "Structure 5", "Structure:5",
            "Structure|5|0",
            "handbook.md-Structure-5-0-2626f8c3887ef69251672992.json"),
    )),
    "Hierarchical": ChunkerExample((
        Pin("Hierarchical:20:100:0.5", "Hierarchical 20/100 merge 0.5", "Hierarchical:20:100:0.5",
            "Hierarchical|20|0|100|0.5",
            "handbook.md-Hierarchical-20-100-e5adb47bf07d18e82f66b8ba.json"),
        Pin("Hierarchical:4:12:2", "Hierarchical 4/12 merge 2", "Hierarchical:4:12:2",
            "Hierarchical|4|0|12|2",
            "handbook.md-Hierarchical-4-12-4ef61d9b2cc4052448d3224e.json"),
    )),
    "Contextual": ChunkerExample((
        Pin("Contextual:50", "Contextual 50", "Contextual:50",
            "Contextual|50|0",
            "handbook.md-Recursive-50-0-e2e294fd84b67fcaa38a9b8a.json"),
        Pin("Contextual:5", "Contextual 5", "Contextual:5",
            "Contextual|5|0",
            "handbook.md-Recursive-5-0-b00365b2976bab22060d4ea0.json"),
    )),
    "Late": ChunkerExample((
        Pin("Late:50", "Late 50", "Late:50",
            "Late|50|0",
            "handbook.md-Recursive-50-0-e2e294fd84b67fcaa38a9b8a.json"),
        Pin("Late:5", "Late 5", "Late:5",
            "Late|5|0",
            "handbook.md-Recursive-5-0-b00365b2976bab22060d4ea0.json"),
    )),
    "KamradtSplit": ChunkerExample((
        Pin("KamradtSplit:50", "KamradtSplit 50", "KamradtSplit:50",
            "KamradtSplit|50|0",
            "handbook.md-KamradtSplit-50-0-e9b27447d26458d63ceca53f.json"),
        Pin("KamradtSplit:8", "KamradtSplit 8", "KamradtSplit:8",
            "KamradtSplit|8|0",
            "handbook.md-KamradtSplit-8-0-203bb05772d8ec3c9fda4b1c.json"),
    )),
    "Semantic": ChunkerExample((
        Pin("Semantic:percentile:80:0:150", "Semantic percentile 80 buffer 0 min 150", "Semantic:percentile:80:0:150",
            'Semantic|None|0|{"breakpoint_threshold_amount": 80.0, "breakpoint_threshold_type": "percentile", '
            '"buffer_size": 0, "min_chunk_size": 150}',
            "handbook.md-Semantic-None-0-percentile-80-0-150-952f0cac0e5c6dcd3dfd2c45.json"),
        Pin("Semantic:gradient:50:1", "Semantic gradient 50 buffer 1", "Semantic:gradient:50:1",
            'Semantic|None|0|{"breakpoint_threshold_amount": 50.0, "breakpoint_threshold_type": "gradient", '
            '"buffer_size": 1, "min_chunk_size": null}',
            "handbook.md-Semantic-None-0-gradient-50-1-c198550d56a2f75446aa4eb1.json"),
    )),
}


def _specs() -> list[tuple[str, Pin]]:
    # every registered kind: one without a row here gets an empty list, and fails the table test
    return [(name, pin) for name in chunker_names() if name in CHUNKER_EXAMPLES for pin in CHUNKER_EXAMPLES[name].pins]


SPECS = _specs()
SPEC_IDS = [pin.spec for _, pin in SPECS]


def test_every_chunker_kind_has_an_example():
    """A kind registered without a row in CHUNKER_EXAMPLES fails here (plugins found by import
    path are users' chunkers, checked by tests/test_byo_chunker.py)."""
    registered = {n for n in chunker_names() if not chunker_kind(n).plugin}
    assert set(CHUNKER_EXAMPLES) == registered
    for name, example in CHUNKER_EXAMPLES.items():
        specs = [parse_spec(p.spec) for p in example.pins]
        assert all(s.chunker == name for s in specs)
        kind = chunker_kind(name)
        # a second spec wherever the kind takes a size (and one with overlap where it takes one)
        assert len(specs) == (2 if kind.size == "required" or kind.parse is not None else 1), name
        if kind.overlap:
            assert any(s.overlap for s in specs), name


# --------------------------------------------------------------------------------------------
# per-text checks
# --------------------------------------------------------------------------------------------

_SPLITS: dict[tuple[str, str], list] = {}


def _split(spec_text: str, text_name: str) -> list:
    """The chunks of one spec on one text (first split of the module, memoised)."""
    key = (spec_text, text_name)
    if key not in _SPLITS:
        _SPLITS[key] = make_chunker(parse_spec(spec_text), embedder(), llm()).split(TEXTS[text_name])
    return _SPLITS[key]


def check_verbatim(name: str, pin: Pin, text_name: str) -> None:
    doc = TEXTS[text_name]
    chunks = _split(pin.spec, text_name)
    assert chunks, f"{pin.spec} returned no chunk for a text with words"
    for c in chunks:
        assert 0 <= c.start < c.end <= len(doc), (c.start, c.end, len(doc))
        assert c.text == doc[c.start : c.end]


def check_ordered(name: str, pin: Pin, text_name: str) -> None:
    chunks = _split(pin.spec, text_name)
    starts = [c.start for c in chunks]
    assert starts == sorted(starts)
    if not parse_spec(pin.spec).overlap:
        for a, b in zip(chunks, chunks[1:]):
            assert a.end <= b.start, f"{pin.spec} chunks {a.span} and {b.span} overlap"


def check_covers(name: str, pin: Pin, text_name: str) -> None:
    if not CHUNKER_EXAMPLES[name].covers:
        pytest.skip(f"{name} documents that it does not cover every character")
    doc = TEXTS[text_name]
    covered = np.zeros(len(doc), dtype=bool)
    for c in _split(pin.spec, text_name):
        covered[c.start : c.end] = True
    missed = [i for i, ch in enumerate(doc) if not ch.isspace() and not covered[i]]
    assert not missed, f"{pin.spec} leaves out {[doc[i] for i in missed[:20]]} at {missed[:20]}"


def check_deterministic(name: str, pin: Pin, text_name: str) -> None:
    spec, doc = parse_spec(pin.spec), TEXTS[text_name]
    runs = [make_chunker(spec, embedder(), llm()).split(doc) for _ in range(2)]
    assert [(c.text, c.start, c.end) for c in runs[0]] == [(c.text, c.start, c.end) for c in runs[1]]


CHECKS = [check_verbatim, check_ordered, check_covers, check_deterministic]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("text_name", list(TEXTS))
@pytest.mark.parametrize(("name", "pin"), SPECS, ids=SPEC_IDS)
def test_chunker_contract(name, pin, text_name, check):
    check(name, pin, text_name)


PARENT_SPECS = [(name, pin) for name, pin in SPECS if chunker_kind(name).index == "parents"]


@pytest.mark.parametrize(("name", "pin"), PARENT_SPECS, ids=[pin.spec for _, pin in PARENT_SPECS])
def test_hierarchy_parents_are_verbatim_and_hold_their_children(name, pin):
    """Kinds indexed as small-to-big also return parents: the same contract, children inside."""
    spec = parse_spec(pin.spec)
    for text_name, doc in TEXTS.items():
        parents, children = make_chunker(spec, None).split_hierarchy(doc)
        for p in parents:
            assert 0 <= p.start < p.end <= len(doc) and p.text == doc[p.start : p.end], text_name
        assert all(a.end <= b.start for a, b in zip(parents, parents[1:])), text_name
        for c in children:
            p = parents[c.metadata["parent_id"]]
            assert p.start <= c.start < c.end <= p.end, text_name


@pytest.mark.parametrize("text_name", list(EMPTY_TEXTS))
@pytest.mark.parametrize(("name", "pin"), SPECS, ids=SPEC_IDS)
def test_empty_text_gives_no_chunk_and_no_model_call(name, pin, text_name):
    emb, fake = embedder(), llm()
    assert make_chunker(parse_spec(pin.spec), emb, fake).split(EMPTY_TEXTS[text_name]) == []
    assert emb.calls == 0 and fake.calls == []


# --------------------------------------------------------------------------------------------
# spec round trips and pinned names
# --------------------------------------------------------------------------------------------


def _table(spec) -> dict:
    """The spec as a grid file's table ``{chunker = ..., <table_fields> ...}``."""
    options = dict(spec.options)
    table = {"chunker": spec.chunker}
    for field in spec.kind.table_fields:
        value = getattr(spec, field) if hasattr(spec, field) else options.get(field)
        if value is not None and not (field == "overlap" and not value):
            table[field] = value
    return table


@pytest.mark.parametrize(("name", "pin"), SPECS, ids=SPEC_IDS)
def test_spec_round_trips(name, pin):
    spec = parse_spec(pin.spec)
    again = parse_spec(spec.spec_string())
    assert again == spec and again.key() == spec.key() and again.label == spec.label
    # a grid file's table builds the same spec
    from_table = GridConfig(chunkers=[_table(spec)]).chunkers[0]
    assert from_table == spec and from_table.key() == spec.key()


@pytest.mark.parametrize(("name", "pin"), SPECS, ids=SPEC_IDS)
def test_labels_and_cache_keys_are_pinned(name, pin, tmp_path, monkeypatch):
    """Committed caches and tables are keyed by these strings: changing one must be deliberate."""
    spec = parse_spec(pin.spec)
    assert (spec.label, spec.spec_string(), spec.key()) == (pin.label, pin.spec_string, pin.key)
    monkeypatch.setattr(chunkwise, "__version__", PINNED_VERSION)
    chunk_corpus(spec, DOC_NAME, LONG, embedder(), llm(), cache_dir=tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ([pin.span_file] if pin.span_file else [])


def test_the_package_version_is_part_of_the_span_cache_key(tmp_path, monkeypatch):
    """A fixed chunker never serves spans cached by an older package version."""
    names = []
    for version in (PINNED_VERSION, "99.0.0"):
        monkeypatch.setattr(chunkwise, "__version__", version)
        chunk_corpus(parse_spec("Recursive:50"), DOC_NAME, LONG, None, cache_dir=tmp_path / version)
        names += [p.name for p in (tmp_path / version).iterdir()]
    assert len(names) == 2 and names[0] != names[1]


@pytest.mark.parametrize(("name", "pin"), SPECS, ids=SPEC_IDS)
def test_chunk_corpus_serves_the_second_call_from_its_span_cache(name, pin, tmp_path, monkeypatch):
    spec = parse_spec(pin.spec)
    emb, fake = embedder(), llm()
    first = chunk_corpus(spec, DOC_NAME, LONG, emb, fake, cache_dir=tmp_path)
    assert first == make_chunker(spec, embedder(), llm()).split(LONG)  # the cache changes nothing
    emb_calls, llm_calls = emb.calls, len(fake.calls)
    boundary_kind = spec.boundary_spec.kind
    if spec.kind.index != "parents" and not boundary_kind.span_cache:
        # no span cache (the LLM chunker): every run replays its requests, from the LLM's own cache
        second = chunk_corpus(spec, DOC_NAME, LONG, emb, fake, cache_dir=tmp_path)
        assert second == first and len(fake.calls) == 2 * llm_calls and not any(tmp_path.iterdir())
        return

    def no_chunker(*args, **kwargs):
        raise AssertionError("chunk_corpus built a chunker although the spans are cached")

    monkeypatch.setattr(S, "make_chunker", no_chunker)
    second = chunk_corpus(spec, DOC_NAME, LONG, emb, fake, cache_dir=tmp_path)
    assert [(c.text, c.start, c.end) for c in second] == [(c.text, c.start, c.end) for c in first]
    assert emb.calls == emb_calls
    if spec.kind.llm_cost == "per_chunk":
        # Contextual: the spans come from the cache; each chunk's context is asked again (one
        # request per chunk, answered by the LLM client's response cache, as chunk_corpus says)
        assert len(fake.calls) == 2 * llm_calls == 2 * len(first)
        assert [c.metadata["index_text"] for c in second] == [c.metadata["index_text"] for c in first]
    else:
        assert len(fake.calls) == llm_calls


# --------------------------------------------------------------------------------------------
# retrievers
# --------------------------------------------------------------------------------------------

RARE = ["xylophone", "quokka", "zeppelin", "marzipan", "fjord"]
_THINGS = [
    "tomatoes", "beans", "lettuce", "carrots", "onions", "garlic", "peppers", "squash", "kale", "leeks",
    "radishes", "beets", "peas", "spinach", "chard", "corn", "melons", "potatoes", "basil", "mint",
    "thyme", "sage", "dill", "chives", "parsley",
]
#: 30 chunk texts; chunk 3*i + 1 is the only one holding RARE[i] (i < 5).
RETRIEVAL_TEXTS = [
    f"Garden note {i}: the {_THINGS[i % len(_THINGS)]} bed by the {['north', 'south', 'east', 'west'][i % 4]} "
    f"fence needs water on day {i % 7}."
    for i in range(30)
]
for _i, _word in enumerate(RARE):
    RETRIEVAL_TEXTS[3 * _i + 1] = RETRIEVAL_TEXTS[3 * _i + 1].replace("needs water", f"keeps the {_word}")
QUESTIONS = [f"Which garden note keeps the {w}?" for w in RARE]
RARE_CHUNK = [3 * i + 1 for i in range(len(RARE))]


@dataclass(frozen=True)
class RetrieverExample:
    """A kind's row: whether it ranks a grid's chunks, builds a per-question retriever, reads
    vectors (itself or through the kinds it fuses), and how it combines the rankings it uses
    (``"rrf"``: reciprocal rank fusion; ``"rerank"``: a reranker's scores over its candidates)."""

    ranks: bool
    builds: bool
    reads_vectors: bool
    combines: str = ""


RETRIEVER_EXAMPLES: dict[str, RetrieverExample] = {
    "dense": RetrieverExample(ranks=True, builds=True, reads_vectors=True),
    "bm25": RetrieverExample(ranks=True, builds=True, reads_vectors=False),
    "hybrid": RetrieverExample(ranks=True, builds=True, reads_vectors=True, combines="rrf"),
    "rerank": RetrieverExample(ranks=True, builds=False, reads_vectors=True, combines="rerank"),
    "none": RetrieverExample(ranks=False, builds=True, reads_vectors=False),
    "hybrid_rerank": RetrieverExample(ranks=False, builds=True, reads_vectors=True),
}

class OverlapReranker:
    """Scores a passage by the words it shares with the question."""

    name = "word-overlap"

    def __init__(self):
        self.calls = 0

    def score(self, question, texts):
        self.calls += 1
        words = set(re.findall(r"\w+", question.lower()))
        return [float(len(words & set(re.findall(r"\w+", t.lower())))) for t in texts]


#: Kinds that need a model this machine may lack rank here with a stand-in of the same kind: the
#: registered ``rerank`` loads a cross-encoder from a hub; its mechanics are checked with word overlap.
CONTRACT_KINDS = {"rerank": rerank_kind(OverlapReranker(), cache=None)}


def _kind(name: str):
    return CONTRACT_KINDS.get(name) or retriever_kind(name)


RANKERS = [n for n in retriever_names() if retriever_kind(n).rank is not None]
BUILDERS = [n for n in retriever_names() if retriever_kind(n).build is not None]
DEPTHS = [7, 50]  # fewer positions than items, and more


def test_every_retriever_kind_has_an_example():
    assert set(RETRIEVER_EXAMPLES) == set(retriever_names())
    for name, example in RETRIEVER_EXAMPLES.items():
        kind = retriever_kind(name)
        assert (kind.rank is not None, kind.build is not None) == (example.ranks, example.builds), name


def _closure(name: str) -> list[str]:
    """The kind and every kind it fuses, each after those it uses."""
    out: list[str] = []
    for used in retriever_kind(name).uses:
        out += [u for u in _closure(used) if u not in out]
    return [*out, name]


def _rank_all(name: str, depth: int, cache: Path, vectors=None) -> dict[str, Ranking]:
    """Rank with ``name`` and every kind it fuses, as the grid does; ``vectors`` replaces the
    chunk-vector callable (and query vectors are then None)."""
    emb = embedder()
    chunk_vectors = emb.embed(RETRIEVAL_TEXTS)
    config = GridConfig(chunkers=["Recursive:100"], retrievers=list(RANKERS), hybrid_depth=depth)
    inputs = RankInputs(
        list(RETRIEVAL_TEXTS), list(QUESTIONS), depth, config,
        vectors if vectors is not None else (lambda: chunk_vectors),
        None if vectors is not None else emb.embed(QUESTIONS), 0.0, cache,
    )
    ranked: dict[str, Ranking] = {}
    for n in _closure(name):
        kind = _kind(n)
        ranked[n] = kind.rank(inputs, {u: ranked[u] for u in kind.uses})
    return ranked


@pytest.mark.parametrize(("name", "depth"), [(n, d) for n in RANKERS for d in DEPTHS])
def test_rankings_are_distinct_valid_positions_at_the_depth_asked(name, depth, tmp_path):
    ranking = _rank_all(name, depth, tmp_path)[name]
    assert len(ranking.ranked) == len(QUESTIONS)
    for row in ranking.ranked:
        assert all(isinstance(i, int) and 0 <= i < len(RETRIEVAL_TEXTS) for i in row)
        assert len(set(row)) == len(row)
        assert len(row) == min(depth, len(RETRIEVAL_TEXTS))


@pytest.mark.parametrize("name", RANKERS)
def test_rankings_are_deterministic(name, tmp_path):
    first = _rank_all(name, 10, tmp_path / "a")[name].ranked
    assert _rank_all(name, 10, tmp_path / "b")[name].ranked == first
    assert _rank_all(name, 10, tmp_path / "a")[name].ranked == first  # from the saved BM25 index


def test_dense_first_hit_is_the_argmax_cosine(tmp_path):
    emb = embedder()
    v = emb.embed(RETRIEVAL_TEXTS).astype(np.float64)
    q = emb.embed(QUESTIONS).astype(np.float64)
    cos = (q @ v.T) / np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(v, axis=1))
    top2 = np.sort(cos, axis=1)[:, -2:]
    assert np.all(top2[:, 1] - top2[:, 0] > 1e-6)  # no tie at the top: the argmax is the answer
    ranked = _rank_all("dense", 5, tmp_path)["dense"].ranked
    assert [r[0] for r in ranked] == [int(i) for i in np.argmax(cos, axis=1)]


def test_bm25_first_hit_is_the_chunk_sharing_a_rare_word(tmp_path):
    for word, i in zip(RARE, RARE_CHUNK):
        assert [j for j, t in enumerate(RETRIEVAL_TEXTS) if word in t] == [i]
    ranked = _rank_all("bm25", 5, tmp_path)["bm25"].ranked
    assert [r[0] for r in ranked] == RARE_CHUNK


@pytest.mark.parametrize("name", [n for n in RANKERS if RETRIEVER_EXAMPLES[n].combines == "rerank"])
def test_a_reranking_kind_orders_its_candidates_by_the_rerankers_score(name, tmp_path):
    ranked = _rank_all(name, 10, tmp_path)
    (base,) = retriever_kind(name).uses
    scorer = OverlapReranker()
    for qi, row in enumerate(ranked[name].ranked):
        assert sorted(row) == sorted(ranked[base].ranked[qi])  # the same candidates, reordered
        scores = scorer.score(QUESTIONS[qi], [RETRIEVAL_TEXTS[i] for i in row])
        assert scores == sorted(scores, reverse=True)
        for a, b in zip(row, row[1:]):  # ties keep the base ranking's order
            if scorer.score(QUESTIONS[qi], [RETRIEVAL_TEXTS[a]]) == scorer.score(QUESTIONS[qi], [RETRIEVAL_TEXTS[b]]):
                assert ranked[base].ranked[qi].index(a) < ranked[base].ranked[qi].index(b)


@pytest.mark.parametrize("name", [n for n in RANKERS if RETRIEVER_EXAMPLES[n].combines == "rrf"])
def test_a_fusing_kind_ranks_by_reciprocal_rank_fusion_of_its_uses(name, tmp_path):
    depth = 10
    ranked = _rank_all(name, depth, tmp_path)
    c = GridConfig(chunkers=["Recursive:100"]).rrf_c
    uses = retriever_kind(name).uses
    for qi, row in enumerate(ranked[name].ranked):
        score: dict[int, float] = {}
        for u in uses:  # equal weights, ranks from 1 (Cormack et al. 2009)
            for r, item in enumerate(ranked[u].ranked[qi], start=1):
                score[item] = score.get(item, 0.0) + (1 / len(uses)) / (c + r)
        assert set(row) <= set(score)
        got = [score[i] for i in row]
        assert got == sorted(got, reverse=True)  # in fused order
        left_out = [s for i, s in score.items() if i not in row]
        assert not left_out or max(left_out) <= got[-1]  # the best fused items


@pytest.mark.parametrize("name", RANKERS)
def test_needs_embedder_says_whether_ranking_reads_vectors(name, tmp_path):
    kind = retriever_kind(name)
    reads = []
    chunk_vectors = embedder().embed(RETRIEVAL_TEXTS)

    def vectors():
        reads.append(1)
        return chunk_vectors

    if not kind.needs_embedder:
        def refuse():
            raise AssertionError(f"{name} says needs_embedder=False but read the chunk vectors")

        _rank_all(name, 5, tmp_path, vectors=refuse)  # and its query vectors are None
    else:
        emb = embedder()
        config = GridConfig(chunkers=["Recursive:100"], retrievers=list(RANKERS))
        inputs = RankInputs(list(RETRIEVAL_TEXTS), list(QUESTIONS), 5, config, vectors, emb.embed(QUESTIONS),
                            0.0, tmp_path)
        done: dict[str, Ranking] = {}
        for n in _closure(name):
            k = _kind(n)
            done[n] = k.rank(inputs, {u: done[u] for u in k.uses})
        assert reads, f"{name} says needs_embedder=True but neither it nor the kinds it fuses read a vector"
    assert kind.needs_embedder == RETRIEVER_EXAMPLES[name].reads_vectors
    # a fusing kind reads vectors when a kind it fuses does
    if kind.uses:
        assert kind.needs_embedder == any(retriever_kind(u).needs_embedder for u in _closure(name))


@pytest.mark.parametrize("top_k", [0, 3, 100])
@pytest.mark.parametrize("name", BUILDERS)
def test_a_built_retriever_returns_at_most_top_k_hits(name, top_k, tmp_path):
    emb = CharEmbedder([*RETRIEVAL_TEXTS, *QUESTIONS], name="char-counting")  # counts its calls
    chunks = [(f"c{i}", t) for i, t in enumerate(RETRIEVAL_TEXTS)]
    built = build_retriever_set(chunks, [name], language="en", tokenizer="stem", dense=(emb, emb),
                                reranker=OverlapReranker(), bm25_cache_dir=tmp_path)
    retriever = built[name]
    ids = {cid for cid, _ in chunks}
    for question in QUESTIONS:
        hits = retriever.retrieve(question, top_k)
        assert len(hits) <= min(top_k, len(chunks))
        assert len({h[0] for h in hits}) == len(hits) and {h[0] for h in hits} <= ids
    # needs_embedder: building or querying it embeds exactly when the kind says it reads vectors
    assert (emb.calls > 0) == retriever_kind(name).needs_embedder == RETRIEVER_EXAMPLES[name].reads_vectors


def test_a_kind_that_needs_no_embedder_builds_without_one(tmp_path):
    class NoEmbedding:
        name = "no-embedding"

        def embed(self, texts):
            raise AssertionError("embedded although the retriever needs no embedder")

    chunks = [(f"c{i}", t) for i, t in enumerate(RETRIEVAL_TEXTS)]
    for name in BUILDERS:
        if retriever_kind(name).needs_embedder:
            continue
        built = build_retriever_set(chunks, [name], language="en", tokenizer="stem",
                                    dense=(NoEmbedding(), NoEmbedding()), bm25_cache_dir=tmp_path)
        for q in QUESTIONS:
            built[name].retrieve(q, 3)
