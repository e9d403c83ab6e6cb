"""chunkwise.labels: the one map from code names to the labels the book's tables show (#60)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from chunkwise.labels import LABELS, label, labelled

SNAKE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$")


def test_every_label_is_readable_and_short():
    for name, text in LABELS.items():
        assert not SNAKE.match(text), (name, text)
        assert len(text) <= 34, (name, text)
    # the raw names issue #60 saw on the published pages
    for raw, want in [("mean_chunk_tokens", "mean tokens"), ("worst_mean", "worst mean"),
                      ("guide_cost", "cost (guide)"), ("doc_f1_any", "document F1 (any)"),
                      ("share_reference_chars_unembedded", "evidence not embedded (%)"),
                      ("quest_avg_f1", "QuestEval F1"), ("n_levels", "levels")]:
        assert label(raw) == want


def test_unknown_names_lose_their_underscores_and_other_values_pass_through():
    assert label("brand_new_column") == "brand new column"
    assert label("recall") == "recall" and label("_private") == "_private"
    assert label(3) == 3 and label(None) is None
    assert label("recall_ci", {"recall_ci": "95% CI"}) == "95% CI"


def test_labelled_relabels_headers_not_cells():
    df = pd.DataFrame({"mean_chunk_tokens": [200.5, 98.0], "recall_ci": ["[1, 2]", "[0, 3]"],
                       "note": ["n_chunks", "x"]},
                      index=pd.Index(["Fixed 200", "state_of_the_union"], name="chunker_label"))
    df.columns.name = "metric_name"
    out = labelled(df)
    assert list(out.columns) == ["mean tokens", "Δ recall 95% CI", "note"]
    assert out.columns.name == "metric name" and out.index.name == "chunker label"
    assert list(out.index) == ["Fixed 200", "State of the Union"]
    assert list(out["note"]) == ["n_chunks", "x"]  # cells untouched
    assert out["mean tokens"].tolist() == [200.5, 98.0]
    assert list(df.columns) == ["mean_chunk_tokens", "recall_ci", "note"]  # the input is not changed
    assert list(labelled(df, index_values=False).index) == ["Fixed 200", "state_of_the_union"]


def test_labelled_relabels_every_level_of_a_multiindex():
    cols = pd.MultiIndex.from_tuples([("recall_mean", "dense"), ("iou_mean", "bm25")], names=["metric", "retriever_name"])
    out = labelled(pd.DataFrame([[1.0, 2.0]], columns=cols))
    assert list(out.columns) == [("recall", "dense"), ("IoU", "bm25")]
    assert list(out.columns.names) == ["metric", "retriever name"]


def test_labelled_rejects_what_is_not_a_frame():
    with pytest.raises(TypeError, match="needs a pandas DataFrame, got list"):
        labelled([1, 2])
