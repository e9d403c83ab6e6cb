"""Issue 59: hostile inputs, second round (bugs 1-3 and the 'poor' messages). Each hostile input
is built here, in ``tmp_path``; the Ray engine's tests start Ray in a subprocess, drained and
stopped on every path (tests/procs.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chunkwise.cli import main
from chunkwise.evaluation.grid import GridConfig, run_grid
from fakes import WindowedConstantEmbedder

HERE = Path(__file__).parent
ROOT = HERE.parent
GARDEN = ROOT / "data" / "examples" / "garden"


def small_set(tmp_path, grid: str = 'chunkers = ["Sentence:12"]\nretrievers = ["bm25"]\ntop_k = [1]\n',
              questions: str | None = None):
    """A one-document corpus, two questions and a grid file."""
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.jsonl"
    q.write_text(questions or ('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants.", '
                               '"reference_answer": "45 cm"}\n'
                               '{"question": "Where do beans climb?", "excerpt": "Beans climb the north fence.", '
                               '"reference_answer": "the north fence"}\n'))
    cfg = tmp_path / "grid.toml"
    cfg.write_text(grid)
    return docs, q, cfg


def evaluate_args(docs, q, cfg, out) -> list[str]:
    return ["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg), "--no-progress",
            "--out", str(out)]


# --------------------------------------------------------------------------------------
# poor: --answers whose requests all fail exits 0
# --------------------------------------------------------------------------------------


def test_answers_that_all_fail_exit_1_and_a_partial_failure_prints_the_count(tmp_path, monkeypatch, capsys):
    from chunkwise.llm.fake_server import FAIL_MARKER, FakeChatServer

    def judge_ok(body):
        return json.dumps({"correct": True, "grounded": True}) if "[judge-v1]" in body["messages"][0]["content"] else "45 cm"

    both = (f'{{"question": "Kale spacing? {FAIL_MARKER}", "excerpt": "Kale wants 45 cm between plants."}}\n'
            f'{{"question": "Where do beans climb? {FAIL_MARKER}", "excerpt": "Beans climb the north fence."}}\n')
    one = ('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."}\n'
           f'{{"question": "Where do beans climb? {FAIL_MARKER}", "excerpt": "Beans climb the north fence."}}\n')
    with FakeChatServer(latency_s=0.0, reply=judge_ok) as server:
        monkeypatch.setenv("CHUNKWISE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "fake-model")
        docs, q, cfg = small_set(tmp_path, questions=both)
        extra = ["--answers", "--llm-cache", str(tmp_path / "llm.sqlite")]
        assert main(evaluate_args(docs, q, cfg, tmp_path / "r1") + extra) == 1
        err = capsys.readouterr().err
        assert "error: all 2 answer requests failed (first: generation failed:" in err
        assert "Check the LLM" in err and str(tmp_path / "r1" / "answers.csv") in err
        assert (tmp_path / "r1" / "answers.csv").is_file()  # the retrieval report and the errors are kept
        q.write_text(one)
        assert main(evaluate_args(docs, q, cfg, tmp_path / "r2") + extra) == 0
        err = capsys.readouterr().err
        assert "1 of 2 answer requests failed (1 without an answer; first: generation failed:" in err
    per_q = pd.read_csv(tmp_path / "r2" / "answers.csv")
    assert per_q["answer"].notna().sum() == 1 and per_q["error"].notna().sum() == 1


# --------------------------------------------------------------------------------------
# poor: a plugin's own TypeError blamed on the kwargs table
# --------------------------------------------------------------------------------------


def test_a_plugins_own_type_error_is_not_blamed_on_the_kwargs(tmp_path, monkeypatch):
    (tmp_path / "tmp_typeerr.py").write_text(
        "class Picky:\n"
        "    def __init__(self, size=3):\n"
        "        self.size = len(size)  # a bug of its own: len() of an int\n"
        "    def split(self, text):\n"
        "        return [text]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    docs = {"a.txt": "one two three"}
    questions = pd.DataFrame({"question_id": ["Q1"], "question": ["two"], "corpus_id": ["a.txt"],
                              "references": [[{"content": "two", "start_index": 4, "end_index": 7}]]})
    cfg = GridConfig.from_dict({"chunkers": [{"chunker": "tmp_typeerr:Picky", "kwargs": {"size": 4}}],
                                "retrievers": ["bm25"], "top_k": [1]})
    with pytest.raises(ValueError) as info:
        run_grid(docs, questions, cfg, cache_dir=tmp_path / "c", show_progress=False)
    msg = str(info.value)
    assert "its constructor raised TypeError: object of type 'int' has no len()" in msg
    assert "kwargs table" not in msg
    # a misspelled keyword is still the kwargs table's
    bad = GridConfig.from_dict({"chunkers": [{"chunker": "tmp_typeerr:Picky", "kwargs": {"sise": 4}}],
                                "retrievers": ["bm25"], "top_k": [1]})
    with pytest.raises(ValueError, match=r"building it with kwargs \{'sise': 4\} failed .*check the kwargs table"):
        run_grid(docs, questions, bad, cache_dir=tmp_path / "c", show_progress=False)


def test_a_plugin_whose_chunks_all_have_an_empty_index_text_is_named(tmp_path, monkeypatch):
    (tmp_path / "tmp_blank.py").write_text(
        "def blank(text):\n"
        "    return [(0, len(text), '')]\n"
        "def half_blank(text):\n"
        "    return [(0, 3, ''), (4, len(text), text[4:])]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    docs = {"a.txt": "one two three"}
    questions = pd.DataFrame({"question_id": ["Q1"], "question": ["two"], "corpus_id": ["a.txt"],
                              "references": [[{"content": "two", "start_index": 4, "end_index": 7}]]})
    cfg = GridConfig.from_dict({"chunkers": ["tmp_blank:blank"], "retrievers": ["bm25"], "top_k": [1]})
    with pytest.raises(ValueError, match=r"^chunker 'tmp_blank:blank': all 1 of its chunks carry an empty index_text, "
                                         r"so there is nothing to embed or index; return the text to index"):
        run_grid(docs, questions, cfg, cache_dir=tmp_path / "c", show_progress=False)
    # one empty index text among others is the plugin's choice: the grid runs, the other chunk is found
    ok = GridConfig.from_dict({"chunkers": ["tmp_blank:half_blank"], "retrievers": ["bm25"], "top_k": [1]})
    res = run_grid(docs, questions, ok, cache_dir=tmp_path / "c", show_progress=False)
    assert res.table.iloc[0]["recall"] == pytest.approx(1.0)


# --------------------------------------------------------------------------------------
# poor: check and explicit question ids; a metric-mode change; options checked first
# --------------------------------------------------------------------------------------

CELL = "Sentence 12 | bm25 | k=1"


def hand_baseline(folder, ids, texts, recall, grid=None):
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"cell": CELL, "question_id": ids, "question": texts, "recall": recall}).to_csv(
        folder / "per_question.csv", index=False)
    (folder / "report.json").write_text(json.dumps({"cells": [{"cell": CELL, "recall": float(np.mean(recall))}],
                                                    "grid": grid or {}}))
    return folder


def test_check_pairs_explicit_ids_by_id_and_names_edited_texts(tmp_path):
    from chunkwise.evaluation.check import check_against_baseline

    ids, texts = ["kale", "beans", "leeks"], ["Kale spacng?", "Where do beans climb?", "What do leeks need?"]
    base = hand_baseline(tmp_path / "base", ids, texts, [1.0, 0.0, 1.0])
    fixed = ["Kale spacing?", *texts[1:]]  # the typo fixed
    new = pd.DataFrame({"cell": CELL, "question_id": ids, "question": fixed, "recall": [1.0, 0.0, 1.0]})
    out = check_against_baseline(new, base, cell=CELL, n_resamples=500)
    assert out.status == 0 and out.n_shared == 3
    assert "paired by question_id; 1 question text(s) changed since the baseline: kale" in out.message


def test_check_refuses_a_metric_mode_change(tmp_path):
    from chunkwise.evaluation.check import check_against_baseline

    base = hand_baseline(tmp_path / "base", ["q1", "q2"], ["a?", "b?"], [1.0, 0.0], grid={"mode": "union"})
    new = pd.DataFrame({"cell": CELL, "question_id": ["q1", "q2"], "question": ["a?", "b?"], "recall": [1.0, 0.0]})
    out = check_against_baseline(new, base, cell=CELL, n_resamples=500, mode="chroma")
    assert out.status == 3
    assert out.message.startswith("NOT COMPARABLE: the baseline scored with mode = 'union', this run with mode = 'chroma'")
    assert check_against_baseline(new, base, cell=CELL, n_resamples=500, mode="union").status == 0


def test_check_cli_refuses_bad_options_and_a_mode_change_before_the_grid_runs(tmp_path, monkeypatch, capsys):
    from chunkwise import cli_own_data

    def no_grid(*a, **k):
        raise AssertionError("the grid ran before the options were checked")

    monkeypatch.setattr(cli_own_data, "_make_embedders", no_grid)
    monkeypatch.setattr("chunkwise.evaluation.grid.run_grid", no_grid)
    docs, q, cfg = small_set(tmp_path)
    grid = {"chunkers": ["Sentence:12"], "retrievers": ["bm25"], "top_k": [1], "mode": "union"}
    base = hand_baseline(tmp_path / "base", ["q1", "q2"], ["Kale spacing?", "Where do beans climb?"], [1.0, 1.0], grid)
    args = ["check", "--docs", str(docs), "--questions", str(q), "--baseline", str(base), "--no-progress"]
    assert main(args + ["--floor", "80"]) == 2
    assert "floor must be a fraction in [0, 1] (e.g. 0.8 for 80%), got 80.0" in capsys.readouterr().err
    assert main(args + ["--metric", "f1"]) == 2
    assert "unknown metric 'f1'" in capsys.readouterr().err
    assert main(args + ["--config", str(cfg)]) == 3  # the grid file scores with mode chroma (the default)
    assert "NOT COMPARABLE: the baseline scored with mode = 'union', this run with mode = 'chroma'" in capsys.readouterr().out


# --------------------------------------------------------------------------------------
# poor: a file link to outside the documents folder; UTF-16 documents and UTF-8 questions
# --------------------------------------------------------------------------------------


def test_a_file_link_to_outside_the_folder_is_listed(tmp_path, capsys):
    from chunkwise.datasets.local import load_documents

    folder, other = tmp_path / "docs", tmp_path / "elsewhere"
    folder.mkdir()
    other.mkdir()
    (other / "far.txt").write_text("far away")
    (folder / "near.txt").write_text("close by")
    try:
        (folder / "also.txt").symlink_to(other / "far.txt")
        (folder / "twin.txt").symlink_to(folder / "near.txt")  # inside the folder: no note
    except (OSError, NotImplementedError):  # pragma: no cover - no symlinks here
        pytest.skip("symbolic links are not available")
    docs = load_documents(folder)
    assert docs["also.txt"] == "far away" and docs.linked == {"also.txt": str((other / "far.txt").resolve())}
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Where?", "excerpt": "far away"}\n')
    assert main(["questions", "validate", "--docs", str(folder), "--questions", str(q)]) == 0
    err = capsys.readouterr().err
    assert f"read: also.txt is a link to {(other / 'far.txt').resolve()}, outside {folder}" in err
    assert "twin.txt is a link" not in err


def test_utf16_documents_with_a_utf8_questions_file_need_no_option(tmp_path, capsys):
    from chunkwise.datasets.local import load_documents, read_questions

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "wide.txt").write_bytes("Tea grows on hills.\r\nCafé au lait.".encode("utf-16"))
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Where?", "excerpt": "Tea grows on hills."}\n', encoding="utf-8")
    assert load_documents(folder)["wide.txt"] == "Tea grows on hills.\nCafé au lait."
    assert main(["questions", "validate", "--docs", str(folder), "--questions", str(q)]) == 0
    # the byte-order mark decides per file: a UTF-16 questions file is read whatever --encoding says
    q16 = tmp_path / "q16.jsonl"
    q16.write_bytes('{"question": "Où?", "excerpt": "Café au lait."}\n'.encode("utf-16"))
    assert read_questions(q16)[0]["question"] == "Où?"
    # --encoding utf-16 (the old hint) no longer breaks the UTF-8 questions file
    capsys.readouterr()
    q.write_text('{"question": "Où?", "excerpt": "Café au lait."}\n', encoding="utf-8")
    assert main(["questions", "validate", "--docs", str(folder), "--questions", str(q), "--encoding", "utf-16"]) == 0
    assert "1 question(s) usable" in capsys.readouterr().out
    assert read_questions(q, encoding="utf-16")[0]["question"] == "Où?"
    # and the plain list of `questions locate`
    from chunkwise.datasets.locate import read_plain_questions

    plain = tmp_path / "plain.txt"
    plain.write_bytes("Où pousse le thé ?\nQuand ?\n".encode("utf-16"))
    assert [r["question"] for r in read_plain_questions(plain)] == ["Où pousse le thé ?", "Quand ?"]


# --------------------------------------------------------------------------------------
# poor: any-of hints
# --------------------------------------------------------------------------------------


def test_any_of_hints_search_every_document_and_name_where_the_alternative_is(tmp_path):
    from chunkwise.datasets.local import read_questions, validate_questions

    def check(record):
        p = tmp_path / "q.jsonl"
        p.write_text(json.dumps(record) + "\n")
        return [i.message for i in validate_questions(docs, read_questions(p)).errors]

    docs = {"v1.md": "Intro words here. The fee is 10 dollars.", "v2.md": "Other words. The toll is 12 dollars a day."}
    msgs = check({"question_id": "x", "question": "Fee?", "document": "v1.md",
                  "excerpts": [["The toll is 12 dollars a day.", "The fee is 99 dollars."]]})
    assert len(msgs) == 1 and "is not in v1.md, the document the question names, but it is in v2.md" in msgs[0]
    # no document named: the closest text is the best over all documents (v2 here), not the first document's
    msg = check({"question_id": "y", "question": "Toll?",
                 "excerpts": [["The toll is 12 dollars a week.", "The fee is 99 dollars."]]})[0]
    assert "was not found in any document; closest source text in v2.md" in msg and "The toll is 12 dollars" in msg


# --------------------------------------------------------------------------------------
# poor: questions locate --out into a missing folder; duplicated question ids
# --------------------------------------------------------------------------------------


def test_locate_out_into_a_missing_folder_and_duplicated_ids(tmp_path, capsys):
    docs, _, _ = small_set(tmp_path)
    q = tmp_path / "plain.jsonl"
    q.write_text('{"question_id": "k", "question": "How much space does kale need?"}\n'
                 '{"question_id": "b", "question": "Where do beans climb?"}\n')
    out = tmp_path / "new" / "deeper" / "draft.jsonl"
    assert main(["questions", "locate", "--docs", str(docs), "--questions", str(q), "--window", "1",
                 "--out", str(out)]) == 0
    assert [json.loads(line)["question_id"] for line in out.read_text().splitlines()] == ["k", "b"]
    assert "2 of 2 question(s) with a candidate written" in capsys.readouterr().err
    q.write_text('{"question_id": "k", "question": "How much space does kale need?"}\n'
                 '{"question_id": "k", "question": "Where do beans climb?"}\n')
    assert main(["questions", "locate", "--docs", str(docs), "--questions", str(q), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "error: plain.jsonl records 1 and 2 share the question_id 'k'; give each question its own id" in err
    assert main(["questions", "locate", "--docs", str(docs), "--questions", str(q), "--out", str(tmp_path)]) == 1
    assert f"--out {str(tmp_path)!r} is a folder; name a file" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# poor: build_condition's seed
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", ["0", -1, 1.5, True, None])
def test_build_condition_refuses_a_bad_seed_in_one_line(seed):
    from chunkwise.datasets.stitch import build_condition

    docs = {"a.md": "Alpha beta gamma. " * 40, "b.md": "Delta epsilon zeta. " * 40}
    q = pd.DataFrame({"question_id": ["Q1"], "question": ["alpha?"], "corpus_id": ["a.md"],
                      "references": [[{"content": "Alpha beta gamma.", "start_index": 0, "end_index": 17}]]})
    with pytest.raises(ValueError, match=r"^seed must be a whole number >= 0 \(e.g. seed=0\), got "):
        build_condition(docs, q, "shuffled", seed=seed, min_tokens=10, max_tokens=30)
    assert build_condition(docs, q, "shuffled", seed=np.int64(2), min_tokens=10, max_tokens=30).seed == 2


# --------------------------------------------------------------------------------------
# poor: --out under a read-only folder; two runs into one --out
# --------------------------------------------------------------------------------------


def test_out_two_levels_under_a_read_only_folder_is_refused_before_the_run(tmp_path, monkeypatch, capsys):
    from chunkwise import cli_own_data

    def no_grid(*a, **k):
        raise AssertionError("the grid ran")

    locked = tmp_path / "ro"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != locked and real_access(p, mode, **kw))
    monkeypatch.setattr(cli_own_data, "_make_embedders", no_grid)
    docs, q, cfg = small_set(tmp_path)
    assert main(evaluate_args(docs, q, cfg, locked / "one" / "two")) == 1
    assert f"{str(locked)!r} is not writable; name a folder you can write to" in capsys.readouterr().err
    assert not (locked / "one").exists()


def test_a_second_evaluate_into_a_folder_in_use_is_refused(tmp_path, capsys):
    from chunkwise import cli_own_data

    docs, q, cfg = small_set(tmp_path)
    out = tmp_path / "r"
    held = cli_own_data._lock_out_dir(out)  # another run holds the folder
    try:
        assert main(evaluate_args(docs, q, cfg, out)) == 1
        err = capsys.readouterr().err
        assert f"--out {str(out)!r} is in use by another chunkwise evaluate (pid {os.getpid()})" in err
        assert not (out / "table.csv").exists()
    finally:
        cli_own_data._unlock_out_dir(held)
    assert main(evaluate_args(docs, q, cfg, out)) == 0
    assert (out / "table.csv").is_file() and not (out / cli_own_data._LOCK_NAME).exists()


# --------------------------------------------------------------------------------------
# bugs 2 and 3: a BM25-only grid
# --------------------------------------------------------------------------------------


def window_embedder():
    """An embedder that knows its window (4 word pieces: one per word), as the truncation
    diagnostic reads it; every vector is the same."""
    return WindowedConstantEmbedder(max_tokens=4, dim=3, name="window-4")


def test_a_bm25_only_grid_has_no_truncation_columns(tmp_path, capsys):
    docs = {"a.txt": "Kale wants 45 cm between plants and rows. Beans climb the north fence every year."}
    questions = pd.DataFrame({"question_id": ["Q1"], "question": ["beans"], "corpus_id": ["a.txt"],
                              "references": [[{"content": "Beans climb the north fence every year.",
                                               "start_index": 43, "end_index": 82}]]})
    bm25 = GridConfig.from_dict({"chunkers": ["Sentence:40"], "retrievers": ["bm25"], "top_k": [1]})
    res = run_grid(docs, questions, bm25, window_embedder(), cache_dir=tmp_path / "c", show_progress=False)
    assert res.embedders == {} and res.truncation() is None
    assert not {"window_tokens", "chunks_over_window", "ref_chars_past_window"} & set(res.diagnostics(docs).columns)
    # a dense grid over the same chunks has them: 7 words against a window of 4
    dense = GridConfig.from_dict({"chunkers": ["Sentence:40"], "retrievers": ["dense"], "top_k": [1]})
    diag = run_grid(docs, questions, dense, window_embedder(), cache_dir=tmp_path / "c",
                    show_progress=False).diagnostics(docs)
    assert diag["window_tokens"].iloc[0] == 4 and diag["chunks_over_window"].iloc[0] == 1.0
    # the command line: the default embedder is not part of a BM25 grid's diagnostics
    d, q, cfg = small_set(tmp_path)
    assert main(evaluate_args(d, q, cfg, tmp_path / "r")) == 0
    assert "window_tokens" not in pd.read_csv(tmp_path / "r" / "diagnostics.csv").columns
    assert "chunks_over_window" not in capsys.readouterr().out


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
def test_an_unknown_embedder_name_is_refused_in_a_bm25_grid_as_in_a_dense_grid(tmp_path, capsys, retriever):
    grid = f'chunkers = ["Sentence:12"]\nretrievers = ["{retriever}"]\ntop_k = [1]\nembedders = ["no-such-model-59"]\n'
    docs, q, cfg = small_set(tmp_path, grid=grid)
    assert main(evaluate_args(docs, q, cfg, tmp_path / "r")) == 1
    err = capsys.readouterr().err
    assert "error: Could not load the sentence-transformers model 'no-such-model-59'" in err
    assert "Traceback" not in err and not (tmp_path / "r" / "table.csv").exists()


# --------------------------------------------------------------------------------------
# bug 1: the Ray engine and an address where no cluster answers
# --------------------------------------------------------------------------------------


def test_an_unreachable_ray_address_is_one_message_and_exit_1(tmp_path):
    pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    import socket
    import sys

    from procs import DrainedProcess

    # a port nothing listens on: bind one, note it, close it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "chunkwise.cli", "evaluate", "--docs", str(GARDEN / "docs"), "--questions",
           str(GARDEN / "questions.jsonl"), "--config", str(GARDEN / "grid.toml"), "--engine", "ray",
           "--ray-address", address, "--out", str(tmp_path / "r"), "--no-progress"]
    env = {**os.environ, "RAY_ADDRESS": ""}
    with DrainedProcess(cmd, env=env) as proc:
        rc = proc.wait(timeout=60)  # Ray alone retries this address without end
        err = proc.lines["err"]
    assert rc == 1, proc.output()
    errors = [line for line in err if "error" in line.lower()]
    assert errors == [f"chunkwise: error: no Ray cluster answers at --ray-address {address} (Connection refused). "
                      "Check that Ray runs there (`ray start --head` on that machine; `ray status` on it lists the "
                      "cluster), the host name and the port (the head's GCS port, 6379 by default, as host:6379; or "
                      "ray://host:10001 for Ray Client; 'auto' from a machine of the cluster), and that no firewall "
                      "blocks it; or leave out --ray-address to start Ray on this machine. Nothing was run."], proc.output()
    assert not any("Traceback" in line or "Failed to connect" in line for line in err), proc.output()  # Ray's retries
    assert not (tmp_path / "r" / "table.csv").exists()


class BlockingRay:
    """Stands in for the ray module: ``init`` blocks (a port that accepts connections but never
    speaks Ray) until ``release`` is set; ``calls`` counts the inits."""

    class exceptions:  # noqa: N801 - the attribute ray has
        class RayError(Exception):
            pass

    def __init__(self, error: BaseException | None = None):
        import threading

        self.release = threading.Event()
        self.calls = 0
        self.error = error

    def init(self, address=None, **kwargs):
        self.calls += 1
        if self.error is not None:
            raise self.error
        self.release.wait(120)


def test_ray_connect_gives_up_with_the_address_and_what_to_check():
    import socket

    from chunkwise.evaluation.distributed import RayEngine, _connect

    fake = BlockingRay()
    with socket.socket() as listener:  # accepts TCP, never answers: Ray's handshake would wait for ever
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        try:
            with pytest.raises(RuntimeError) as info:
                _connect(fake, address, 0.5, {})
        finally:
            fake.release.set()
    assert fake.calls == 1
    assert str(info.value).startswith(f"no Ray cluster answers at --ray-address {address} (something listens there, "
                                      "but Ray's handshake did not finish within 0.5 s). Check that Ray runs there")
    # a host that does not resolve, a port that is no number: refused before Ray is asked
    for bad, why in (("no-such-host.invalid:6379", "the host name 'no-such-host.invalid' does not resolve"),
                     ("ray://127.0.0.1:port", "'port' is not a port number")):
        with pytest.raises(RuntimeError, match=f"no Ray cluster answers at --ray-address {bad} \\({why}"):
            _connect(fake, bad, 0.5, {})
    assert fake.calls == 1
    # Ray's own connection error ('auto' without a cluster) becomes the same message
    gone = BlockingRay(ConnectionError("Could not find any running Ray instance."))
    with pytest.raises(RuntimeError, match=r"at --ray-address auto \(ConnectionError: Could not find any running Ray"):
        _connect(gone, "auto", 5, {})
    with pytest.raises(ValueError, match="connect_timeout must be a number of seconds > 0"):
        RayEngine(connect_timeout=0)


# --------------------------------------------------------------------------------------
# poor: 10,000 one-line documents took 1.0 GB. Where it goes: PyTorch and the model (a fixed
# 780 MiB whatever the corpus; README); the documents' own share is small, and this keeps it so.
# --------------------------------------------------------------------------------------


def test_a_tiny_document_costs_kilobytes_not_a_hundred(tmp_path):
    import tracemalloc

    n = 2000
    docs = {f"d{i:05d}.txt": f"Document {i} says kale and beans grow in row {i}." for i in range(n)}
    questions = pd.DataFrame({
        "question_id": [f"Q{i}" for i in range(5)], "question": [f"row {i}" for i in range(5)],
        "corpus_id": [f"d{i:05d}.txt" for i in range(5)],
        "references": [[{"content": docs[f"d{i:05d}.txt"], "start_index": 0,
                         "end_index": len(docs[f"d{i:05d}.txt"])}] for i in range(5)]})
    cfg = GridConfig.from_dict({"chunkers": ["TokenText:100", "Recursive:100"], "retrievers": ["dense", "bm25"],
                                "top_k": [1, 5]})
    run_grid(dict(list(docs.items())[:5]), questions, cfg, window_embedder(), cache_dir=tmp_path / "c",
             show_progress=False)  # imports and one-time loads (tokenizers) outside the measurement
    tracemalloc.start()
    try:
        res = run_grid(docs, questions, cfg, window_embedder(), cache_dir=tmp_path / "c", show_progress=False)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.table["n_questions"].tolist() == [5] * 8 and len(res.chunk_objects["TokenText 100"]) == n
    # measured: about 1.0-1.5 KiB kept and 3.5 KiB at the peak per document (two chunkings)
    assert kept / n < 8 * 1024 and peak / n < 24 * 1024, (kept / n, peak / n)
