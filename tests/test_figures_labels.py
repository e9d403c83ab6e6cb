"""Point labels that do not overlap (chunkwise.figures.label_points), on chapter 3's crowded panel."""

import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from chunkwise.figures import label_points  # noqa: E402

# Chapter 3's questanswer_3docs panel of the published run: three methods at one point, others close.
X = [43.5, 43.5, 45.2, 42.0, 47.0, 52.8, 49.6, 51.4, 47.1, 45.6, 43.6]
Y = [6.4, 6.4, 6.4, 31.4, 41.0, 23.2, 6.5, 3.3, 3.8, 0.0, 6.4]
NAMES = ["Collapsed Tree", "Tree Traversal", "DPR", "BM25", "Graph-RAG", "PG-RAG", "PG", "PG w. KPs",
         "KGP-LLaMA", "Hybrid", "w/o RAG"]


def test_coincident_points_share_a_label_and_no_two_labels_overlap():
    fig, ax = plt.subplots(figsize=(4.2, 4))
    ax.scatter(X, Y)
    texts = label_points(ax, X, Y, NAMES)
    # within 8 pixels at this size: the three at (43.5, 6.4) and w/o RAG at (43.6, 6.4)
    assert [t.get_text() for t in texts][0] == "Collapsed Tree\nTree Traversal\nw/o RAG"
    assert len(texts) == len(NAMES) - 2 and "DPR" in [t.get_text() for t in texts]
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in texts]
    overlapping = [(texts[i].get_text(), texts[j].get_text())
                   for i, j in itertools.combinations(range(len(boxes)), 2) if boxes[i].overlaps(boxes[j])]
    assert overlapping == []
    plt.close(fig)


def test_a_label_per_point_is_required():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="one label per point: got 2 x, 2 y, 1 labels"):
        label_points(ax, [1, 2], [1, 2], ["a"])
    plt.close(fig)
