"""Question generation with numbered sentences (``excerpt_mode="sentence_numbers"``).

The model gives sentence numbers instead of copying text, so references are the document's own
sentences by construction. Same scripted client and documents as test_questions_generate; every
offset below is checked by hand against the two documents (sentence spans in the comments).
"""

from __future__ import annotations

import json

import pytest

from chunkwise.experiments import questions as qg
from chunkwise.experiments.questions import build_numbered_messages, generate_questions, passage_sentences

from fakes import QUESTION_DOCS, TEXT_A, TEXT_B, ScriptedLLM

# TEXT_A sentences: [1] (0, 47) Elbe rises, [2] (48, 108) flows 1094 km, [3] (109, 142) Hamburg
# TEXT_B sentences: [1] (0, 39) basalt is, [2] (40, 107) it forms, [3] (108, 142) ocean floor


def numbered(question, *numbers):
    return json.dumps({"question": question, "sentences": list(numbers)})


def run(tmp_path, script, n, **kw):
    llm = ScriptedLLM(script, tmp_path / "llm.sqlite")
    kw.setdefault("content_repairs", 0)  # the scripts below answer each candidate once
    return generate_questions(QUESTION_DOCS, n, llm, None, window_chars=200, **kw), llm


def test_passage_sentences_are_document_offsets():
    assert passage_sentences(TEXT_A, 0, len(TEXT_A)) == [(0, 47), (48, 108), (109, 142)]
    assert passage_sentences(TEXT_B, 40, 142) == [(40, 107), (108, 142)]
    assert passage_sentences("   ", 0, 3) == []


def test_the_prompt_numbers_each_sentence_on_its_own_line():
    msgs = build_numbered_messages("a.txt", ["One  two.", "Three\nfour."], ["Earlier?"])
    assert msgs[0]["role"] == "system" and "'a.txt'" in msgs[0]["content"]
    assert msgs[1]["content"].endswith("one numbered sentence per line:\n[1] One two.\n[2] Three four.")
    assert "- Earlier?" in msgs[1]["content"]


def test_every_numbered_outcome_is_hand_checked(tmp_path):
    script = [
        # 0 (a.txt): sentences 2 and 1, given out of order -> one reference (0, 108)
        numbered("How long is the river Elbe and where does it rise?", 2, 1),
        # 1 (b.txt): sentence 4 does not exist -> excerpt_not_found
        numbered("What is basalt?", 4),
        # 2 (a.txt): names a sentence number -> refers_to_passage
        numbered("What does sentence 3 say about Hamburg?", 3),
        # 3 (b.txt): sentences 1 and 3, not consecutive -> two references
        numbered("What is basalt and where is it found?", 3, 1),
    ]
    result, llm = run(tmp_path, script, n=4)
    assert list(result.candidates["reason"]) == [None, "excerpt_not_found", "refers_to_passage", None]
    assert result.candidates.loc[1, "detail"] == "no sentence 4 in the passage (it has 3)"
    assert result.dropped["excerpt_not_found"] == 1 and result.dropped["refers_to_passage"] == 1
    q0, q3 = result.questions
    assert q0["references"] == [{"content": TEXT_A[0:108], "start_index": 0, "end_index": 108}]
    assert q3["references"] == [
        {"content": TEXT_B[0:39], "start_index": 0, "end_index": 39},
        {"content": TEXT_B[108:142], "start_index": 108, "end_index": 142},
    ]
    assert q0["prompt_version"] == qg.NUMBERED_PROMPT_VERSION == result.settings["prompt_version"]
    assert q0["prompt_sha256"] == qg.NUMBERED_PROMPT_SHA256 != qg.PROMPT_SHA256
    assert result.settings["excerpt_mode"] == "sentence_numbers"
    # the first request shows TEXT_A's three sentences, numbered
    user = llm.requests[0]["messages"][1]["content"]
    assert user.endswith("[1] " + TEXT_A[0:47] + "\n[2] " + TEXT_A[48:108] + "\n[3] " + TEXT_A[109:142])


def test_a_content_repair_fixes_a_bad_number(tmp_path):
    script = [
        numbered("Where does the Elbe flow to?", 7),  # no sentence 7: sent back
        numbered("Where does the Elbe flow to?", 2),  # repaired -> kept
    ]
    result, llm = run(tmp_path, script, n=1, content_repairs=1)
    assert result.candidates.loc[0, "kept"]
    assert result.questions[0]["references"] == [{"content": TEXT_A[48:108], "start_index": 48, "end_index": 108}]
    sent_back = llm.requests[1]["messages"][-1]["content"]
    assert "There is no sentence 7: the passage has sentences 1 to 3." in sent_back


def test_short_sentences_only_are_dropped(tmp_path):
    result, _ = run(tmp_path, [numbered("Where does the Elbe rise?", 1)], n=1, min_excerpt_chars=50)
    assert list(result.candidates["reason"]) == ["excerpt_too_short"]


def test_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="excerpt_mode must be one of"):
        run(tmp_path, [], n=1, excerpt_mode="quote")


def test_copy_mode_requests_are_unchanged(tmp_path):
    # the default mode's prompt and version are what the committed chapter-4 cache was made with
    result, llm = run(tmp_path, [json.dumps({"question": "Where does the Elbe rise?",
                                             "excerpts": [TEXT_A[0:47]]})], n=1, excerpt_mode="copy")
    assert result.settings["prompt_version"] == qg.PROMPT_VERSION == "qgen-1"
    assert llm.requests[0]["messages"] == qg.build_messages("a.txt", TEXT_A, [])


def test_a_long_lower_case_sentence_is_split_at_its_full_stops():
    # the robust splitter keeps ". these" together (a full stop before a lower-case word); over
    # max_chars the sentence is split again at every terminator followed by whitespace
    text = "revenue grew. these increases were offset. fees rose in 2007."
    assert passage_sentences(text, 0, len(text)) == [(0, len(text))]
    assert passage_sentences(text, 0, len(text), max_chars=20) == [(0, 13), (14, 42), (43, 61)]
    assert [text[a:b] for a, b in passage_sentences(text, 0, len(text), max_chars=20)] == [
        "revenue grew.", "these increases were offset.", "fees rose in 2007."]


def test_the_defaults_are_the_measured_best_settings(tmp_path):
    # numbered sentences, two content re-asks, no earlier questions shown (data/own/generation_runs.csv)
    llm = ScriptedLLM([numbered("Where does the Elbe rise?", 9), numbered("Where does the Elbe rise?", 1)],
                      tmp_path / "llm.sqlite")
    result = generate_questions(QUESTION_DOCS, 1, llm, None, window_chars=200)
    assert (result.settings["excerpt_mode"], result.settings["content_repairs"], result.settings["n_previous"]) == (
        "sentence_numbers", 2, 0)
    assert result.questions[0]["references"] == [{"content": TEXT_A[0:47], "start_index": 0, "end_index": 47}]
    assert "Earlier questions about this document:\n(none)" in llm.requests[0]["messages"][1]["content"]
