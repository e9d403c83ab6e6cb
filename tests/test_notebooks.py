"""Execute chapter 1 the way the book does and check what a reader sees."""

from __future__ import annotations

import nbformat
import pytest

from chunkwise.book import execute_notebook, reader_problems


def _glued(nb) -> dict[str, str]:
    """The values the run glued (myst_nb.glue), by key: Markdown as its text, others as their repr."""
    out = {}
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                data = o["data"]
                out[name] = data.get("application/papermill.record/text/markdown") or data.get(
                    "application/papermill.record/text/plain")
    return out


@pytest.mark.integration
def test_handbook_chapter_runs_with_overridden_parameters_and_keeps_its_figure(tmp_path, monkeypatch):
    # A non-inline backend in the environment must not swallow the figures (it did once, via MPLBACKEND).
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = execute_notebook(
        "01_handbook_boundaries.ipynb",
        {"buffer_sizes": [0, 1], "splitter_mode": "robust", "embedding_cache_dir": str(tmp_path / "cache")},
        out_dir=tmp_path,
        progress_bar=False,
    )
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the distance figure is missing"
    # The chunk-boundary drawing travels inside the page (an iframe's srcdoc), so the static book shows it.
    pages = ["".join(o["data"]["text/html"]) for o in outputs if "text/html" in o.get("data", {})]
    assert any("<iframe" in p and "The handbook text, cut three ways" in p for p in pages), "the drawing is missing"
    text = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    glued = _glued(nb)
    # 2 buffer sizes x 13 thresholds x 2 min sizes = 52 settings on both texts.
    assert "52 settings x 2 texts = 104 chunkings" in text
    # All four article results that name settings are rerun (buffer sizes 0 and 1 cover them); the two
    # rows whose labels are lost are listed by outcome, never matched to one setting. The sentences
    # are glued into the page's Markdown.
    assert "of the 4 article results we can rerun, chunk counts agree in 4" in glued["ch1_article_agreement"]
    assert glued["ch1_lost_rows"].count("the article's label is lost") == 2
    # The answer box is built from this run: its numbers are this run's (52 settings, 2 x 3 x 2 = 12
    # of them percentile), and it says why no interval is given.
    answer = glued["ch1_answer"]
    assert "18-sentence handbook text with 2 real topic shifts" in answer
    assert "LangChain's defaults (`buffer_size=1`, 95th percentile) make 2 chunks and find 0 of 2" in answer
    assert " of the 52 settings of the sweep find every shift" in answer
    assert "in all 12 percentile settings it cuts the control" in answer
    assert "no interval to give" in answer
    # Captions on every figure, every exercise solution executed, every glued key glued.
    assert reader_problems(out) == []
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert len(solutions) >= 2 and all(c.get("outputs") for c in solutions)
    # The chapter's results file lands beside the executed copy and holds every key the claims
    # registry asks of chapter 1 (the findings page fails the build otherwise).
    from chunkwise import findings

    results = findings.load_results(tmp_path / "results")
    assert findings.missing_keys(findings.load_claims(), results) == {}
    got = results["01_handbook_boundaries"]
    assert got["pct_counts"] == "5, 3, 2" and got["pct_cases"] == 4  # 2 texts x buffer sizes 0 and 1
    assert got["am_split"] == "yes" and got["lc_pieces"] == 19 and got["robust_sentences"] == 18
    assert got["hotel_cut"] == "Hotel stays are | capped at the city rate"
    assert got["bedrock_chunks"] == 11 and got["table_2_chunks"] is None
