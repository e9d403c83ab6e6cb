"""The findings page: claims registry, results files, verdicts and the generated page."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chunkwise import findings as fd
from chunkwise.crud import experiment as crud

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "data" / "findings" / "claims.csv"


def claim(**kw) -> fd.Claim:
    base = dict(claim_id="c1", source="guide", location="table", group="", claim="a claim", published="88.1",
                unit="%", kind="number", tolerance=2.0, chapter="ch", key="k", cross_check="", cause="", needs="")
    base.update(kw)
    return fd.Claim(**base)


# ----------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    ("ours", "expected", "delta"),
    [
        (90.1, "reproduced", "+2.0"),      # exactly at the tolerance (float 90.1 - 88.1 = 2.0000000000000x)
        (86.1, "reproduced", "-2.0"),      # the other edge
        (90.11, "not reproduced", "+2.0"),  # just outside: the delta rounds to the published decimals
        (88.1, "reproduced", "+0.0"),
    ],
)
def test_number_verdict_at_the_tolerance_edges(ours, expected, delta):
    v = fd.verdict(claim(cause="ours {k}"), {"k": ours})
    assert v["verdict"] == expected
    assert v["delta"] == delta
    assert v["detail"] == ("" if expected == "reproduced" else f"ours {ours}")


def test_zero_tolerance_counts_must_agree():
    c = claim(published="2", tolerance=0.0, unit="chunks", cause="we get {k} chunks with {other}")
    assert fd.verdict(c, {"k": 2, "other": "x"})["verdict"] == "reproduced"
    v = fd.verdict(c, {"k": 3, "other": "buffer 1"})
    assert (v["verdict"], v["ours"], v["delta"], v["detail"]) == ("not reproduced", "3", "+1", "we get 3 chunks with buffer 1")


def test_exact_claims_compare_text_ignoring_case_and_spacing():
    c = claim(kind="exact", published="Hotel stays are | capped at the city rate", tolerance=None, cause="ours: {k}")
    assert fd.verdict(c, {"k": "hotel stays are |  capped at the city rate"})["verdict"] == "reproduced"
    v = fd.verdict(c, {"k": "Hotel stays | are capped"})
    assert v["verdict"] == "not reproduced" and v["detail"] == "ours: Hotel stays | are capped"
    assert fd.verdict(claim(kind="exact", published="yes", tolerance=None), {"k": True})["verdict"] == "reproduced"


def test_missing_value_is_not_reproduced_and_says_so():
    v = fd.verdict(claim(cause="on {n} questions"), {"k": None, "n": 10})
    assert v["verdict"] == "not reproduced" and v["ours"] == "-"
    assert v["detail"] == "the run gave no value; on 10 questions"


def test_untestable_fills_needs_from_the_run_or_says_not_measured():
    c = claim(kind="untestable", key="", tolerance=None, needs="the label; {a} of {b} settings match")
    assert fd.verdict(c, {"a": 15, "b": 104}) == {
        "ours": "-", "delta": "-", "verdict": "not testable here", "detail": "the label; 15 of 104 settings match"}
    assert "(not measured in this build)" in fd.verdict(c, None)["detail"]
    plain = claim(kind="untestable", key="", chapter="", tolerance=None, needs="an OpenAI key")
    assert fd.verdict(plain, None)["detail"] == "an OpenAI key"


def test_chapter_not_run_and_missing_keys():
    assert fd.verdict(claim(), None)["verdict"] == "not run in this build"
    with pytest.raises(fd.FindingsError, match="lacks k"):
        fd.verdict(claim(), {"other": 1})
    claims = [claim(), claim(claim_id="c2", key="j", cause="{n}"), claim(claim_id="c3", chapter="absent")]
    assert fd.missing_keys(claims, {"ch": {"k": 1}}) == {"ch": ["j", "n"]}
    assert fd.missing_keys(claims, {"ch": {"k": 1, "j": 2, "n": 3}}) == {}


# ------------------------------------------------------------------------ results files


def test_write_results_stores_plain_json(tmp_path, monkeypatch):
    path = fd.write_results("01_x", {"a": np.int64(3), "b": np.float64("nan"), "c": "5, 3, 2", "d": None,
                                     "e": True, "f": 0.5}, out_dir=tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert path == tmp_path / "01_x.json" and data["chapter"] == "01_x"
    assert data["results"] == {"a": 3, "b": None, "c": "5, 3, 2", "d": None, "e": True, "f": 0.5}
    assert fd.load_results(tmp_path) == {"01_x": data["results"]}
    monkeypatch.setenv(fd.RESULTS_ENV, str(tmp_path / "env"))
    assert fd.write_results("02_y", {"a": 1}).parent == tmp_path / "env"


@pytest.mark.parametrize("bad", [{"a": [1, 2]}, {"": 1}, {"a": {"b": 1}}])
def test_write_results_rejects_what_json_would_garble(tmp_path, bad):
    with pytest.raises(fd.FindingsError):
        fd.write_results("ch", bad, out_dir=tmp_path)
    with pytest.raises(fd.FindingsError, match="notebook stem"):
        fd.write_results("a/b", {"a": 1}, out_dir=tmp_path)


# --------------------------------------------------------------------------- registry


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(r for r in fh if not r.startswith("#")))


def test_registry_published_values_match_the_reference_tables():
    claims = {c.claim_id: c for c in fd.load_claims(CLAIMS)}
    article = {r["id"]: r for r in _read(ROOT / "data" / "handbook" / "article_results.csv")}
    for rid, a in article.items():
        assert claims[f"guide-{rid}-chunks"].published == a["chunks"]
    assert claims["guide-table-4-shifts"].published == article["table-4"]["shifts_found"]
    pg = {r["method"]: r for r in _read(ROOT / "data" / "crud" / "pgrag_table1_crud_qa.csv")}
    assert claims["pgrag-t1-doc1-pg-rag-f1qe"].published == pg["PG-RAG"]["doc1_f1qe"] == "79.66"
    assert claims["pgrag-t1-doc3-w-o-rag-bleu"].published == pg["w/o RAG"]["doc3_bleu"]
    t1 = [c for c in claims.values() if c.claim_id.startswith("pgrag-t1-")]
    assert len(t1) == 12 * 3 * 4  # every cell of Table 1
    for c in t1:
        doc, method, metric = c.key.split("_", 1)[0], c.claim, c.key.rsplit("_", 1)[1]
        assert c.published == pg[method][f"{doc}_{metric}"], c.claim_id
    report = _read(ROOT / "data" / "chroma" / "chroma_report_results.csv")
    minilm = [c for c in claims.values() if c.chapter == "02_chroma_recall" and c.key.startswith("minilm_")]
    te3 = [c for c in claims.values() if c.claim_id.startswith("chroma-te3-")]
    assert len(minilm) == 4 * sum(r["embedding_model"] == "all-MiniLM-L6-v2" for r in report)
    assert len(te3) == sum(r["embedding_model"] == "text-embedding-3-large" for r in report)
    assert all(c.kind == "untestable" and "text-embedding-3-large" in c.needs for c in te3)
    assert claims["chroma-minilm-recursive-250-125-recall"].published == "78.7"


def test_registry_names_only_registered_chapters_and_the_headline_claims():
    from chunkwise.book import NOTEBOOKS

    claims = fd.load_claims(CLAIMS)
    stems = {n[:-6] for n in NOTEBOOKS}
    assert {c.chapter for c in claims if c.chapter} <= stems
    ids = {c.claim_id for c in claims}
    for needed in ("guide-percentile-counts", "guide-defaults-shifts", "guide-am-split", "guide-fixed-60-cut",
                   "chroma-recall-spread", "pgrag-compression-ratio", "pgrag-abstract-overall-1doc"):
        assert needed in ids


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind\nx", "lacks column"),
        (",".join(fd.CLAIM_COLUMNS) + "\nc,guide,l,g,c,abc,%,number,1,ch,k,,,\n", "numeric"),
        (",".join(fd.CLAIM_COLUMNS) + "\nc,guide,l,g,c,1,%,number,-1,ch,k,,,\n", ">= 0"),
        (",".join(fd.CLAIM_COLUMNS) + "\nc,guide,l,g,c,1,%,guess,1,ch,k,,,\n", "kind"),
        (",".join(fd.CLAIM_COLUMNS) + "\nc,guide,l,g,c,1,%,untestable,,,,,,\n", "needed"),
        (",".join(fd.CLAIM_COLUMNS) + "\nc,guide,l,g,c,1,%,number,1,,,,,\n", "chapter and results key"),
    ],
)
def test_malformed_registry_is_rejected(tmp_path, text, message):
    path = tmp_path / "claims.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(fd.FindingsError, match=message):
        fd.load_claims(path)


# ----------------------------------------------------------------------- cross-checks


def test_pgrag_abstract_metrics_hand_checked():
    cols = [f"doc{d}_{m}" for d in (1, 2, 3) for m in ("bleu", "rougeL", "bertscore", "f1qe")]
    table = {
        "PG-RAG": dict.fromkeys(cols, 60.0) | {"doc1_bleu": 55.0},
        "KGP-LLaMA": dict.fromkeys(cols, 50.0),
        "BM25": dict.fromkeys(cols, 40.0) | {"doc2_bleu": 55.0},
        "PG": dict.fromkeys(cols, 99.0),  # a PG-RAG variant is never the "best baseline"
    }
    got = fd.pgrag_abstract_metrics(table)
    assert got["abstract_bleu_1doc"] == pytest.approx(10.0)           # 55 / 50
    assert got["abstract_f1qe_1doc"] == pytest.approx(20.0)           # 60 / 50
    assert got["abstract_overall_1doc"] == pytest.approx(17.5)        # (10 + 20 + 20 + 20) / 4
    # doc2: BLEU's best baseline is BM25's 55 -> 9.0909; others 20 -> mean 17.727; doc3: 20
    assert got["abstract_multi_min_avg"] == pytest.approx((100 * (60 / 55 - 1) + 60) / 4)
    assert got["abstract_multi_bleu"] == pytest.approx((100 * (60 / 55 - 1) + 20) / 2)
    assert got["abstract_multi_f1qe"] == pytest.approx(20.0)
    with pytest.raises(fd.FindingsError, match="KGP-LLaMA"):
        fd.pgrag_abstract_metrics({"PG-RAG": {}})


def test_the_published_table_disagrees_with_the_abstract():
    rows = _read(ROOT / "data" / "crud" / "pgrag_table1_crud_qa.csv")
    got = fd.pgrag_abstract_metrics({r["method"]: r for r in rows})
    # 55.73 / 41.47 - 1: BLEU on one document, by hand
    assert got["abstract_bleu_1doc"] == pytest.approx(34.386, abs=1e-3)
    assert got["abstract_f1qe_1doc"] == pytest.approx(100 * (79.66 / 63.81 - 1))
    spread = fd.chroma_recall_spread(_read(ROOT / "data" / "chroma" / "chroma_report_results.csv"))
    assert spread["recall_spread_text_embedding_3_large"] == pytest.approx(91.9 - 83.6)
    assert spread["recall_spread_all_minilm_l6_v2"] == pytest.approx(82.4 - 75.2)
    assert spread["recall_spread_max"] == pytest.approx(91.9 - 83.6)


def test_crud_findings_results_cover_every_chapter3_claim():
    # A synthetic chapter-3 table: two methods on one task; everything else must still be keyed (as None).
    table = pd.DataFrame({"bleu_crud": [41.47, 55.73], "rouge_l": [1.0, 2.0], "embedding_cosine": [1.0, 2.0],
                          "quest_avg_f1": [63.81, float("nan")], "n_items": [4, 4]}, index=["kgp", "pg_rag"])
    got = crud.findings_results({"questanswer_1doc": table}, {"compression_ratio": 1.5}, n_pool=27, generator="m@sha256:ab")
    assert got["doc1_pg_rag_bleu"] == 55.73 and got["doc1_kgp_llama_f1qe"] == 63.81
    assert got["doc1_pg_rag_f1qe"] is None and got["doc2_pg_rag_bleu"] is None
    assert got["n_items_doc1"] == 4 and got["n_items_doc2"] is None and got["compression_ratio"] == 1.5
    assert got["generator"] == "m"
    assert got["abstract_bleu_1doc"] == pytest.approx(34.39, abs=0.01)
    assert got["abstract_f1qe_1doc"] is None  # PG-RAG has no F1 here
    claims = fd.load_claims(CLAIMS)
    # with the ordering question's keys (crud.ordering_result, tested in test_crud.py), nothing is missing
    assert fd.missing_keys(claims, {"03_crud_pgrag": got}) == {"03_crud_pgrag": [
        "pg_rag_vs_best_doc1", "best_baseline_doc1", "pg_rag_vs_best_doc1_ci", "pg_rag_vs_best_doc1_n"]}
    ordering = {"pg_rag_vs_best_doc1": "cannot tell", "pg_rag_vs_best_doc1_ci": "+1.0 [-2.0, +4.0]",
                "best_baseline_doc1": "DPR", "pg_rag_vs_best_doc1_n": 44}
    assert fd.missing_keys(claims, {"03_crud_pgrag": {**got, **ordering}}) == {}


# ---------------------------------------------------------------------------- the page


def _book(tmp_path: Path) -> Path:
    book = tmp_path / "book"
    (book / "generated" / "results").mkdir(parents=True)
    return book


def test_findings_page_from_synthetic_results(tmp_path):
    book = _book(tmp_path)
    reg = tmp_path / "claims.csv"
    with reg.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fd.CLAIM_COLUMNS)
        w.writeheader()
        w.writerow(dict(zip(fd.CLAIM_COLUMNS, ["a", "guide", "row 1", "G", "chunks | with a pipe", "2", "chunks",
                                               "number", "0", "ch1", "n", "", "we get {n}", ""])))
        w.writerow(dict(zip(fd.CLAIM_COLUMNS, ["b", "PG-RAG paper", "Table 1", "T", "BLEU", "55.73", "%", "number",
                                               "2", "ch3", "bleu", "", "{q} questions", ""])))
        w.writerow(dict(zip(fd.CLAIM_COLUMNS, ["c", "Chroma report", "table 1", "", "recall", "85.4", "%",
                                               "untestable", "", "", "", "", "", "an OpenAI key"])))
        w.writerow(dict(zip(fd.CLAIM_COLUMNS, ["d", "guide", "prose", "G", "shifts", "0 of 2", "", "exact", "",
                                               "ch2", "s", "", "", ""])))
    fd.write_results("ch1", {"n": 3}, out_dir=book / "generated" / "results")
    fd.write_results("ch3", {"bleu": 54.0, "q": 10}, out_dir=book / "generated" / "results")
    page = fd.write_findings_page(book, claims_path=reg).read_text(encoding="utf-8")
    # No headline.csv beside this registry: the page starts with every claim and the classes' meanings.
    assert page.startswith("## Every claim\n\n**4 claims checked in this build:** 1 reproduced, 1 not reproduced, "
                           "1 not testable here, 1 not run in this build. The classes:")
    assert "- **not comparable here**: the published number depends on" in page and "(none in this build);" in page
    assert "| chunks \\| with a pipe | row 1 | 2 chunks | 3 chunks | +1 | ±0 chunks | **not reproduced**: we get 3 |" in page
    assert "| BLEU | Table 1 | 55.73 % | 54.00 % | -1.73 | ±2 points | **reproduced** |" in page
    # Groups other than headline and abstract claims fold away under their verdict counts.
    assert ":::{dropdown} T: 1 claim (1 reproduced)" in page
    assert ":::{dropdown} G: 2 claims (1 not reproduced, 1 not run in this build)" in page
    assert "**not testable here**: an OpenAI key" in page
    assert "run `chunkwise run-notebooks --only ch2`" in page
    # The sources in the book's order: guide, Chroma, PG-RAG.
    assert page.index("### The semantic-chunking guide") < page.index("### Chroma's technical report") < page.index(
        "### The PG-RAG paper")
    # The overview counts verdicts per table.
    # columns: the verdict classes this build has (#60: the table fits the text column)
    assert "| source | claims | reproduced | not reproduced | not testable here | not run in this build |" in page
    assert "| guide: G | 2 | 0 | 1 | 0 | 1 |" in page
    assert "| PG-RAG paper: T | 1 | 1 | 0 | 0 | 0 |" in page
    # A results file that lacks a key the registry needs fails the page (and the build).
    fd.write_results("ch3", {"bleu": 54.0}, out_dir=book / "generated" / "results")
    with pytest.raises(fd.FindingsError, match="ch3: q"):
        fd.write_findings_page(book, claims_path=reg)


def test_findings_page_with_the_real_registry_and_no_runs(tmp_path):
    book = _book(tmp_path)
    text = fd.write_findings_page(book).read_text(encoding="utf-8")
    n = len(fd.load_claims(CLAIMS))
    assert f"**{n} claims checked in this build:**" in text
    # The prose claims show what the source's own table implies (computed, not typed).
    assert "11.6 % (the source's table implies 20.8)" in text
    assert "9 points (the source's table implies 8.3)" in text
    # The headline questions open the page, and the intro's copy counts their verdicts: with no
    # chapter run, only the text-embedding-3-large question has a verdict (it needs no run).
    assert text.startswith("## The headline questions")
    heads = (book / fd.HEADLINE_PAGE).read_text(encoding="utf-8")
    assert heads.startswith("**21 headline questions in this build:** 1 not testable here, 20 not run in this build.")
    assert ("| **not testable here** (reproduction) | [chapter 2: text-embedding-3-large]"
            "(/generated/02_chroma_recall.ipynb#text-embedding-3-large) |") in heads
    # with no chapter run, every declared test is "not assessed" and the plan section says so
    assert "| **not run in this build** (not assessed) | [chapter 6: The primary contrast]" in heads
    assert "## The analysis plan and how each verdict survives it" in text
    assert "- **mixed-content**, 2026-12-05: The chapter's headline row was Kamradt" in text


def test_every_chapter_writes_its_results():
    from chunkwise.book import NOTEBOOKS

    for stem in (Path(n).stem for n in NOTEBOOKS):
        nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
        last = "".join(nb["cells"][-1]["source"])
        assert f'write_results("{stem}"' in last
        assert "hide-input" in nb["cells"][-1]["metadata"]["tags"]


def test_whole_published_number_beside_a_measured_fraction():
    # "up to 9" points against 7.2 measured: one decimal, so the delta is not rounded to the tolerance.
    v = fd.verdict(claim(published="9", tolerance=1.5, unit="points"), {"k": 7.2})
    assert (v["ours"], v["delta"], v["verdict"]) == ("7.2", "-1.8", "not reproduced")
    v = fd.verdict(claim(published="9", tolerance=1.5, unit="points"), {"k": 7.5})
    assert (v["delta"], v["verdict"]) == ("-1.5", "reproduced")
    assert not math.isnan(float(v["ours"]))


def test_chroma_results_cover_every_chapter2_claim():
    report = pd.read_csv(ROOT / "data" / "chroma" / "chroma_report_results.csv")
    # Ours: the report's MiniLM rows less one chunker, plus one the report does not have; recall + 1 point.
    mine = report[report.embedding_model == "all-MiniLM-L6-v2"].iloc[1:].copy()
    mine = pd.concat([mine, pd.DataFrame([{"chunker": "Kamradt", "size_tokens": None, "overlap_tokens": 0,
                                           "recall_mean": 70.0, "precision_mean": 1.0, "precision_omega_mean": 2.0,
                                           "iou_mean": 1.0}])])
    mine["recall_mean"] = mine["recall_mean"] + np.where(mine["chunker"] == "Kamradt", 0.0, 1.0)
    got = fd.chroma_results(mine, report, "all-MiniLM-L6-v2", n_questions=30)
    assert got["minilm_recursive_250_125_recall"] is None  # the row we left out
    assert got["minilm_tokentext_250_125_recall"] == pytest.approx(83.4)
    assert got["minilm_cluster_200_0_iou"] == pytest.approx(7.2)
    assert got["recall_spread_minilm"] == pytest.approx(83.4 - 70.0)
    assert got["n_chunkers"] == 8 and got["n_questions"] == 30
    # like for like: the 7 of our rows the report has (Kamradt left out), each 1 point up
    theirs = report[report.embedding_model == "all-MiniLM-L6-v2"]["recall_mean"]
    kept = theirs.iloc[1:] + 1.0
    assert got["recall_spread_minilm_report_rows"] == pytest.approx(kept.max() - kept.min())
    assert got["n_chunkers_report_rows"] == 7
    assert got["report_recall_spread_minilm"] == pytest.approx(theirs.max() - theirs.min()) == pytest.approx(7.2)
    k_keys = {"k_winner_changes": "no", "k_winner_small": "a", "k_winner_large": "a", "k_large": 20,
              "k_winner_gap_ci": "0"}  # chroma.k_winner_result (tested in test_grid.py)
    from chunkwise.experiments import chroma as ch

    llm_keys = ch.llm_chunker_result(None, None, "a local model")  # tested in test_grid.py
    assert fd.missing_keys(fd.load_claims(CLAIMS), {"02_chroma_recall": {**got, **k_keys, **llm_keys}}) == {}
    assert fd.missing_keys(fd.load_claims(CLAIMS), {"02_chroma_recall": {**got, **k_keys}}) != {}
    with pytest.raises(fd.FindingsError, match="recall_mean"):
        fd.chroma_results(mine.drop(columns=["recall_mean"]), report, "all-MiniLM-L6-v2")


def test_build_book_refuses_a_results_file_that_lacks_a_registry_claim(tmp_path, capsys):
    from chunkwise import cli

    book = tmp_path / "book"
    (book / "generated" / "results").mkdir(parents=True)
    for src in [*(ROOT / "book").glob("*.md"), *(ROOT / "book").glob("*.yml"), ROOT / "book" / "references.bib"]:
        (book / src.name).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    from chunkwise.book import NOTEBOOKS

    for name in NOTEBOOKS:  # every chapter of the real table of contents
        (book / "generated" / name).write_text("{}", encoding="utf-8")  # only has to exist
    fd.write_results("01_handbook_boundaries", {"pct_counts": "5, 3, 2"}, out_dir=book / "generated" / "results")
    assert cli.main(["build-book", "--book", str(book)]) == 1
    err = capsys.readouterr().err
    assert "could not write the book's findings page" in err and "01_handbook_boundaries: pct_cases" in err
    assert not (book / "_build").exists()  # refused before Sphinx ran


def test_handbook_findings_results_from_a_synthetic_sweep():
    from chunkwise.experiments import handbook as hb

    texts = hb.load_handbook()
    rows = []
    for text in ("handbook", "control"):
        for b in (0, 1):
            for p, c in ((80, 5), (90, 3), (95, 2)):
                # Buffer 1 on the control text breaks the pattern: 4 chunks at the 80th percentile.
                chunks = 4 if (text, b, p) == ("control", 1, 80) else c
                bounds = [5, 8] if (text, b, p) == ("handbook", 1, 95) else []  # 5 is real, 8 is in expenses
                rows.append({"text": text, "buffer_size": b, "threshold": "percentile", "amount": float(p),
                             "min_chunk_size": None, "chunks": chunks, "boundaries": bounds})
    table = pd.DataFrame(rows)
    comparison = pd.DataFrame([
        {"id": "table-1", "delta_chunks": 0.0, "ours_chunks": 2, "ours_shifts_found": "0 of 2",
         "ours_extra_splits": 1, "n_with_outcome": 3, "n_settings": 12},
        {"id": "table-2", "delta_chunks": None, "ours_chunks": None, "ours_shifts_found": None,
         "ours_extra_splits": None, "n_with_outcome": 0, "n_settings": 12},
    ])
    got = hb.findings_results(table, comparison, texts)
    assert got["table_1_chunks"] == 2 and got["table_1_shifts_found"] == "0 of 2"
    assert got["table_2_chunks"] is None and got["table_2_n_settings"] == 12
    assert got["defaults_extra_break_topics"] == "travel expenses"  # sentence 8 lies in topic 2 (6-11)
    assert got["pct_cases"] == 4
    assert got["pct_counts"] == "control b0: 5, 3, 2; control b1: 4, 3, 2; handbook b0: 5, 3, 2; handbook b1: 5, 3, 2"
    assert got["bedrock_chunks"] == 11  # 100 gaps, rank 0.9 * 99 = 89.1: 100 - 89 = 11
    assert got["am_split"] == "yes" and got["robust_sentences"] == 18
    assert got["hotel_cut"] == "Hotel stays are | capped at the city rate"
    # Without the 95th percentile in the sweep the claim cannot be checked: None, not a wrong count.
    assert hb.findings_results(table[table.amount != 95], comparison, texts)["pct_counts"] is None


def test_not_comparable_is_kept_apart_from_not_reproduced_and_shows_its_reason():
    c = claim(published="55.73", cause="ours {k}", not_comparable="generator {gen}, pool {pool} articles")
    v = fd.verdict(c, {"k": 30.0, "gen": "Qwen 1.5B", "pool": 103})
    assert (v["verdict"], v["ours"], v["delta"]) == ("not comparable here", "30.00", "-25.73")
    assert v["detail"] == "generator Qwen 1.5B, pool 103 articles"
    # Within the tolerance by chance: still not comparable (agreement would be luck, not evidence).
    assert fd.verdict(c, {"k": 55.0, "gen": "g", "pool": 1})["verdict"] == "not comparable here"
    # The reason's fields are required results keys.
    assert fd.required_keys(c) == ["k", "gen", "pool"]


def test_a_direction_claim_whose_interval_includes_zero_is_inconclusive():
    c = claim(kind="exact", published="semantic ahead", tolerance=None, cause="gap {k_ci}")
    assert fd.verdict(c, {"k": "semantic ahead", "k_ci": "+3 [+1, +5]"})["verdict"] == "reproduced"
    assert fd.verdict(c, {"k": "fixed ahead", "k_ci": "-3 [-5, -1]"})["verdict"] == "not reproduced"
    v = fd.verdict(c, {"k": "cannot tell", "k_ci": "-1 [-5, +3]"})
    assert (v["verdict"], v["detail"]) == ("inconclusive", "gap -1 [-5, +3]")
    # chapter 6's word for an interval through 0 (its real-text claim: fixed ahead as published)
    c6 = claim(kind="exact", published="fixed ahead", tolerance=None, cause="gap {k_ci}")
    v = fd.verdict(c6, {"k": "no difference shown", "k_ci": "-1.2 [-3.3, +0.9]"})
    assert (v["verdict"], v["detail"]) == ("inconclusive", "gap -1.2 [-3.3, +0.9]")
    assert fd.verdict(c6, {"k": "semantic ahead", "k_ci": "+2 [+1, +3]"})["verdict"] == "not reproduced"


def test_headlines_combine_their_claims_and_link_to_the_section(tmp_path):
    claims = [claim(claim_id="a-1", chapter="01_x", key="k1", cause="c1 {k1}"),
              claim(claim_id="a-2", chapter="01_x", key="k2"),
              claim(claim_id="b", chapter="03_y", key="k3", not_comparable="other generator")]
    reg = tmp_path / "headline.csv"
    reg.write_text(
        ",".join(fd.HEADLINE_COLUMNS) + "\n"
        'h1,Does A hold?,guide,88.1%,a-*,01_x,"Beside the article: row 1"\n'
        "h2,Does B hold?,PG-RAG paper,55.73,b,03_y,Every method\n"
        "h3,Only a-2?,guide,88.1,a-2,01_x,\n", encoding="utf-8")
    heads = fd.load_headlines(reg, claims)
    assert heads[0].claims == ("a-*",)
    rows = fd.evaluate(claims, {"01_x": {"k1": 88.0, "k2": 95.0}, "03_y": {"k3": 10.0}})
    got = {h["headline_id"]: h for h in fd.headline_rows(heads, rows)}
    assert (got["h1"]["verdict"], got["h1"]["found"]) == ("mixed", "1 reproduced; 1 not reproduced of 2 claims")
    assert got["h1"]["link"] == ("[chapter 1: Beside the article: row 1]"
                                 "(/generated/01_x.ipynb#beside-the-article-row-1)")
    assert (got["h2"]["verdict"], got["h2"]["found"]) == ("not comparable here", "10.0 % (other generator)")
    assert (got["h3"]["verdict"], got["h3"]["found"]) == ("not reproduced", "95.0 %")
    assert got["h3"]["link"] == "[chapter 1](/generated/01_x.ipynb)"
    page = fd.findings_markdown(rows, list(got.values()))
    assert page.startswith("## The headline questions")
    assert "| Does B hold? | 55.73 (PG-RAG paper) | 10.0 % (other generator) | **not comparable here** |" in page
    # a chapter whose published run is older than its source: a warning first, its rows marked
    marked = fd.findings_markdown(rows, list(got.values()), stale={"03_y": ["changed since: src/x.py"], "01_x": []})
    assert marked.startswith("```{warning}\nThe published run of chapter 3 is older than its source")
    assert ("| Does B hold? | 55.73 (PG-RAG paper) | 10.0 % (other generator) | **not comparable here**; "
            "*run older than its source* |") in marked
    assert "| Does A hold? |" in marked and marked.count("*run older than its source*") == 1  # headline h2
    assert marked.count("*The claims of chapter 3 below come from a run older than its source.*") == 1
    # A pattern that matches no claim is an error naming the row.
    reg.write_text(",".join(fd.HEADLINE_COLUMNS) + "\nh1,Q?,guide,1,zzz-*,01_x,\n", encoding="utf-8")
    with pytest.raises(fd.FindingsError, match="zzz-\\* match no claim"):
        fd.load_headlines(reg, claims)


def test_the_real_headline_registry_names_only_registered_claims():
    heads = fd.load_headlines(CLAIMS.with_name("headline.csv"), fd.load_claims(CLAIMS))
    assert 15 <= len(heads) <= 22
    assert {h.chapter for h in heads} >= {
        "01_handbook_boundaries", "02_chroma_recall", "03_crud_pgrag", "03b_crud_chunk_size", "04_your_own_data",
        "05_strategies", "06_stitched_vs_real", "07_what_matters"}


def test_a_profile_run_is_named_and_its_differences_are_not_comparable(tmp_path):
    """issue 43: the build's first line names its profile; a claim whose chapter ran under it is
    'not comparable here (profile)', never 'not reproduced'."""
    import json

    book = _book(tmp_path)
    reg = tmp_path / "claims.csv"
    with reg.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fd.CLAIM_COLUMNS)
        w.writeheader()
        w.writerow(dict(zip(fd.CLAIM_COLUMNS, ["a", "Chroma report", "t1", "G", "recall", "85.4", "%", "number",
                                               "2", "ch2", "r", "", "we get {r}", ""])))
        w.writerow(dict(zip(fd.CLAIM_COLUMNS, ["b", "guide", "p", "G", "shifts", "2", "", "number", "0", "ch1",
                                               "n", "", "", ""])))
    results = book / "generated" / "results"
    fd.write_results("ch1", {"n": 2}, out_dir=results)
    fd.write_results("ch2", {"r": 70.0}, out_dir=results)
    # no run records: nothing is known about the parameters
    fd.write_findings_page(book, claims_path=reg)
    assert "Chapters run outside `chunkwise run-notebooks`" in (book / fd.BUILD_LINE_PAGE).read_text()
    (results / "runs").mkdir()
    (results / "runs" / "ch1.json").write_text(json.dumps({"chapter": "ch1", "parameters": {}, "origin": {}}))
    (results / "runs" / "ch2.json").write_text(json.dumps({
        "chapter": "ch2", "parameters": {"corpora": ["a", "b"], "n_resamples": 2000},
        "origin": {"corpora": "profile ci", "n_resamples": "profile ci"}}))
    page = fd.write_findings_page(book, claims_path=reg).read_text(encoding="utf-8")
    line = (book / fd.BUILD_LINE_PAGE).read_text(encoding="utf-8")
    assert line.startswith("**This build used the `ci` parameter profile** (ch2: corpora, n_resamples)")
    assert "**not comparable here (profile)**: ch2 ran with the ci profile (corpora, n_resamples), not its " \
           "defaults; measured: we get 70.0" in page
    assert "**not reproduced**: we get" not in page and "| shifts | p | 2 | 2 | +0 | ±0 | **reproduced** |" in page
    # at the defaults every claim is judged as before, and the line says it is the published experiment
    (results / "runs" / "ch2.json").write_text(json.dumps({"chapter": "ch2", "parameters": {}, "origin": {}}))
    page = fd.write_findings_page(book, claims_path=reg).read_text(encoding="utf-8")
    assert (book / fd.BUILD_LINE_PAGE).read_text() == (
        "**This build ran every chapter at the defaults: the published experiment.**\n")
    assert "**not reproduced**: we get 70.0" in page


def test_the_build_line_names_chapters_the_build_does_not_hold():
    from chunkwise.findings import build_line

    records = {"a": {"chapter": "a", "parameters": {}, "origin": {}}}
    line = build_line(["a"], records, expected=["a", "b", "c"])
    assert line.startswith("**This build ran its chapters at the defaults: the published experiment.**")
    assert "**Not in this build: b, c**" in line
    assert build_line(["a"], records, expected=["a"]).startswith("**This build ran every chapter at the defaults")


def test_a_build_of_the_published_run_names_exactly_the_chapters_it_lacks(tmp_path):
    from chunkwise.findings import write_findings_page

    repo = Path(__file__).resolve().parents[1]
    published = repo / "book" / "published"
    held = {p.stem for p in published.glob("*.ipynb")}
    write_findings_page(tmp_path / "book", claims_path=repo / "data" / "findings" / "claims.csv",
                        results_folder=published / "results")
    line = (tmp_path / "book" / "generated" / "build.md").read_text(encoding="utf-8")
    from chunkwise.book import NOTEBOOKS

    lacking = sorted({Path(n).stem for n in NOTEBOOKS} - held)
    if lacking:  # the OpenAI rows' claims belong to no chapter and must not show up as an empty name
        names = line.split("**Not in this build: ")[1].split("**")[0].split(", ")
        assert names == lacking and all(names)
    else:
        assert "Not in this build" not in line


def _row(claim, verdict, detail="", delta="+0.1", group="Table 1: BLEU", source="PG-RAG paper"):
    return {"claim_id": claim, "claim": claim, "source": source, "group": group, "location": "Table 1",
            "published": "1.0", "unit": "%", "kind": "number", "ours": "1.1", "delta": delta,
            "tolerance": 0.5, "verdict": verdict, "detail": detail}


def test_findings_page_states_a_shared_reason_once_and_reads_as_prose():
    """#60: one reason per group, not per row; no "-0.0"; "1 claim", not "1 claims"."""
    reason = "the absolute score depends on the generator (a 1.5B local model, not GPT-3.5)"
    rows = [_row(f"c{i}", "not comparable here", reason) for i in range(5)]
    rows += [_row("d0", "reproduced", delta="-0.0", group="Headline claim", source="guide")]
    page = fd.findings_markdown(rows)
    assert page.count(reason) == 1
    assert f"All 5 claims below are **not comparable here**: {reason}" in page
    assert "| c3 | Table 1 | 1.0 % | 1.1 % | +0.1 | ±0.5 points | **not comparable here** |" in page
    assert "| d0 | Table 1 | 1.0 % | 1.1 % | 0.0 | ±0.5 points | **reproduced** |" in page
    assert "-0.0" not in page
    assert "1 claim, 1 reproduced." in page and "1 claims" not in page
    # a reason shared by some of a group's claims: stated once, its rows point to it
    mixed = rows[:2] + [_row("e0", "not comparable here", "another reason")]
    page = fd.findings_markdown(mixed)
    assert page.count(reason) == 1 and page.count("another reason") == 1
    assert f'2 claims below are **not comparable here** (marked "reason above"): {reason}' in page
    assert "| c1 | Table 1 | 1.0 % | 1.1 % | +0.1 | ±0.5 points | **not comparable here** (reason above) |" in page
    assert "| e0 | Table 1 | 1.0 % | 1.1 % | +0.1 | ±0.5 points | **not comparable here**: another reason |" in page
