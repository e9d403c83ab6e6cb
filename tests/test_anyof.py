"""Any-of answers: a slot is filled when any of its alternatives is retrieved (hand-computed)."""

from __future__ import annotations

import json

import pytest

from chunkwise.datasets.local import read_questions, validate_questions
from chunkwise.evaluation.grid import GridConfig, run_grid
from chunkwise.retrieval import registry as RR

V1 = "Intro words here. The fee is 10 dollars."
V2 = "Other words here. The fee is 12 dollars."
DOCS = {"v1.md": V1, "v2.md": V2}


def write(tmp_path, records):
    p = tmp_path / "q.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return read_questions(p)


def test_readings_across_documents_and_within_one(tmp_path):
    recs = write(tmp_path, [
        {"question_id": "fee", "question": "What is the fee?",
         "excerpts": [["The fee is 10 dollars.", "The fee is 12 dollars."]]},
        {"question_id": "both", "question": "Intro and fee?",
         "excerpts": [["Intro words here.", "Other words here."], ["The fee is 10 dollars.", "The fee is 12 dollars."]]},
        {"question_id": "plain", "question": "Fee in v1?", "document": "v1.md", "excerpt": "The fee is 10 dollars."},
    ])
    rep = validate_questions(DOCS, recs)
    assert rep.ok
    q = rep.questions.set_index("question_id")
    # one reading per document for "fee": v1's alternative, v2's alternative
    assert [(r["corpus_id"], [(x["start_index"], x["end_index"]) for x in r["references"]]) for r in q.loc["fee", "readings"]] == [
        ("v1.md", [(18, 40)]), ("v2.md", [(18, 40)])]
    # "both": a reading keeps its two slots in one document; cross-document mixes are not readings
    assert [r["corpus_id"] for r in q.loc["both", "readings"]] == ["v1.md", "v2.md"]
    assert [len(r["references"]) for r in q.loc["both", "readings"]] == [2, 2]
    assert q.loc["plain", "readings"] is None
    assert q.loc["fee", "corpus_id"] == "v1.md"  # the first reading stands in the usual columns


def test_a_missing_alternative_or_no_common_document_is_an_error(tmp_path):
    recs = write(tmp_path, [
        {"question_id": "x", "question": "?", "excerpts": [["The fee is 10 dollars.", "The fee is 99 dollars."]]},
        {"question_id": "y", "question": "?",
         "excerpts": [["Intro words here.", "The fee is 10 dollars."], ["The fee is 12 dollars."]]},
    ])
    rep = validate_questions(DOCS, recs)
    msgs = {i.question_id: i.message for i in rep.errors}
    assert "The fee is 99 dollars." in msgs["x"] and "was not found in any document" in msgs["x"]
    assert "no document holds an alternative of every part" in msgs["y"]


@pytest.fixture
def last_first():
    def rank(inputs, fused):
        n = len(inputs.texts)
        return RR.Ranking([list(range(n - 1, -1, -1))[: inputs.depth] for _ in inputs.questions], 0.0, 0.0)

    RR.register_retriever(RR.RetrieverKind("lastfirst", rank, "the last chunk first"))
    yield
    RR._KINDS.pop("lastfirst", None)


def test_scoring_takes_the_best_reading(tmp_path, last_first):
    recs = write(tmp_path, [
        {"question_id": "anyof", "question": "What is the fee?",
         "excerpts": [["The fee is 10 dollars.", "The fee is 12 dollars."]]},
        {"question_id": "v1only", "question": "What is the fee?", "document": "v1.md", "excerpt": "The fee is 10 dollars."},
    ])
    q = validate_questions(DOCS, recs).questions
    # Sentence:10 gives one chunk per sentence: v1 [0,17) [18,40), v2 [0,17) [18,40); "lastfirst" returns
    # v2's fee sentence first
    res = run_grid(DOCS, q, GridConfig(chunkers=["Sentence:10"], retrievers=["lastfirst"], top_k=[1, 2]),
                   cache_dir=tmp_path, show_progress=False)
    pq = res.per_question.set_index(["k", "question_id"])
    # k=1: the any-of question is fully answered by v2's alternative; the v1-only one is not
    assert pq.loc[(1, "anyof"), ["recall", "precision", "iou", "hit", "rr"]].tolist() == [1.0, 1.0, 1.0, 1.0, 1.0]
    assert pq.loc[(1, "v1only"), ["recall", "hit"]].tolist() == [0.0, 0.0]
    # precision_Omega: the best reading's (its own sentence chunk covers it exactly)
    assert pq.loc[(1, "anyof"), "precision_omega"] == 1.0
    # k=2 retrieves v2's two sentences (17 + 22 characters): still v2's reading, precision 22 / 39
    assert pq.loc[(2, "anyof"), "recall"] == 1.0
    assert pq.loc[(2, "anyof"), "precision"] == pytest.approx(22 / 39)


def test_stitching_refuses_any_of_questions(tmp_path):
    from chunkwise.datasets.stitch import build_condition

    recs = write(tmp_path, [{"question_id": "fee", "question": "What is the fee?",
                             "excerpts": [["The fee is 10 dollars.", "The fee is 12 dollars."]]}])
    q = validate_questions(DOCS, recs).questions
    with pytest.raises(ValueError, match="any-of excerpts .* cannot be stitched"):
        build_condition(DOCS, q, "stitched")
    plain = q.drop(columns=["readings"])
    assert build_condition(DOCS, plain, "real").questions.loc[0, "references"] == [(18, 40)]
