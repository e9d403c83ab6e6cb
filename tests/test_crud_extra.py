"""The CRUD-RAG tower's libraries are an install extra: the core package imports without them,
and the one core use (BM25's "jieba" tokenizer) names the extra when jieba is missing."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Imported only by chunkwise.crud (and BM25's optional "jieba" tokenizer), by their import names.
CRUD_ONLY_MODULES = ("jieba", "sacrebleu", "rouge_score", "bert_score", "networkx", "datasets", "sklearn")
#: The same libraries by their distribution names.
CRUD_ONLY_DISTRIBUTIONS = ("jieba", "sacrebleu", "rouge-score", "bert-score", "networkx", "datasets", "scikit-learn")


def _name(requirement: str) -> str:
    return requirement.split("==")[0].split("[")[0].strip().lower()


def test_crud_libraries_are_the_crud_extra_and_make_installs_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {_name(r) for r in project["dependencies"]}
    extra = {_name(r) for r in project["optional-dependencies"]["crud"]}
    assert not core & set(CRUD_ONLY_DISTRIBUTIONS)
    assert extra == set(CRUD_ONLY_DISTRIBUTIONS)
    assert '-e ".[test,book,llm,crud]"' in (ROOT / "Makefile").read_text(encoding="utf-8")


_PROBE = """
import importlib, pkgutil, sys
BLOCK = set(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ImportError(f"blocked: {name}")
        return None
sys.meta_path.insert(0, Block())
import chunkwise
failed = []
for m in pkgutil.walk_packages(chunkwise.__path__, "chunkwise."):
    try:
        importlib.import_module(m.name)
    except Exception as exc:
        failed.append(f"{m.name}: {exc!r}")
from chunkwise.retrieval import BM25Retriever, tokenize_zh
assert tokenize_zh("分块 chunking", "char") == ["分", "块", "chunking"]
assert BM25Retriever(["分块", "检索"], language="zh", tokenizer="char").retrieve("分块", 1)[0].chunk_id == "0"
try:
    BM25Retriever(["分块"], language="zh")
except ImportError as exc:
    print("JIEBA_ERROR", exc)
print("FAILED", failed)
print("LOADED", sorted(k for k in sys.modules if k.split(".")[0] in BLOCK))
"""


def test_every_module_imports_without_the_crud_extra():
    """Every module of the package (the CRUD tower too: its libraries are imported where used)
    imports with the extra's libraries unavailable; Chinese BM25 with per-character tokens works,
    and the jieba tokenizer fails with an error naming the extra."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, ",".join(CRUD_ONLY_MODULES)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["FAILED"] == "[]"
    assert lines["LOADED"] == "[]"
    assert "pip install 'chunkwise[crud]'" in lines["JIEBA_ERROR"]


def test_jieba_tokenizer_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    from chunkwise.retrieval import lexical

    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba -> ImportError
    lexical._jieba.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"pip install 'chunkwise\[crud\]'"):
            lexical.tokenize_zh("分块")
        assert lexical.tokenize_zh("分块", "char") == ["分", "块"]
    finally:
        lexical._jieba.cache_clear()
