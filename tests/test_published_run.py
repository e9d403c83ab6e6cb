"""The committed published run (``book/published/``, issue 46): what ``make read`` builds from.

Every chapter there must be a full default run (no parameters, no profile) from a committed
state of this repository, with its provenance, its results file and no error output; chapter 2
must show the comparison with the report's own code (the 10 configurations both ran).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from chunkwise import book

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "book" / "published"
CHAPTERS = sorted(PUBLISHED.glob("*.ipynb"))


def test_the_published_run_holds_registered_chapters_including_chapter_2():
    stems = [p.stem for p in CHAPTERS]
    assert "02_chroma_recall" in stems
    assert set(stems) <= {Path(n).stem for n in book.NOTEBOOKS}


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda p: p.stem)
def test_each_published_chapter_is_a_default_run_with_provenance(notebook):
    record = json.loads((PUBLISHED / "results" / "runs" / f"{notebook.stem}.json").read_text(encoding="utf-8"))
    assert record["chapter"] == notebook.stem
    assert not record["parameters"] and not record.get("profile")
    prov = record["provenance"]
    assert len(prov["commit"]) == 40 and prov["dirty"] is False
    assert prov["notebook"] == f"notebooks/{notebook.name}"
    assert prov["code_cells"] and prov["modules"] and prov["machine"]["cores"] >= 1
    assert (PUBLISHED / "results" / f"{notebook.stem}.json").is_file()
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if shutil.which("git") and (REPO / ".git").exists():
        known = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{prov['commit']}^{{commit}}"],
                               capture_output=True, check=False)
        assert known.returncode == 0, f"{notebook.stem} ran at {prov['commit']}, which is not in this repository"


def test_published_chapter_2_shows_the_comparison_with_the_report_code():
    nb = json.loads((PUBLISHED / "02_chroma_recall.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code"
                and "compare_with_report_code" in "".join(c["source"]))
    table = next("".join(o["data"]["text/plain"]) for o in cell["outputs"] if "text/plain" in o.get("data", {}))
    assert "recall (report's code)" in table  # the labelled column (chunkwise.labels)
    rows = [line for line in table.splitlines()[2:] if line.strip()]
    both = pd.read_csv(REPO / "data" / "chroma" / "report_code_d451fc4_minilm.csv")  # two searches per row
    assert len(rows) == len(both) // 2 == 10
    assert "-0.000" not in table
