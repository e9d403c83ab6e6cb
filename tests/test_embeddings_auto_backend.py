"""``backend="auto"`` (#61): the faster identical-vector backend on this CPU, measured once per model,
CPU, thread count and library versions, stored, and never a backend whose vectors move.

The suite itself runs on PyTorch (tests/conftest.py sets ``CHUNKWISE_EMBED_BACKEND=torch`` unless
the caller set it); these tests ask for ``"auto"`` explicitly, each in a cache root of its own.
Model loads: about 30 s on 2 cores (one ONNX export of all-MiniLM-L6-v2, two measurements).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from chunkwise.embeddings import autobackend as _autobackend
from chunkwise.embeddings import BACKEND_ENV, SentenceTransformerEmbedder

QUERIES = ["How often are the beds watered in summer?", "What goes into the compost bays?"]


def test_choose_picks_the_faster_only_when_its_vectors_are_the_same():
    backend, reason = _autobackend.choose(10.0, 5.0, 2e-7)
    assert backend == "onnx" and reason == "onnx ran the check set 2.00x as fast as PyTorch with vectors within 2e-07"
    backend, reason = _autobackend.choose(5.0, 10.0, 2e-7)
    assert backend == "torch" and "PyTorch was the fastest on this CPU (onnx ran at 0.50x" in reason
    # four times faster, but its vectors moved: never chosen (nor with a nan difference)
    assert _autobackend.choose(10.0, 2.5, 2e-5) == (
        "torch", "onnx's vectors differ from PyTorch's by 2e-05 (> 1e-05), so it is never chosen")
    assert _autobackend.choose(10.0, 2.5, float("nan"))[0] == "torch"
    assert _autobackend.choose(10.0, None, None) == ("torch", "onnx could not run here, so PyTorch")
    assert _autobackend.choose(10.0, 10.0, 0.0)[0] == "torch"  # a tie keeps the reference


def test_the_check_set_is_fixed_and_chunk_sized():
    texts = _autobackend.check_texts()
    assert texts == _autobackend.check_texts() and len(texts) == _autobackend.CHECK_TEXTS == 96
    lengths = [len(t) for t in texts]
    assert min(lengths) >= 150 and max(lengths) <= 1_320 and len(set(texts)) == 96


def test_a_stored_choice_is_keyed_by_cpu_threads_and_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    key = _autobackend.machine_key("m", 2)
    assert set(key) == {"model", "cpu", "threads", "torch", "onnxruntime", "sentence-transformers", "transformers"}
    assert key["cpu"] == _autobackend.cpu_model() and key["torch"].startswith("2.13.0")
    paths = {_autobackend._choice_path(_autobackend.machine_key(m, t)) for m in ("m", "n") for t in (1, 2)}
    assert len(paths) == 4 and all(p.parent == tmp_path / "backend-choice" for p in paths)


@pytest.fixture(scope="module")
def torch_reference():
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, backend="torch")
    return emb.embed(QUERIES)


def test_auto_measures_once_stores_the_choice_and_reads_it_after(tmp_path, monkeypatch, torch_reference):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False)
    assert emb.backend == "auto" and emb.backend_choice is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        vecs = emb.embed(QUERIES)
    record = emb.backend_choice
    assert record["stored"] is False and emb.backend_in_use == record["backend"] in ("torch", "onnx")
    assert record["max_abs_diff"] < 1e-5 and record["top5_identical"] == 1.0
    assert len(record["rounds_s"]["torch"]) == len(record["rounds_s"]["onnx"]) == 3
    assert record["torch_s"] == min(record["rounds_s"]["torch"]) and record["batch_size"] == 64
    assert record["reason"] == _autobackend.choose(record["torch_s"], record["onnx_s"], record["max_abs_diff"])[1]
    assert np.abs(vecs - torch_reference).max() < 1e-5
    (path,) = (tmp_path / "backend-choice").glob("*.json")
    assert json.loads(path.read_text())["key"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert _autobackend.stored_choices()[0]["backend"] == record["backend"]

    # a second load reads the stored choice: nothing is timed again
    monkeypatch.setattr(_autobackend, "measure", lambda *a, **k: pytest.fail("measured again"))
    again = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, backend="auto")
    np.testing.assert_allclose(again.embed(QUERIES), vecs, atol=1e-6)
    assert again.backend_choice["stored"] is True and again.backend_in_use == record["backend"]


def test_a_faster_backend_whose_vectors_move_is_never_chosen(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    model = SentenceTransformerEmbedder(cache_dir=False, backend="torch").model
    hf = model[0].model
    torch_forward = hf.forward

    def attach(st_model):  # a "candidate" that returns every hidden state shifted by 1e-3
        def forward(**features):
            out = torch_forward(**features)
            out["last_hidden_state"] = out["last_hidden_state"] + 1e-3
            return out

        hf.forward = forward

    record = _autobackend.measure(model, "m", 64, attach, threads=2)
    assert record["backend"] == "torch" and record["max_abs_diff"] > 1e-5
    assert record["reason"].endswith("(> 1e-05), so it is never chosen")
    assert "forward" not in hf.__dict__  # the model is left on PyTorch


def test_a_candidate_that_cannot_run_leaves_pytorch(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    model = SentenceTransformerEmbedder(cache_dir=False, backend="torch").model

    def attach(st_model):
        raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")

    record = _autobackend.measure(model, "m", 64, attach, threads=2)
    assert record["backend"] == "torch" and record["reason"] == "onnx could not run here, so PyTorch"
    assert record["candidate_error"] == "ModuleNotFoundError: No module named 'onnxruntime'"


def test_the_cli_prints_the_stored_choices(tmp_path, monkeypatch, capsys):
    from chunkwise import cli

    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    assert cli.main(["embed-backend"]) == 0
    assert "no stored choice under" in capsys.readouterr().out
    folder = tmp_path / "backend-choice"
    folder.mkdir()
    record = {"key": _autobackend.machine_key("m", 2), "backend": "onnx", "reason": "onnx ran 1.80x",
              "measured_at": "2026-12-07T15:00:00+0000", "check_texts": 96, "batch_size": 64}
    (folder / "x.json").write_text(json.dumps(record))
    (folder / "broken.json").write_text("{")  # unreadable: skipped
    assert cli.main(["embed-backend"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("m: onnx (onnx ran 1.80x); ") and "2 threads" in out and "96 texts, batch 64" in out
    assert cli.main(["embed-backend", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [record]


def test_wordpiece_batches_cut_the_length_sorted_order():
    from chunkwise.embeddings import padding_share, wordpiece_batches

    lengths = [3, 10, 5, 10, 1]
    batches = wordpiece_batches(lengths, 2)
    assert [b.tolist() for b in batches] == [[1, 3], [2, 0], [4]]  # stable: equal lengths keep input order
    # slots: 10x2 + 5x2 + 1x1 = 31, real word pieces 29
    assert padding_share(lengths, batches) == pytest.approx(2 / 31)
    # in input order, two at a time: 10x2 + 10x2 + 1 = 41 slots for the same 29
    assert padding_share(lengths, [np.array([0, 1]), np.array([2, 3]), np.array([4])]) == pytest.approx(12 / 41)
    assert padding_share([], []) == 0.0
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        wordpiece_batches(lengths, 0)


def test_batches_by_word_pieces_give_each_text_its_own_vector_in_input_order(torch_reference):
    # digits and a URL make many word pieces per character; prose few: a character sort misorders them
    texts = ["2026-12-07 14:35:56 0x7f3a9c 41.2% 472/276 " * 6, QUERIES[0], "Compost.",
             "https://example.org/a/b?c=d&e=f " * 5, "The quick brown fox jumps over the lazy dog. " * 30,
             QUERIES[1], "Rain fell.", "Tea is served at noon in the garden house. " * 3, "x", "Yes or no?"]
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, batch_size=3, backend="torch")
    vecs = emb.embed(texts)
    alone = np.vstack([emb.embed([t]) for t in texts])
    assert vecs.shape == (10, 384) and np.abs(vecs - alone).max() < 1e-5
    np.testing.assert_allclose(vecs[[1, 5]], torch_reference, atol=1e-5)
