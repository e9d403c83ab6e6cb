"""The analysis plan (chunkwise.plan) and the robustness panel (chunkwise.evaluation.robustness)."""

from __future__ import annotations

import math
import shutil
import subprocess
import tomllib
from pathlib import Path

import numpy as np
import pytest

from chunkwise import plan as P
from chunkwise.evaluation import robustness as R

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "data" / "findings" / "plan.toml"

TINY_PLAN = '''
[entry.a]
headline = "h-a"
chapter = "06_x"
kind = "test"
question = "Is A ahead of B?"
rule = "difference"
delta = 2.0
unit = "points"
words = { above = "A ahead", below = "B ahead" }

[entry.a.primary]
reference = "B"
metric = "recall"
interval = "percentile"
confidence = 0.95

[[entry.a.alternatives]]
name = "IoU"
set = { metric = "iou" }
'''


@pytest.fixture()
def tiny_plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(TINY_PLAN, encoding="utf-8")
    P.append_ledger_record(path, "a", reason="first declaration", declare=True, date="2026-12-01")
    return path


# ------------------------------------------------------------------------------- the plan


def test_the_committed_plan_checks_and_covers_every_headline() -> None:
    import csv

    plan = P.load_plan(PLAN)  # raises on an entry changed without an amendment
    with (ROOT / "data" / "findings" / "headline.csv").open(encoding="utf-8") as fh:
        headlines = [r["headline_id"] for r in csv.DictReader(fh)]
    missing = [h for h in headlines if plan.for_headline(h) is None]
    assert missing == [], f"headline questions without a plan entry: {missing}"
    # chapter 6's change of its primary contrast is on record with what it gave before
    prior = P.amendments(plan, "mixed-content")
    assert prior and "-16.7 [-23.8, -9.5]" in prior[0]["previous"]


def test_an_entry_edited_without_an_amendment_fails(tiny_plan: Path) -> None:
    P.load_plan(tiny_plan)  # as declared: fine
    text = tiny_plan.read_text(encoding="utf-8").replace('delta = 2.0', 'delta = 1.0', 1)
    tiny_plan.write_text(text, encoding="utf-8")
    with pytest.raises(P.PlanError, match="changed since its last ledger record .* without an amendment"):
        P.load_plan(tiny_plan)
    # the amendment makes it valid again, and the page can show it
    with pytest.raises(P.PlanError, match="previous"):
        P.append_ledger_record(tiny_plan, "a", reason="smaller margin", previous="")
    P.append_ledger_record(tiny_plan, "a", reason="smaller margin", previous="delta 2: A ahead +3.0 [+0.5, +5.5]",
                           date="2026-12-02")
    plan = P.load_plan(tiny_plan)
    assert plan["a"].delta == 1.0
    assert P.amendments(plan, "a") == [{"date": "2026-12-02", "reason": "smaller margin",
                                        "previous": "delta 2: A ahead +3.0 [+0.5, +5.5]"}]


def test_an_edited_or_removed_ledger_record_breaks_the_chain(tiny_plan: Path) -> None:
    text = tiny_plan.read_text(encoding="utf-8").replace('delta = 2.0', 'delta = 1.0', 1)
    tiny_plan.write_text(text, encoding="utf-8")
    P.append_ledger_record(tiny_plan, "a", reason="smaller margin", previous="A ahead", date="2026-12-02")
    good = tiny_plan.read_text(encoding="utf-8")
    tiny_plan.write_text(good.replace('reason = "first declaration"', 'reason = "something else"'), encoding="utf-8")
    with pytest.raises(P.PlanError, match="record 1 .* was edited or removed"):
        P.load_plan(tiny_plan)
    # removing the first record: the amendment no longer follows from anything before it
    first_end = good.index("[[ledger]]", good.index("[[ledger]]") + 1)
    tiny_plan.write_text(good[: good.index("[[ledger]]")] + good[first_end:], encoding="utf-8")
    with pytest.raises(P.PlanError, match="without a declaration before it|was edited or removed"):
        P.load_plan(tiny_plan)


def test_a_malformed_entry_is_named(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(TINY_PLAN.replace('set = { metric = "iou" }', 'set = { metirc = "iou" }'), encoding="utf-8")
    with pytest.raises(P.PlanError, match="entry 'a': alternative 'IoU' sets metirc"):
        P.load_plan(path, check=False)
    path.write_text(TINY_PLAN.replace('delta = 2.0', 'delta = 0'), encoding="utf-8")
    with pytest.raises(P.PlanError, match="delta .* must be > 0"):
        P.load_plan(path, check=False)
    with pytest.raises(P.PlanError, match="'zz' is not an entry"):
        P.load_plan(PLAN)["zz"]


def test_specifications_apply_each_alternative_to_the_primary(tiny_plan: Path) -> None:
    specs = dict(P.specifications(P.load_plan(tiny_plan)["a"]))
    assert specs == {"primary": {"reference": "B", "metric": "recall", "interval": "percentile", "confidence": 0.95},
                     "IoU": {"reference": "B", "metric": "iou", "interval": "percentile", "confidence": 0.95}}


def test_the_cli_checks_and_amends(tiny_plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chunkwise.cli import main

    assert main(["plan", "--plan", str(tiny_plan), "check"]) == 0
    assert "1 entries, 1 ledger records, 0 amendments" in capsys.readouterr().out
    tiny_plan.write_text(tiny_plan.read_text(encoding="utf-8").replace('delta = 2.0', 'delta = 1.5', 1),
                         encoding="utf-8")
    assert main(["plan", "--plan", str(tiny_plan), "check"]) == 1
    assert "without an amendment" in capsys.readouterr().err
    assert main(["plan", "--plan", str(tiny_plan), "amend", "a", "--reason", "r", "--previous", "p"]) == 0
    assert main(["plan", "--plan", str(tiny_plan), "check"]) == 0


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs the git history")
def test_every_committed_ledger_is_a_prefix_of_the_current_one() -> None:
    rel = PLAN.relative_to(ROOT).as_posix()
    log = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%H", "--", rel], capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    current = tomllib.loads(PLAN.read_text(encoding="utf-8")).get("ledger", [])
    for commit in log:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{rel}"], capture_output=True,
                               text=True, timeout=60)
        if shown.returncode != 0:  # the file was deleted in that commit
            continue
        old = tomllib.loads(shown.stdout).get("ledger", [])
        assert current[: len(old)] == old, f"the ledger of commit {commit[:10]} was rewritten, not appended to"


# ------------------------------------------------------------------------- the statistics


def test_minimal_detectable_effect_by_hand() -> None:
    x = [1.0, 2.0, 3.0, 4.0]  # sd = 1.2910, n = 4
    want = (1.959964 + 0.841621) * 1.2909944 / 2
    assert R.minimal_detectable_effect(x) == pytest.approx(want, rel=1e-5)
    with pytest.raises(ValueError, match="at least 2"):
        R.minimal_detectable_effect([1.0, float("nan")])


@pytest.mark.parametrize("method", R.INTERVAL_METHODS)
def test_every_interval_contains_its_estimate(method: str) -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.exponential(1.0, 40), [25.0]])  # skewed, one outlier
    est, lo, hi = R.mean_interval(x, method=method, n_resamples=2000)
    assert est == pytest.approx(x.mean())
    assert lo <= est <= hi and lo < hi


def test_percentile_interval_is_the_books_paired_bootstrap() -> None:
    from chunkwise.evaluation.stats import paired_difference_ci

    a, b = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0]), np.array([2.0, 7.0, 1.0, 8.0, 2.0, 8.0])
    assert R.mean_interval(a - b, n_resamples=3000, seed=4) == pytest.approx(
        paired_difference_ci(a - b, np.zeros(6), n_resamples=3000, seed=4))


def test_t_interval_by_hand() -> None:
    x = [1.0, 2.0, 3.0, 4.0]  # mean 2.5, sd 1.2910, t(0.975, 3) = 3.182446
    est, lo, hi = R.mean_interval(x, method="t")
    half = 3.182446 * 1.2909944 / 2
    assert (est, lo, hi) == pytest.approx((2.5, 2.5 - half, 2.5 + half), rel=1e-6)


def test_equivalence_p_by_hand() -> None:
    from scipy import stats

    x = np.array([-0.5, 0.2, 0.1, -0.1, 0.3, 0.0])
    want = max(stats.ttest_1samp(x, -1.0, alternative="greater").pvalue,
               stats.ttest_1samp(x, 1.0, alternative="less").pvalue)
    assert R.equivalence_p(x, 1.0) == pytest.approx(want)
    assert R.equivalence_p(x, 1.0) < 0.01 < R.equivalence_p(x, 0.1)


def test_difference_verdicts() -> None:
    assert R.difference_verdict(0.5, 3.0, 2.0) == "above"
    assert R.difference_verdict(-3.0, -0.1, 2.0) == "below"
    assert R.difference_verdict(-1.0, 1.5, 2.0) == "within delta"
    assert R.difference_verdict(-0.6, 7.2, 5.0) == "not below delta"  # rules out a drop > 5, not a rise
    assert R.difference_verdict(-7.0, 1.0, 5.0) == "not above delta"
    assert R.difference_verdict(-6.0, 7.0, 5.0) == "cannot tell"
    assert R.difference_verdict(math.nan, 1.0, 5.0) == "cannot tell"


# ----------------------------------------------------------------------- the panel itself


def _const(name: str, value: float, n: int = 30, spread: float = 0.1) -> np.ndarray:
    return value + spread * np.tile([-1.0, 1.0], n // 2)


def test_a_verdict_that_flips_under_one_alternative_is_fragile_and_named() -> None:
    words = {"above": "A ahead", "below": "B ahead"}
    primary = R.contrast("primary", _const("p", 2.0), delta=0.5, words=words)
    alts = [R.contrast("IoU", _const("i", 1.5), delta=0.5, words=words),
            R.contrast("wikitexts only", _const("w", -1.0), delta=0.5, words=words)]
    rob = R.classify(primary, alts, delta=0.5)
    assert primary.verdict == "A ahead"
    assert rob.cls == "fragile"
    assert rob.flips == (("wikitexts only", "B ahead"),)
    assert rob.describe() == "fragile: 1 of 2 declared alternatives disagree (wikitexts only gives B ahead)"
    assert R.classify(primary, alts[:1], delta=0.5).cls == "robust"


def test_an_interval_inside_delta_is_its_own_class() -> None:
    primary = R.contrast("primary", _const("p", 0.1, spread=0.5), delta=1.0)  # about 0.1 +- 0.2
    alt = R.contrast("t interval", _const("p", 0.1, spread=0.5), delta=1.0, method="t")
    assert primary.verdict == "within delta"
    rob = R.classify(primary, [alt], delta=1.0, unit="points")
    assert rob.cls == "no effect larger than delta"
    assert rob.describe().startswith("no effect larger than 1 points")


def test_cannot_tell_gives_the_detectable_effect() -> None:
    x = np.array([-3.0, 4.0, -2.0, 5.0, -4.0, 3.0, 1.0, -1.0])
    primary = R.contrast("primary", x, delta=0.5)
    rob = R.classify(primary, [R.contrast("t", x, delta=0.5, method="t")], delta=0.5)
    assert rob.cls == "cannot tell"
    mde = (1.959964 + 0.841621) * x.std(ddof=1) / math.sqrt(8)
    assert primary.mde == pytest.approx(mde, rel=1e-5)
    assert f"about {mde:.1f} points" in rob.describe()


def test_pattern_rule_needs_gap_and_interaction() -> None:
    gap, inter = _const("g", 2.0), _const("i", 3.0)
    assert R.pattern("p", gap, inter, delta=1.0).verdict == "supports"
    assert R.pattern("p", _const("g", -2.0), inter, delta=1.0).verdict == "contradicts"
    assert R.pattern("p", _const("g", 0.0, spread=3.0), inter, delta=1.0).verdict == "cannot tell"
    assert R.pattern("p", _const("g", 0.0, spread=3.0), _const("i", 0.1), delta=1.0).verdict == \
        "no effect larger than delta"
    with pytest.raises(ValueError, match="same questions"):
        R.pattern("p", gap, inter[:-2], delta=1.0)


def test_classify_refuses_no_alternatives_and_repeated_names() -> None:
    p = R.contrast("primary", _const("p", 2.0), delta=0.5)
    with pytest.raises(ValueError, match="at least one declared alternative"):
        R.classify(p, [], delta=0.5)
    with pytest.raises(ValueError, match="unique"):
        R.classify(p, [R.contrast("primary", _const("p", 2.0), delta=0.5)], delta=0.5)


def test_specification_curve_marks_the_primary_and_has_no_nan_label() -> None:
    import matplotlib

    matplotlib.use("Agg")
    words = {"above": "A ahead", "below": "B ahead"}
    primary = R.contrast("primary", _const("p", 2.0), delta=0.5, words=words)
    alts = [R.contrast("IoU", _const("i", 1.5), delta=0.5, words=words),
            R.contrast("wikitexts only", _const("w", -1.0), delta=0.5, words=words)]
    ax = R.specification_curve(R.classify(primary, alts, delta=0.5))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["wikitexts only (B ahead)", "IoU (A ahead)", "PRIMARY: primary (A ahead)"]
    assert not any("nan" in t for t in labels)


def test_as_dict_is_json_ready() -> None:
    import json

    p = R.contrast("primary", _const("p", 2.0), delta=0.5)
    d = R.classify(p, [R.contrast("t", _const("p", 2.0), delta=0.5, method="t")], delta=0.5).as_dict()
    assert json.loads(json.dumps(d))["class"] == "robust"


# ------------------------------------------------------- the findings page and the chapters


def _panel(tiny_plan: Path) -> dict:
    p = R.contrast("primary", _const("p", 2.0), delta=0.5, words={"above": "A ahead"})
    rob = R.classify(p, [R.contrast("IoU", _const("i", 1.5), delta=0.5, words={"above": "A ahead"})], delta=0.5)
    return {**rob.as_dict(), "plan_hash": P.load_plan(tiny_plan)["a"].hash}


def test_a_verdict_from_a_specification_missing_from_the_plan_fails(tiny_plan: Path, tmp_path: Path) -> None:
    from chunkwise import findings as fd

    plan = P.load_plan(tiny_plan)
    folder = tmp_path / "results"
    fd.write_results("06_x", {"v": "A ahead"}, folder, robustness={"a": _panel(tiny_plan)})
    status = fd.robustness_status(plan, fd.load_robustness(folder))
    assert status["a"] == {"class": "robust", "text": "robust: all 1 declared alternatives agree"}
    # a panel under a specification the ledger never recorded
    fd.write_results("06_x", {"v": "A ahead"}, folder, robustness={"a": {**_panel(tiny_plan), "plan_hash": "0" * 16}})
    with pytest.raises(fd.FindingsError, match="undeclared specification"):
        fd.robustness_status(plan, fd.load_robustness(folder))
    # a panel for an entry the plan does not declare
    fd.write_results("06_x", {"v": "A ahead"}, folder, robustness={"b": _panel(tiny_plan)})
    with pytest.raises(fd.FindingsError, match="does not declare"):
        fd.robustness_status(plan, fd.load_robustness(folder))
    # after an amendment, a run under the earlier specification is shown as not assessed
    fd.write_results("06_x", {"v": "A ahead"}, folder, robustness={"a": _panel(tiny_plan)})
    tiny_plan.write_text(tiny_plan.read_text(encoding="utf-8").replace("delta = 2.0", "delta = 1.0", 1), encoding="utf-8")
    P.append_ledger_record(tiny_plan, "a", reason="r", previous="robust")
    assert fd.robustness_status(P.load_plan(tiny_plan), fd.load_robustness(folder))["a"]["class"] == "not assessed"
    with pytest.raises(fd.FindingsError, match="plan_hash"):
        fd.write_results("06_x", {}, folder, robustness={"a": {"class": "robust"}})


def test_published_panels_come_from_declared_specifications() -> None:
    from chunkwise import findings as fd

    plan = P.load_plan(PLAN)
    status = fd.robustness_status(plan, fd.load_robustness(ROOT / "book" / "published" / "results"))
    assert set(status) == set(plan.entries)
    assert status["chroma-minilm"]["class"] == "reproduction"


def test_stitched_panel_by_hand() -> None:
    import pandas as pd

    from chunkwise.experiments.stitched import stitched_panel

    tiny = P.PlanEntry("mixed", "h", "06", "test", "q", "pattern", 1.0, "points",
                       {"reference": "F", "metric": "recall", "corpora": "all five, pooled", "seed": 0,
                        "interval": "t", "confidence": 0.95},
                       ({"name": "against G", "set": {"reference": "G"}},
                        {"name": "b only", "set": {"corpora": "b"}},
                        {"name": "z only", "set": {"corpora": "z"}},
                        {"name": "seed 1", "set": {"seed": 1}}), {}, (), {})
    q = [f"q{i}" for i in range(8)]
    real = pd.DataFrame({"M": [0.5] * 8, "F": [0.5] * 8, "G": [0.4] * 8}, index=q)
    # stitched: M gains 0.2 on corpus a, 0.1 on corpus b, over F; G is always 0.1 below M
    stitched = pd.DataFrame({"M": [0.7, 0.7, 0.7, 0.7, 0.6, 0.6, 0.6, 0.6], "F": [0.5] * 8,
                             "G": [0.6, 0.6, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5]}, index=q)
    corpus_of = {x: ("a" if i < 4 else "b") for i, x in enumerate(q)}
    rob, rows = stitched_panel(tiny, {("recall", "line breaks kept", 0): {"real": real, "stitched": stitched}},
                               corpus_of, method_column="M", n_resamples=200)
    by = rows.set_index("specification")
    assert by.loc["primary", "estimate"] == pytest.approx(15.0)     # (20 * 4 + 10 * 4) / 8 points
    assert by.loc["primary", "gap"] == pytest.approx(15.0)
    assert by.loc["against G", "estimate"] == pytest.approx(0.0)   # M - G is +10 in both conditions
    assert by.loc["b only", "estimate"] == pytest.approx(10.0) and by.loc["b only", "n"] == 4
    assert rob.not_run == ("z only", "seed 1")                     # corpus and seed not in this run
    assert rob.cls == "fragile" and rob.flips == (("against G", "no effect larger than delta"),)
    assert "2 declared alternatives not run here (z only, seed 1)" in rob.describe()


def test_dilution_panel_scores_missing_answers_as_declared() -> None:
    import pandas as pd

    from chunkwise.crud import chunk_size as cs

    ids = [str(i) for i in range(6)]
    small = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    large = [0.6, 0.6, 0.6, 0.6, float("nan"), float("nan")]   # two answers RAGQuestEval could not read
    scores = pd.DataFrame({"ID": ids * 2, "method": ["dense@128"] * 6 + ["dense@512"] * 6,
                           "quest_avg_f1": small + large})
    sweep = cs.Sweep(answers=pd.DataFrame(), scores=scores, chunk_texts={}, configs=pd.DataFrame())
    entry = P.PlanEntry("d", "h", "03b", "test", "q", "difference", 5.0, "points",
                        {"metric": "quest_avg_f1", "retriever": "dense", "larger_tokens": 512,
                         "reference_tokens": 128, "missing": "drop", "interval": "percentile", "confidence": 0.95},
                        ({"name": "zero", "set": {"missing": "zero"}},),
                        {"above": "larger helps", "below": "larger hurts"}, (), {})
    table = scores.rename(columns={"quest_avg_f1": "answer"})
    rob, rows = cs.dilution_panel(sweep, entry, tables={"quest_avg_f1": table}, n_resamples=500)
    # the primary is dilution_test's answer difference, pair for pair
    both = table.assign(context_recall=0.5, answer_per_1k_tokens=table["answer"], retrieved_tokens=1)
    assert cs.dilution_test(both, "dense@128", "dense@512", n_resamples=500)["answer_diff"] == pytest.approx(
        (rob.primary.estimate, rob.primary.low, rob.primary.high))
    by = rows.set_index("specification")
    assert by.loc["primary", "estimate"] == pytest.approx(10.0) and by.loc["primary", "n"] == 4
    assert by.loc["primary", "verdict"] == "larger helps"
    # scored 0: (4 * 10 - 2 * 50) / 6 = -10 points, and the verdict flips
    assert by.loc["zero", "estimate"] == pytest.approx(-10.0) and by.loc["zero", "n"] == 6
    assert rob.cls == "fragile" and rob.flips[0][0] == "zero"


def test_k_winner_panel_names_the_retriever_where_the_winner_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The findings item: the dense answer ("no") must show that hybrid retrieval says otherwise."""
    from types import SimpleNamespace

    import pandas as pd

    from chunkwise.experiments import chroma as ch

    grid = SimpleNamespace(config=SimpleNamespace(top_k=[1, 5, 15], retrievers=["dense", "bm25", "hybrid"]),
                           scores=lambda metric: pd.DataFrame(index=range(472)))
    ranking = pd.DataFrame({"retriever": ["dense"] * 3 + ["bm25"] * 3 + ["hybrid"] * 3, "k": [1, 5, 15] * 3,
                            "best": ["A", "A", "A", "A", "A", "A", "A", "A", "B"]})
    table = {("A", "B", 15): (-3.0, -5.0, -1.0), ("A", "B", 5): (2.0, 0.5, 3.5)}
    monkeypatch.setattr(ch, "pair_difference", lambda g, a, b, m, r, k, n, s: table[(a, b, k)])
    entry = P.PlanEntry("k-winner", "k-winner", "02", "test", "q", "k_winner", 1.0, "recall points",
                        {"retriever": "dense", "metric": "recall", "k_large": 15, "interval": "percentile",
                         "confidence": 0.95},
                        ({"name": "hybrid retrieval", "set": {"retriever": "hybrid"}},
                         {"name": "BM25 retrieval", "set": {"retriever": "bm25"}},
                         {"name": "k up to 20", "set": {"k_large": 20}}), {}, (), {})
    rob = ch.k_winner_panel(grid, ranking, 5, entry)
    assert rob.primary.verdict == "no" and rob.primary.n == 472
    assert rob.cls == "fragile" and rob.flips == (("hybrid retrieval", "yes"),)
    assert rob.alternatives[0].estimate == -3.0 and rob.not_run == ("k up to 20",)


def test_cost_column_panel_with_one_timing_per_strategy(tmp_path: Path) -> None:
    import pandas as pd

    from chunkwise.experiments import strategies as S

    csv_path = tmp_path / "cold.csv"
    rows = ["spec,corpus,index_seconds,n_embedded,late_windows,late_encoder_tokens,n_chunks,load_1min,cpus,measured_utc"]
    # all five corpora pooled: low tier 10 + 12 s, medium 12.5 s (a 0.5-s margin); wikitexts alone: 2 / 5 s
    for spec, secs in (("TokenText:200", (2, 2, 2, 2, 2)), ("Recursive:200", (2, 2, 2, 2, 4)),
                       ("Late:200", (5, 2, 2, 2, 1.5))):
        for corpus, sec in zip(("wikitexts", "chatlogs", "finance", "pubmed", "state_of_the_union"), secs):
            rows.append(f"{spec},{corpus},{sec},10,0,0,10,1.0,2,2026-12-07 10:00")
    csv_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    labels = {"Recursive:200": "Recursive 200"}
    table = pd.DataFrame({"recall_diff": [0.0], "recall_low": [0.0], "recall_high": [0.0]}, index=["Recursive 200"])
    entry = P.PlanEntry("cost-column", "cost-column", "05", "test", "q", "order", 1.0, "seconds",
                        {"timing": "one run", "corpora": "all five", "interval": "none", "metric": "seconds",
                         "confidence": 0.95},
                        ({"name": "wikitexts alone", "set": {"corpora": "wikitexts"}},
                         {"name": "repeated timings", "set": {"timing": "five repeats"}}), {}, (), {})
    five = ["state_of_the_union", "wikitexts", "chatlogs", "finance", "pubmed"]
    rob = S.cost_column_panel(table, csv_path, five, labels, "Recursive 200", entry)
    assert rob.primary.verdict == "cannot tell" and rob.primary.estimate == pytest.approx(0.5)
    assert rob.cls == "cannot tell" and "no sampling interval" in rob.describe()
    assert rob.alternatives[0].verdict == "yes" and rob.alternatives[0].estimate == pytest.approx(3.0)
    assert rob.not_run == ("repeated timings",)


# --------------------------------------------------------------------------- the advice page


def test_advice_is_given_only_on_robust_verdicts(tiny_plan: Path, tmp_path: Path) -> None:
    from chunkwise import advice as A

    path = tmp_path / "advice.toml"
    path.write_text('''
[[advice]]
id = "x"
situation = "Your files mix topics"
advice = "Use A: it led by {lead} points."
question = "Is A ahead?"
entries = ["a"]
covers = "recall@5"
chapter = "06_x"
section = "The primary contrast"
''', encoding="utf-8")
    plan = P.load_plan(tiny_plan)
    items = A.load_advice(path, plan)
    robust = {"a": {"class": "robust", "text": "robust: all 1 declared alternatives agree"}}
    panels = {"a": {"primary": {"low": 2.5, "high": 4.0}}}  # clears the plan's 2-point margin
    rows = A.advice_rows(items, plan, robust, panels, {"06_x": {"lead": "+3.1 [+2.5, +4.0]"}})
    assert rows[0]["given"] and rows[0]["strength"] == "strong"
    assert rows[0]["text"] == "Use A: it led by +3.1 [+2.5, +4.0] points."
    page = A.advice_markdown(rows)
    assert "**1 of 1 recommendations rest on verdicts" in page
    assert ("- **Your files mix topics.** Use A: it led by +3.1 [+2.5, +4.0] points. *Strength: strong.* "
            "Covers: recall@5. Evidence: [chapter 6: The primary contrast]") in page
    # an interval that reaches inside the margin: moderate
    assert A.advice_rows(items, plan, robust, {"a": {"primary": {"low": 0.5, "high": 4.0}}},
                         {})[0]["strength"] == "moderate"
    # fragile: an open question, and the advice sentence is not shown
    fragile = {"a": {"class": "fragile", "text": "fragile: 1 of 1 declared alternatives disagree (IoU gives B ahead)"}}
    rows = A.advice_rows(items, plan, fragile, panels, {"06_x": {"lead": "+3.1"}})
    page = A.advice_markdown(rows)
    assert not rows[0]["given"] and "Use A" not in page
    assert "- **Is A ahead?** *Your files mix topics.* Class: `a`: fragile: 1 of 1 declared " \
           "alternatives disagree (IoU gives B ahead)." in page
    assert "None in this build" in page
    path.write_text(path.read_text(encoding="utf-8").replace('entries = ["a"]', 'entries = ["zz"]'), encoding="utf-8")
    with pytest.raises(A.AdviceError, match="rests on zz, which the analysis plan does not declare"):
        A.load_advice(path, plan)


def test_the_committed_advice_file_rests_on_declared_entries() -> None:
    from chunkwise import advice as A

    items = A.load_advice(ROOT / "data" / "findings" / "advice.toml", P.load_plan(PLAN))
    assert 6 <= len(items) <= 10


def test_ordering_panel_picks_the_strongest_baseline_and_pairs_answered_questions() -> None:
    import pandas as pd

    from chunkwise.crud import experiment as crud

    ids = [str(i) for i in range(6)]
    rows = []
    for method, f1, rouge in (("pg_rag", [0.6] * 5 + [float("nan")], [0.2] * 6),
                              ("hybrid", [0.5] * 6, [0.3] * 6),
                              ("dense", [0.4] * 6, [0.1] * 6),
                              ("none", [0.9] * 6, [0.9] * 6)):       # no retrieval: never a baseline
        rows += [{"task": "questanswer_1doc", "ID": i, "method": method, "quest_avg_f1": a, "rouge_l": b}
                 for i, a, b in zip(ids, f1, rouge)]
    entry = P.PlanEntry("pgrag-order", "pgrag-order", "03", "test", "q", "difference", 2.0, "points",
                        {"reference": "the strongest baseline (Hybrid)", "metric": "quest_avg_f1",
                         "interval": "percentile", "confidence": 0.95},
                        ({"name": "against dense", "set": {"reference": "dense"}},
                         {"name": "ROUGE-L", "set": {"metric": "rouge_l"}}),
                        {"above": "yes", "below": "no"}, (), {})
    rob, table = crud.ordering_panel(pd.DataFrame(rows), entry, n_resamples=300)
    by = table.set_index("specification")
    assert by.loc["primary", "reference"] == "Hybrid" and by.loc["primary", "n"] == 5  # one answer failed
    assert by.loc["primary", "estimate"] == pytest.approx(10.0) and by.loc["primary", "verdict"] == "yes"
    assert by.loc["against dense", "estimate"] == pytest.approx(20.0)
    # ROUGE-L: the strongest baseline there is Hybrid again (30 points), PG-RAG 20: -10, "no"
    assert by.loc["ROUGE-L", "estimate"] == pytest.approx(-10.0) and by.loc["ROUGE-L", "verdict"] == "no"
    assert rob.cls == "fragile" and rob.flips == (("ROUGE-L", "no"),)


def test_contextual_panel_by_hand() -> None:
    from types import SimpleNamespace

    import pandas as pd

    from chunkwise.experiments import strategies as S

    q = list(range(8))
    frames = {"recall": pd.DataFrame({"Contextual 200 | dense | k=5": [0.8] * 8, "Recursive 200 | dense | k=5": [0.7] * 8,
                                      "Contextual 200 | bm25 | k=5": [0.5, 0.9] * 4,
                                      "Recursive 200 | bm25 | k=5": [0.7] * 8}, index=q),
              "iou": pd.DataFrame({"Contextual 200 | dense | k=5": [0.1] * 8,
                                   "Recursive 200 | dense | k=5": [0.1] * 8}, index=q)}
    grid = SimpleNamespace(scores=lambda metric: frames[metric])
    entry = P.PlanEntry("contextual", "contextual", "05", "test", "q", "difference", 2.0, "recall points",
                        {"reference": "Recursive:200", "retriever": "dense", "metric": "recall", "interval": "t",
                         "confidence": 0.95},
                        ({"name": "IoU", "set": {"metric": "iou"}}, {"name": "BM25", "set": {"retriever": "bm25"}},
                         {"name": "hybrid", "set": {"retriever": "hybrid"}}),
                        {"above": "contextual ahead", "below": "recursive ahead",
                         "within_delta": "neither ahead by more than 2 points"}, (), {})
    labels = {"Recursive:200": "Recursive 200", "Contextual:200": "Contextual 200"}
    rob, rows = S.contextual_panel(grid, entry, labels, 5)
    by = rows.set_index("specification")
    assert by.loc["primary", "estimate"] == pytest.approx(10.0) and by.loc["primary", "verdict"] == "contextual ahead"
    assert by.loc["IoU", "verdict"] == "neither ahead by more than 2 points"   # exactly 0, no spread
    assert by.loc["BM25", "estimate"] == pytest.approx(0.0) and by.loc["BM25", "verdict"] == "cannot tell"
    assert rob.cls == "fragile" and rob.not_run == ("hybrid",)
    assert [f[0] for f in rob.flips] == ["IoU", "BM25"]


def test_embedder_chunker_panel_by_hand() -> None:
    import pandas as pd

    from chunkwise.experiments import whatmatters as W

    # 8 questions; embedder e2 adds 0.2 everywhere, chunker c2 adds 0.05: embedder ahead by 15 points
    cols, data = [], []
    for c, cb in (("c1", 0.0), ("c2", 0.05)):
        for e, eb in (("e1", 0.0), ("e2", 0.2)):
            for r in ("dense", "bm25"):
                for k in (5,):
                    cols.append((c, e, r, k))
                    data.append([0.3 + cb + eb + 0.01 * (q % 2) for q in range(8)])
    wide = pd.DataFrame(list(zip(*data)), columns=pd.MultiIndex.from_tuples(
        cols, names=["chunker", "embedder", "retriever", "k"]))
    entry = P.PlanEntry("embedder-over-chunker", "h", "07", "test", "q", "difference", 2.0, "recall points",
                        {"statistic": "cross-fitted fixed-pair contrast", "retriever": "dense", "metric": "recall",
                         "read": "k = 5", "long_text_policy": "each runtime's own", "interval": "percentile",
                         "confidence": 0.95},
                        ({"name": "range", "set": {"statistic": "max-minus-min range", "interval": "basic"}},
                         {"name": "truncated", "set": {"long_text_policy": "truncate at the window"}},
                         {"name": "IoU", "set": {"metric": "iou"}},
                         {"name": "BM25", "set": {"retriever": "bm25"}},
                         {"name": "k = 10", "set": {"read": "k = 10"}},
                         {"name": "budget", "set": {"read": "512 tokens"}}),
                        {"above": "embedder ahead", "below": "chunker ahead"}, (), {})
    rob, rows = W.embedder_chunker_panel({("each runtime's own", "recall", "k"): wide}, entry, n_resamples=200)
    by = rows.set_index("specification")
    assert by.loc["primary", "estimate"] == pytest.approx(15.0) and by.loc["range", "estimate"] == pytest.approx(15.0)
    assert by.loc["primary", "verdict"] == "embedder ahead" and by.loc["BM25", "verdict"] == "embedder ahead"
    assert rob.cls == "robust" and rob.not_run == ("truncated", "IoU", "k = 10", "budget")
    assert set(rows["read"]) == {"k = 5"} and set(rows["long_text_policy"]) == {"each runtime's own"}
    with pytest.raises(ValueError, match="primary specification"):
        W.embedder_chunker_panel({("truncate at the window", "recall", "k"): wide}, entry, n_resamples=200)


def test_rank_agreement_panel_by_hand() -> None:
    from types import SimpleNamespace

    import pandas as pd

    from chunkwise.experiments.questions import rank_agreement_panel

    cells = [f"C{i} | {r} | k=5" for i in range(4) for r in ("dense", "bm25")]
    table = pd.DataFrame({"cell": cells, "k": 5, "retriever": [c.split(" | ")[1] for c in cells]})
    rng = np.random.default_rng(0)
    level = np.arange(len(cells)) / 10.0

    def run(noise: float, flip_iou: bool) -> SimpleNamespace:
        recall = pd.DataFrame(level + noise * rng.standard_normal((30, len(cells))), columns=cells)
        iou = pd.DataFrame((-level if flip_iou else level) + noise * rng.standard_normal((30, len(cells))),
                           columns=cells)
        return SimpleNamespace(table=table, scores=lambda m: {"recall": recall, "iou": iou}[m])

    entry = P.PlanEntry("own-rank", "own-rank", "04", "test", "q", "difference", 0.1, "rank correlation",
                        {"statistic": "Spearman's rho", "cells": "k = 5: chunker x retriever", "metric": "recall",
                         "interval": "cover", "confidence": 0.95},
                        ({"name": "Kendall", "set": {"statistic": "Kendall's tau-b"}},
                         {"name": "IoU", "set": {"metric": "iou"}},
                         {"name": "dense", "set": {"cells": "k = 5: dense, chunkers only"}}),
                        {"above": "agree", "below": "disagree"}, (), {})
    rob, rows = rank_agreement_panel(run(0.01, False), run(0.01, True), entry, n_resamples=200)
    by = rows.set_index("specification")
    assert by.loc["primary", "estimate"] == pytest.approx(1.0) and by.loc["primary", "verdict"] == "agree"
    assert by.loc["IoU", "estimate"] == pytest.approx(-1.0) and by.loc["IoU", "verdict"] == "disagree"
    assert by.loc["dense", "n_cells"] == 4
    assert rob.cls == "fragile" and rob.flips == (("IoU", "disagree"),)


def test_stitched_panel_primary_is_the_chapters_interaction_to_the_last_digit() -> None:
    import pandas as pd

    from chunkwise.experiments.stitched import interaction, stitched_panel

    rng = np.random.default_rng(5)
    q = [f"q{i}" for i in range(60)]
    frames = {c: pd.DataFrame({"M": rng.integers(0, 7, 60) / 7, "F": rng.integers(0, 7, 60) / 7}, index=q)
              for c in ("real", "stitched")}
    entry = P.PlanEntry("mixed", "h", "06", "test", "q", "pattern", 3.0, "points",
                        {"reference": "F", "metric": "recall", "corpora": "all five, pooled", "seed": 0,
                         "interval": "percentile", "confidence": 0.95},
                        ({"name": "t", "set": {"interval": "t"}},), {}, (), {})
    rob, _ = stitched_panel(entry, {("recall", "line breaks kept", 0): frames}, {}, method_column="M",
                            n_resamples=2000)
    head = interaction(frames, "M", "F", n_resamples=2000)
    assert (rob.primary.estimate, rob.primary.low, rob.primary.high) == tuple(
        100 * head[k] for k in ("interaction", "interaction_low", "interaction_high"))
    assert (rob.primary.extra["gap"], rob.primary.extra["gap_low"], rob.primary.extra["gap_high"]) == tuple(
        100 * head[k] for k in ("gap_treated", "gap_treated_low", "gap_treated_high"))


def test_a_panel_whose_alternatives_all_need_missing_data_is_not_assessed() -> None:
    """The ci profile cuts the corpora: chapter 5's cost panel had no alternative left to run."""
    p = R.contrast("primary", _const("p", 2.0), delta=0.5)
    rob = R.classify(p, [], delta=0.5, not_run=["wikitexts alone", "repeated timings"])
    assert rob.cls == "not assessed"
    assert rob.describe() == ("not assessed: none of the declared alternatives could run here; 2 declared "
                              "alternatives not run here (wikitexts alone, repeated timings)")


def test_stitched_panel_matches_question_ids_whatever_their_type() -> None:
    """The grid's question ids are text, the loader's integers: per-corpus rows must still find them."""
    import pandas as pd

    from chunkwise.experiments.stitched import stitched_panel

    q = [str(i) for i in range(8)]
    real = pd.DataFrame({"M": [0.5] * 8, "F": [0.5] * 8}, index=q)
    stitched = pd.DataFrame({"M": [0.7] * 4 + [0.6] * 4, "F": [0.5] * 8}, index=q)
    entry = P.PlanEntry("mixed", "h", "06", "test", "q", "pattern", 1.0, "points",
                        {"reference": "F", "metric": "recall", "corpora": "all five, pooled", "seed": 0,
                         "interval": "t", "confidence": 0.95},
                        ({"name": "b only", "set": {"corpora": "b"}},), {}, (), {})
    corpus_of = {i: ("a" if i < 4 else "b") for i in range(8)}   # integer ids, as load_chroma_questions gives
    rob, rows = stitched_panel(entry, {("recall", "line breaks kept", 0): {"real": real, "stitched": stitched}},
                               corpus_of, method_column="M", n_resamples=200)
    assert rows.set_index("specification").loc["b only", "n"] == 4
