"""The answer stage (chunkwise.evaluation.answers and `chunkwise evaluate --answers`).

Grid: test_grid's two documents cut by TokenText:2, BM25 at k = 1 (Q1 "three four" retrieves a1
" three four"; Q2 "one two nine" retrieves a0 "one two"). The fake model answers from the
question; the judge's reply is scripted.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from fakes import FakeChatModel

from chunkwise.evaluation.answers import answer_cells, exact_match, normalize_answer, select_cells, token_f1
from chunkwise.evaluation.grid import GridConfig, run_grid

DOCS = {"a.txt": "one two three four five six", "b.txt": "seven eight nine ten"}


def questions(with_answers=True):
    q = pd.DataFrame({
        "question_id": ["Q1", "Q2"],
        "question": ["three four", "one two nine"],
        "corpus_id": ["a.txt", "b.txt"],
        "references": [[{"start_index": 8, "end_index": 18}], [{"start_index": 12, "end_index": 20}]],
    })
    if with_answers:
        q["reference_answer"] = ["Three four", "nine ten"]
    return q


def grid(tmp_path, q=None):
    cfg = GridConfig(chunkers=["TokenText:2", "TokenText:3"], retrievers=["bm25"], top_k=[1])
    return run_grid(DOCS, questions() if q is None else q, cfg, cache_dir=tmp_path, show_progress=False)


def scripted(call):
    if call.method == "chat_json":
        return {"correct": "Question: three four" in call.prompt, "grounded": True}
    return "The three four." if "Question: three four" in call.prompt else "nine"


def test_squad_metrics_by_hand():
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    assert exact_match("A cat sat.", "cat sat") == 1.0 and exact_match("cat", "cat sat") == 0.0
    # "cat sat" vs "cat sat down": 2 common, precision 1, recall 2/3 -> F1 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert token_f1("dog", "cat") == 0.0 and token_f1("", "") == 1.0 and token_f1("", "cat") == 0.0


def test_answers_scored_by_hand(tmp_path):
    res = grid(tmp_path)
    llm = FakeChatModel(scripted)
    ans = answer_cells(res, llm, ["TokenText 2 | bm25 | k=1"])
    pq = ans.per_question.set_index("question_id")
    # Q1: "The three four." -> "three four" == reference: EM 1, F1 1; judge correct, grounded
    assert pq.loc["Q1", ["exact_match", "token_f1", "correct", "grounded"]].tolist() == [1.0, 1.0, 1.0, 1.0]
    # Q2: "nine" vs "nine ten": precision 1, recall 1/2 -> F1 2/3; EM 0; judge says incorrect
    assert pq.loc["Q2", "token_f1"] == pytest.approx(2 / 3)
    assert pq.loc["Q2", ["exact_match", "correct", "grounded"]].tolist() == [0.0, 0.0, 1.0]
    assert pq.loc["Q1", "answer_tokens"] == 4  # "The three four." in cl100k_base: The| three| four|.
    t = ans.table.iloc[0]
    assert t["token_f1"] == pytest.approx((1 + 2 / 3) / 2) and t["n_failed"] == 0
    # the model saw the cell's retrieved chunk as numbered context, and the versioned prompts
    first = llm.calls[0]
    assert "[1] three four" in first.prompt and first.messages[0]["content"].startswith("[answer-v1]")
    assert any(c.method == "chat_json" and c.messages[0]["content"].startswith("[judge-v1]") for c in llm.calls)
    assert ans.llm_calls == 4  # 2 answers + 2 judgements
    assert list(ans.scores("token_f1").columns) == ["TokenText 2 | bm25 | k=1"]


def test_a_failed_generation_is_nan_with_its_reason_never_zero(tmp_path):
    from chunkwise.llm import LLMRequestError

    res = grid(tmp_path)
    gone = LLMRequestError("server gone", endpoint="http://127.0.0.1:1/v1", model="fake", attempts=1)
    fail = lambda call: gone if "nine" in call.prompt and call.method == "chat" else None  # noqa: E731
    ans = answer_cells(res, FakeChatModel(scripted, fail=fail), ["TokenText 2 | bm25 | k=1"])
    pq = ans.per_question.set_index("question_id")
    assert all(math.isnan(pq.loc["Q2", m]) for m in ("token_f1", "exact_match", "correct", "grounded"))
    assert "generation failed: LLMRequestError" in pq.loc["Q2", "error"] and pq.loc["Q1", "error"] == ""
    t = ans.table.iloc[0]
    assert t["n_failed"] == 1 and t["token_f1"] == 1.0  # the mean of the answered question, not (1 + 0) / 2


def test_without_reference_answers_only_groundedness_is_scored(tmp_path):
    res = grid(tmp_path, questions(with_answers=False))
    ans = answer_cells(res, FakeChatModel(scripted), "best:1")
    pq = ans.per_question
    assert pq["token_f1"].isna().all() and pq["correct"].isna().all() and (pq["grounded"] == 1.0).all()


def test_cell_selection(tmp_path):
    res = grid(tmp_path)
    assert select_cells(res, "all") == list(res.table["cell"])
    assert len(select_cells(res, "best:1")) == 1
    assert select_cells(res, "TokenText 3 | bm25 | k=1, TokenText 2 | bm25 | k=1") == [
        "TokenText 3 | bm25 | k=1", "TokenText 2 | bm25 | k=1"]
    with pytest.raises(ValueError, match="not cells of the grid"):
        select_cells(res, "Nope | bm25 | k=1")


def test_evaluate_answers_cli_writes_columns_and_replays_from_the_cache(tmp_path, monkeypatch, capsys):
    """The CLI against an OpenAI-compatible fake server: answer columns, then a rerun with 0 requests."""
    from chunkwise.cli import main
    from chunkwise.llm.fake_server import FakeChatServer

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants.", '
                 '"reference_answer": "45 cm"}\n'
                 '{"question": "Where do beans climb?", "excerpt": "Beans climb the north fence.", '
                 '"reference_answer": "the north fence"}\n')
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["Sentence:12"]\nretrievers = ["bm25"]\ntop_k = [1]\n')

    def reply(body):
        if "[judge-v1]" in body["messages"][0]["content"]:
            return json.dumps({"correct": True, "grounded": True})
        return "45 cm" if "Kale" in body["messages"][-1]["content"].split("Question:")[-1] else "On the north fence."

    with FakeChatServer(latency_s=0.0, reply=reply) as server:
        monkeypatch.setenv("CHUNKWISE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "fake-model")
        args = ["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg), "--no-progress",
                "--answers", "--answer-cells", "all", "--llm-cache", str(tmp_path / "llm.sqlite")]
        assert main(args + ["--out", str(tmp_path / "r1")]) == 0
        first = len(server.requests)
        out = capsys.readouterr().out
        assert first == 4 and "4 LLM requests: 4 new, 0 from the cache" in out
        assert main(args + ["--out", str(tmp_path / "r2")]) == 0
        assert len(server.requests) == first  # every reply from the cache
        assert "4 LLM requests: 0 new, 4 from the cache" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "r2" / "table.csv")
    # "45 cm" exact (F1 1); "On the north fence." vs "the north fence": "on north fence" vs "north fence",
    # precision 2/3, recall 1 -> F1 0.8; mean 0.9
    assert table.loc[0, "token_f1"] == pytest.approx(0.9) and table.loc[0, "correct"] == 1.0
    per_q = pd.read_csv(tmp_path / "r2" / "answers.csv")
    assert sorted(per_q["answer"]) == ["45 cm", "On the north fence."]
    meta = json.loads((tmp_path / "r2" / "answers.json").read_text())
    assert meta["judge_prompt_version"] == "judge-v1" and meta["llm_cache_hits"] == 4
    assert np.isfinite(per_q["answer_seconds"]).all()


@pytest.mark.parametrize("extra, needle", [
    (["--answers", "--answer-cells", "Nope | bm25 | k=1"], "are not cells of the grid"),
    (["--answers", "--answer-cells", "best:0"], "best:N needs N >= 1"),
    (["--answers", "--answer-cells", "best:three"], "write best:N with a whole number"),
    (["--answers", "--answer-metric", "bleu"], "--answer-metric must be one of"),
    (["--answers", "--no-judge", "--answer-metric", "grounded"], "--no-judge turns the judge off"),
    (["--answer-cells", "all"], "--answer-cells only apply with --answers"),
    (["--no-judge"], "--no-judge only apply with --answers"),
])
def test_bad_answer_options_are_refused_before_the_grid_runs(tmp_path, monkeypatch, capsys, extra, needle):
    from chunkwise import cli_own_data
    from chunkwise.cli import main

    def no_grid(*a, **k):
        raise AssertionError("the grid ran before the options were checked")

    monkeypatch.setattr(cli_own_data, "_make_embedders", no_grid)
    monkeypatch.setattr("chunkwise.evaluation.grid.run_grid", no_grid)
    docs, q, cfg = _garden(tmp_path, with_answers=True)
    args = ["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg), "--no-progress",
            "--out", str(tmp_path / "r")]
    assert main(args + extra) == 1
    assert needle in capsys.readouterr().err


def test_no_judge_without_reference_answers_is_refused_before_the_grid_runs(tmp_path, monkeypatch, capsys):
    from chunkwise.cli import main

    def no_grid(*a, **k):
        raise AssertionError("the grid ran")

    monkeypatch.setattr("chunkwise.evaluation.grid.run_grid", no_grid)
    docs, q, cfg = _garden(tmp_path, with_answers=False)
    args = ["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg), "--no-progress",
            "--out", str(tmp_path / "r"), "--answers", "--no-judge"]
    assert main(args) == 1
    assert "no question has one" in capsys.readouterr().err


def _garden(tmp_path, with_answers):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.jsonl"
    ans = ', "reference_answer": "45 cm"' if with_answers else ""
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."' + ans + "}\n"
                 '{"question": "Where do beans climb?", "excerpt": "Beans climb the north fence."}\n')
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["Sentence:12"]\nretrievers = ["bm25"]\ntop_k = [1]\n')
    return docs, q, cfg
