"""Tests for chunkwise.experiments.questions: LLM-written question sets and rank agreement.

The LLM is a real :class:`~chunkwise.llm.LLMClient` (cache, JSON extraction, schema validation
and repair all run) whose HTTP layer is replaced by a script of replies, so every outcome below
is checked by hand against two short documents.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau, spearmanr

from chunkwise import cli
from chunkwise.datasets.local import read_questions, validate_questions
from chunkwise.experiments import questions as qg
from chunkwise.experiments.questions import (
    PROMPT_SHA256,
    PROMPT_VERSION,
    build_messages,
    generate_questions,
    rank_agreement,
    sample_window,
)
from fakes import QUESTION_DOCS as DOCS
from fakes import SCRIPTED_IDENTITY as IDENTITY
from fakes import TEXT_A, ScriptedLLM, TableEmbedder

#: Chroma's method (the model copies excerpts, earlier questions shown, no content re-asks): the
#: settings every hand-checked script below was written for; the defaults are tested in
#: test_questions_numbered.py.
COPY = {"excerpt_mode": "copy", "n_previous": 3, "content_repairs": 0}


def reply(question, *excerpts):
    return json.dumps({"question": question, "excerpts": list(excerpts)})


ELBE_LEN = "It flows for 1094 kilometres to the North Sea near Cuxhaven."
ELBE_RISE = "The river Elbe rises in the Krkonose mountains."
SCRIPT = [
    # 0 (a.txt): whitespace differs from the document -> kept, true offsets (48, 108)
    reply("How long is the river Elbe?", "It flows for 1094 kilometres   to the\nNorth Sea near Cuxhaven."),
    # 1 (b.txt): a paraphrase, not in the passage -> excerpt_not_found
    reply("How does basalt form?", "Basalt forms when lava cools quickly."),
    # 2 (a.txt): prose, then prose again after the repair request -> malformed_json (2 requests)
    "I think a good question would be about Hamburg.",
    "Sorry, here it is: question = Where is Hamburg?",
    # 3 (b.txt): quoted excerpt (quotes stripped) + a 4-character one (left out) -> kept, (108, 142)
    reply("What is most of the ocean floor made of?", '"Most of the ocean floor is basalt."', "iron"),
    # 4 (a.txt): the question of candidate 0 again, other case and spacing -> duplicate
    reply("how long is the  river ELBE?", ELBE_LEN),
    # 5 (b.txt): talks about the passage -> refers_to_passage
    reply("What does the passage say about basalt?", "Basalt is a fine-grained volcanic rock."),
    # 6 (a.txt): new question -> kept
    reply("Where does the Elbe rise?", ELBE_RISE),
    # 7 (a.txt... no: b.txt) only short excerpts -> excerpt_too_short
    reply("Which metals are in basalt lava?", "iron", "magnesium"),
    # 8 (a.txt): near duplicate of 6 under the fake embedder (cosine 0.9 > 0.85) -> duplicate
    reply("In which mountains does the river Elbe rise?", "...The river Elbe rises in the Krkonose mountains."),
]


#: Fixed vectors per question (a TableEmbedder of these): candidate 3 shares candidate 0's vector but not its document.
QUESTION_VECTORS = {
    "How long is the river Elbe?": [1, 0, 0],
    "What is most of the ocean floor made of?": [1, 0, 0],
    "Where does the Elbe rise?": [0, 1, 0],
    "In which mountains does the river Elbe rise?": [0, 0.9, math.sqrt(1 - 0.81)],
}


def run(tmp_path, script, n=9, embedder="default", **kw):
    llm = ScriptedLLM(script, tmp_path / "llm.sqlite")
    emb = TableEmbedder(QUESTION_VECTORS, name="fake-questions") if embedder == "default" else embedder
    return generate_questions(DOCS, n, llm, emb, window_chars=200, **{**COPY, **kw}), llm


def test_every_candidate_outcome_is_hand_checked(tmp_path):
    result, llm = run(tmp_path, SCRIPT)
    cand = result.candidates
    assert list(cand["document"]) == ["a.txt", "b.txt"] * 4 + ["a.txt"]
    assert list(cand["reason"]) == [
        None, "excerpt_not_found", "malformed_json", None, "duplicate", "refers_to_passage", None,
        "excerpt_too_short", "duplicate",
    ]
    assert result.dropped == {
        "request_failed": 0, "malformed_json": 1, "excerpt_not_found": 1, "excerpt_too_short": 1,
        "refers_to_passage": 1, "duplicate": 2,
    }
    assert len(llm.requests) == 10  # 9 candidates + 1 repair request
    assert [q["question_id"] for q in result.questions] == ["gen-0000", "gen-0003", "gen-0006"]
    q0, q3, q6 = result.questions
    assert q0["references"] == [{"content": ELBE_LEN, "start_index": 48, "end_index": 108}]
    assert TEXT_A[48:108] == ELBE_LEN
    assert q3["corpus_id"] == "b.txt"
    # 39 characters of sentence one, 68 of " It forms ... iron.", the newline at 107
    assert q3["references"] == [{"content": "Most of the ocean floor is basalt.", "start_index": 108, "end_index": 142}]
    assert q6["references"] == [{"content": ELBE_RISE, "start_index": 0, "end_index": 47}]
    for q in result.questions:
        assert q["reviewed"] is False
        assert q["model"] == IDENTITY
        assert q["prompt_version"] == PROMPT_VERSION and q["prompt_sha256"] == PROMPT_SHA256
    assert "cosine 0.900 to candidate 6" in cand.loc[8, "detail"]
    assert "same question as candidate 0" in cand.loc[4, "detail"]
    assert result.describe().startswith("3 of 9 candidate questions kept; dropped: 1 malformed json")


def test_earlier_questions_of_the_same_document_go_into_the_prompt(tmp_path):
    _, llm = run(tmp_path, SCRIPT)
    users = [r["messages"][-1]["content"] for r in llm.requests if len(r["messages"]) == 2]
    assert "(none)" in users[0] and "(none)" in users[1]
    # candidate 4 (a.txt) sees candidate 0's question, not candidate 3's (b.txt)
    assert "- How long is the river Elbe?" in users[4]
    assert "ocean floor" not in users[4]
    # the repair request carries the model's bad reply and the error
    repair = [r for r in llm.requests if len(r["messages"]) == 4][0]
    assert repair["messages"][2]["content"] == SCRIPT[2]


def test_rerun_replays_from_the_cache_and_a_larger_n_asks_only_for_the_new_candidates(tmp_path):
    first, llm1 = run(tmp_path, SCRIPT[:6], n=5)  # "interrupted" after candidate 4
    assert len(llm1.requests) == 6
    again, llm2 = run(tmp_path, [], n=5)  # nothing scripted: every reply must come from the cache
    assert llm2.requests == []
    assert again.questions == first.questions
    assert again.llm_stats["cache_hits"] == again.llm_stats["calls"] == 6
    full, llm3 = run(tmp_path, SCRIPT[6:], n=9)
    assert len(llm3.requests) == 4
    assert full.llm_stats["cache_hits"] == 6
    assert [q["question_id"] for q in full.questions] == ["gen-0000", "gen-0003", "gen-0006"]


def test_written_file_is_a_questions_file_that_validates(tmp_path):
    result, _ = run(tmp_path, SCRIPT)
    path, meta = result.write(tmp_path / "out" / "gen.jsonl")
    assert meta.name == "gen.generation.json"
    records = read_questions(path)
    report = validate_questions(DOCS, records)
    assert report.ok and report.warnings == []
    assert list(report.questions["question_id"]) == ["gen-0000", "gen-0003", "gen-0006"]
    summary = json.loads(meta.read_text())
    assert summary["n_candidates"] == 9 and summary["n_kept"] == 3
    assert summary["dropped"]["duplicate"] == 2
    assert summary["model"] == IDENTITY and summary["dedup_threshold"] == 0.85
    assert summary["kept_per_document"] == {"a.txt": 2, "b.txt": 1}
    with pytest.raises(ValueError, match="must end in .jsonl"):
        result.write(tmp_path / "gen.csv")


def test_without_embedder_only_exact_repeats_are_duplicates(tmp_path):
    result, _ = run(tmp_path, SCRIPT, embedder=None)
    assert result.dropped["duplicate"] == 1
    assert [q["question_id"] for q in result.questions] == ["gen-0000", "gen-0003", "gen-0006", "gen-0008"]
    assert result.settings["dedup_embedder"] is None


def test_a_higher_threshold_keeps_the_near_duplicate(tmp_path):
    result, _ = run(tmp_path, SCRIPT, dedup_threshold=0.95)
    assert "gen-0008" in [q["question_id"] for q in result.questions]
    assert result.candidates.loc[8, "nearest_kept_cosine"] == pytest.approx(0.9, abs=1e-6)


def test_failed_requests_are_counted_then_the_run_stops(tmp_path):
    from chunkwise.llm import LLMRequestError

    class Dead(ScriptedLLM):
        def _call_with_retries(self, fn, what, *, model):
            raise LLMRequestError("connection refused", endpoint=self.base_url, model=model, attempts=1)

    llm = Dead([], tmp_path / "llm.sqlite")
    with pytest.raises(LLMRequestError):
        generate_questions(DOCS, 5, llm, None, window_chars=200, max_consecutive_failures=2, **COPY)
    llm = Dead([], tmp_path / "llm.sqlite")
    res = generate_questions(DOCS, 2, llm, None, window_chars=200, max_consecutive_failures=3, **COPY)
    assert res.dropped["request_failed"] == 2 and res.questions == []


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"n": 0}, "n must be an int >= 1"),
        ({"allocation": "random"}, "allocation must be"),
        ({"dedup_threshold": 1.5}, "dedup_threshold must be in"),
        ({"window_chars": 10}, "window_chars must be an int >= 200"),
    ],
)
def test_bad_settings_get_one_clear_error(tmp_path, kw, message):
    llm = ScriptedLLM([], tmp_path / "llm.sqlite")
    args = {"n": 3, **kw}
    with pytest.raises(ValueError, match=message):
        generate_questions(DOCS, args.pop("n"), llm, None, **args)


def test_empty_inputs_are_refused(tmp_path):
    llm = ScriptedLLM([], tmp_path / "llm.sqlite")
    with pytest.raises(ValueError, match="no documents"):
        generate_questions({}, 3, llm)
    with pytest.raises(ValueError, match="'x.txt' is empty"):
        generate_questions({"x.txt": "  \n"}, 3, llm)


def test_sample_window_is_seeded_and_trimmed_to_words():
    text = " ".join(f"w{i:03d}" for i in range(400))  # 1599 characters, words of 4 characters
    s1 = sample_window(text, 250, np.random.default_rng([0, 3]))
    s2 = sample_window(text, 250, np.random.default_rng([0, 3]))
    assert s1 == s2
    s, e = s1
    assert e - s <= 250 and e - s >= 240
    assert (s == 0 or text[s - 1] == " ") and (e == len(text) or text[e] == " ")
    assert sample_window("short text", 250, np.random.default_rng(0)) == (0, 10)


def test_proportional_allocation_follows_document_length(tmp_path):
    docs = {"long.txt": "word " * 2000, "short.txt": "word " * 100}
    llm = ScriptedLLM([reply("What is this?", "word word word word word")] * 60, tmp_path / "l.sqlite")
    res = generate_questions(docs, 60, llm, None, window_chars=200, allocation="proportional", **COPY)
    share = (res.candidates["document"] == "long.txt").mean()
    assert 0.85 <= share <= 1.0  # expected 2000/2100 = 0.95


def test_messages_name_the_document_and_hold_the_passage():
    msgs = build_messages("notes.md", "Some passage.", ["Q1?"])
    assert "'notes.md'" in msgs[0]["content"] and "JSON" in msgs[0]["content"]
    assert msgs[1]["content"].endswith("<<<\nSome passage.\n>>>")
    assert "- Q1?" in msgs[1]["content"]


def test_cli_generate_writes_the_file_and_reports_the_drops(tmp_path, monkeypatch, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    llm = ScriptedLLM(SCRIPT, tmp_path / "llm.sqlite")
    monkeypatch.setattr(qg, "llm_for_generation", lambda **kw: llm)
    out = tmp_path / "q.jsonl"
    code = cli.main(["questions", "generate", "--docs", str(docs), "-n", "9", "--out", str(out),
                     "--window-chars", "200", "--no-dedup", "--quiet", "--content-repairs", "0",
                     "--excerpt-mode", "copy", "--previous", "3"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "4 of 9 candidate questions kept" in printed.out
    assert "LLM calls: 10, from cache: 0" in printed.out
    assert len(out.read_text().splitlines()) == 4
    assert cli.main(["questions", "validate", "--docs", str(docs), "--questions", str(out)]) == 0
    assert cli.main(["questions", "generate", "--docs", str(docs), "-n", "0"]) == 1
    assert "-n must be" in capsys.readouterr().err


# -- rank agreement -------------------------------------------------------------------------


def _scores(means, n=4):
    """n questions whose per-cell mean is exactly ``means`` (spread +-0.01 around it)."""
    rows = [[m + (0.01 if i % 2 else -0.01) for m in means] for i in range(n)]
    return pd.DataFrame(rows, columns=[f"c{j}" for j in range(len(means))])


def test_rank_agreement_hand_values():
    a = _scores([0.1, 0.2, 0.3])
    b = _scores([0.1, 0.3, 0.2])
    res = rank_agreement(a, b, n_resamples=200)
    assert res.spearman == pytest.approx(0.5)  # 1 - 6 * 2 / (3 * 8)
    assert res.kendall == pytest.approx(1 / 3)  # 2 concordant, 1 discordant pair
    same = rank_agreement(a, _scores([1.0, 2.0, 3.0]), n_resamples=200)
    assert same.spearman == 1.0 and same.kendall == 1.0
    assert same.spearman_ci == (1.0, 1.0)  # resampling cannot reorder means 0.1 apart by +-0.01 noise
    assert "Spearman rho = 1.00" in same.describe()


def test_rank_agreement_matches_scipy_with_ties():
    rng = np.random.default_rng(7)
    a = pd.DataFrame(rng.integers(0, 3, size=(30, 12)) / 2.0, columns=[f"c{j}" for j in range(12)])
    b = pd.DataFrame(rng.integers(0, 3, size=(25, 12)) / 2.0, columns=[f"c{j}" for j in range(12)])
    b = b[list(reversed(b.columns))]  # column order does not matter, names do
    res = rank_agreement(a, b, n_resamples=300, seed=1)
    ma, mb = a.mean().to_numpy(), b[a.columns].mean().to_numpy()
    assert res.spearman == pytest.approx(spearmanr(ma, mb).statistic)
    assert res.kendall == pytest.approx(kendalltau(ma, mb).statistic)  # tau-b
    assert res.spearman_ci[0] <= res.spearman_ci[1]
    again = rank_agreement(a, b, n_resamples=300, seed=1)
    assert again.spearman_ci == res.spearman_ci


def test_rank_agreement_bad_input():
    a = _scores([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="share 2 cell"):
        rank_agreement(a, a[["c0", "c1"]])
    with pytest.raises(ValueError, match="at least 2 are needed"):
        rank_agreement(a.head(1), a)
    with pytest.raises(ValueError, match="must be a DataFrame"):
        rank_agreement([[1, 2, 3]], a)


def test_content_repairs_send_the_problem_back_and_keep_the_repaired_candidate(tmp_path):
    script = [
        # 0 (a.txt): says "the passage", then names its subject after the repair -> kept
        reply("What does the passage say about the Elbe's source?", ELBE_RISE),
        reply("Where does the river Elbe rise?", ELBE_RISE),
        # 1 (b.txt): a paraphrase, then a paraphrase again, then the real sentence -> kept (2 repairs)
        reply("How does basalt form?", "Basalt forms when lava cools quickly."),
        reply("How does basalt form?", "Basalt comes from lava."),
        reply("How does basalt form?",
              "It forms from the rapid cooling of lava rich in magnesium and iron."),
        # 2 (a.txt): never copies the sentence -> excerpt_not_found after 1 + 3 replies (the JSON repair
        # and the two content repairs share one budget of max_repairs + content_repairs re-asks)
        reply("How long is the Elbe?", "The Elbe is long."),
        reply("How long is the Elbe?", "The Elbe is very long."),
        reply("How long is the Elbe?", "The Elbe is quite long."),
        reply("How long is the Elbe?", "The Elbe is 1094 km long."),
    ]
    result, llm = run(tmp_path, script, n=3, embedder=None, content_repairs=2)
    assert list(result.candidates["reason"]) == [None, None, "excerpt_not_found"]
    assert result.candidates.loc[2, "detail"] == "not in the passage: 'The Elbe is 1094 km long.'"
    assert len(llm.requests) == 9
    # The repair request holds the model's reply and the problem, stated.
    repair = llm.requests[1]["messages"]
    assert repair[-2]["role"] == "assistant" and "the passage say" in repair[-2]["content"]
    assert "The question says 'the passage'" in repair[-1]["content"]
    assert "Excerpt 1 is not in the passage character for character" in llm.requests[3]["messages"][-1]["content"]
    assert [q["question"] for q in result.questions] == ["Where does the river Elbe rise?", "How does basalt form?"]
    assert result.settings["content_repairs"] == 2
    # A candidate's first request is the one a run without repairs sends (while the questions accepted
    # before it for its document are the same): its cached reply is reused, so the same passages can be
    # measured with and without repairs.
    before, llm0 = run(tmp_path, [], n=2, embedder=None, content_repairs=0)
    assert llm0.requests == []  # both first replies come from the cache
    assert list(before.candidates["reason"]) == ["refers_to_passage", "excerpt_not_found"]


def test_an_excerpt_crossing_the_window_edge_is_found_with_a_margin():
    text = "Alpha beta. The river Elbe rises in the Krkonose mountains. Gamma delta."
    ws, we = text.index("river"), text.index("Gamma")  # the window cut "The " off the sentence
    sentence = "The river Elbe rises in the Krkonose mountains."
    no_margin = qg._Search(text, ws, we, ws, we)
    assert no_margin.find(sentence) is None
    wide = qg._Search(text, ws, we, max(0, ws - 20), min(len(text), we + 20))
    assert wide.find(sentence) == (text.index(sentence), text.index(sentence) + len(sentence))
    # a match only in the margin, not overlapping the passage, does not count
    assert wide.find("Alpha beta.") is None
    assert wide.find("") is None


def test_excerpt_margin_is_recorded_and_checked(tmp_path):
    result, _ = run(tmp_path, SCRIPT, excerpt_margin_chars=40)
    assert result.settings["excerpt_margin_chars"] == 40
    # the documents are shorter than the window: the margin changes nothing here
    assert list(result.candidates["reason"])[:3] == [None, "excerpt_not_found", "malformed_json"]
    with pytest.raises(ValueError, match="excerpt_margin_chars"):
        run(tmp_path, [], n=1, excerpt_margin_chars=-1)
