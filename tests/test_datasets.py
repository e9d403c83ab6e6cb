"""Tests for chunkwise.datasets: manifest, mirror / download resolution, Chroma benchmark loaders.

Data tests read the local mirror (``$CHUNKWISE_DATA_MIRROR``, set by conftest.py when
``../shared/data`` exists) and are skipped without one; nothing here touches the network
(downloads are simulated by monkeypatching :func:`pooch.retrieve`).
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pooch
import pytest

from chunkwise.datasets import (
    CHROMA_CORPORA,
    MIRROR_ENV,
    check_chroma_references,
    chroma_corpus_name,
    data_path,
    default_cache_dir,
    load_chroma_corpora,
    load_chroma_questions,
    load_manifest,
    sha256_file,
)
from chunkwise.datasets import chroma as chroma_mod
from chunkwise.datasets import fetch as fetch_mod

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

QUESTIONS = "chroma/questions_df.csv"
QUESTIONS_SHA256 = "3ab3901889b8900f43775537bf12d36bd6614255fc59124faca31bede1dda7a3"
CHATLOGS = "chroma/corpora/chatlogs.md"
CHATLOGS_SHA256 = "543a98f82b2a6a492349fd7f8c9d6c3e78d1a4af81d13c79a7fd513c3f65bda6"
PINNED = "brandonstarxel/chunking_evaluation/d451fc4cf56e417b755994b4ca5212fd5057c0d2/"

# Counted once from the pinned questions_df.csv (upstream commit d451fc4) and pinned here.
QUESTIONS_PER_CORPUS = {
    "state_of_the_union": 76,
    "wikitexts": 144,
    "chatlogs": 56,
    "finance": 97,
    "pubmed": 99,
}
REFERENCES_PER_CORPUS = {
    "state_of_the_union": 95,
    "wikitexts": 249,
    "chatlogs": 108,
    "finance": 143,
    "pubmed": 195,
}
# Corpus lengths in characters (UTF-8 decoded text).
CORPUS_CHARS = {
    "state_of_the_union": 48_051,
    "wikitexts": 118_372,
    "chatlogs": 40_000,
    "finance": 737_905,
    "pubmed": 500_000,
}


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mirror() -> Path:
    """The local data mirror; tests that need real data are skipped without one."""
    root = Path(os.environ.get(MIRROR_ENV) or SHARED_DATA)
    if not (root / QUESTIONS).is_file():
        pytest.skip(f"no local data mirror with {QUESTIONS} (set {MIRROR_ENV})")
    return root


@pytest.fixture(scope="module")
def questions(mirror: Path):
    return load_chroma_questions(mirror=mirror)


@pytest.fixture(scope="module")
def corpora(mirror: Path) -> dict[str, str]:
    return load_chroma_corpora(mirror=mirror)


def _copy_into(mirror: Path, dest_root: Path, rel: str) -> Path:
    dest = dest_root / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mirror / rel, dest)
    return dest


def _refuse_download(*args, **kwargs):
    raise AssertionError("pooch.retrieve must not be called here")


# --------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------


def test_manifest_lists_chroma_and_crud_rag_files():
    m = load_manifest()
    assert len(m) == 49
    chroma = [p for p in m if p.startswith("chroma/")]
    corpus_files = [f"chroma/corpora/{n}.md" for n in CHROMA_CORPORA]
    assert sorted(chroma) == sorted([QUESTIONS, *corpus_files])
    for p in chroma:
        assert m[p].upstream_url.startswith("https://raw.githubusercontent.com/" + PINNED)
        assert m[p].upstream_url.endswith(p.removeprefix("chroma/"))
    assert m[QUESTIONS].sha256 == QUESTIONS_SHA256
    assert sum(p.startswith("crud_rag/80000_docs/") for p in m) == 36
    # qa_subset.json and qa_1doc_first50.json are assembled for the mirror: no upstream URL, mirror only.
    assert m["crud_rag/qa_subset.json"].upstream_url is None
    assert m["crud_rag/qa_1doc_first50.json"].sha256 == "ca61662131b49a46ea4c4a9d09120fda1cbdecda3dc9025709e13f93381a92d3"
    assert m["crud_rag/qa_1doc_first50.json"].upstream_url is None


def test_manifest_agrees_with_shared_mirror_manifest():
    shared = SHARED_DATA / "MANIFEST.tsv"
    if not shared.is_file():
        pytest.skip("no shared MANIFEST.tsv beside the repository")
    with open(shared, encoding="utf-8", newline="") as f:
        rows = {r["path"]: r for r in csv.DictReader(f, delimiter="\t")}
    for path, entry in load_manifest().items():
        assert rows[path]["sha256"] == entry.sha256, path
        assert (rows[path]["upstream_url"] or None) == entry.upstream_url, path


# --------------------------------------------------------------------------------------
# data_path: mirror
# --------------------------------------------------------------------------------------


def test_mirror_file_is_returned_with_the_right_sha(mirror: Path, tmp_path: Path):
    got = data_path(QUESTIONS, mirror=mirror, cache_dir=tmp_path / "cache")
    assert got == mirror / QUESTIONS
    assert sha256_file(got) == QUESTIONS_SHA256
    assert not (tmp_path / "cache").exists()  # nothing downloaded or cached


def test_mirror_from_environment(mirror: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    monkeypatch.setattr(pooch, "retrieve", _refuse_download)
    assert data_path(CHATLOGS, cache_dir=tmp_path) == mirror / CHATLOGS
    # Windows-style separators are accepted.
    assert data_path("chroma\\corpora\\chatlogs.md", cache_dir=tmp_path) == mirror / CHATLOGS


def test_tampered_mirror_file_raises(mirror: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(pooch, "retrieve", _refuse_download)
    bad = _copy_into(mirror, tmp_path / "mirror", QUESTIONS)
    data = bytearray(bad.read_bytes())
    data[100] ^= 0x01  # change one byte, same size
    bad.write_bytes(bytes(data))
    actual = sha256_file(bad)
    assert actual != QUESTIONS_SHA256
    with pytest.raises(ValueError, match="sha256 mismatch") as err:
        data_path(QUESTIONS, mirror=tmp_path / "mirror", cache_dir=tmp_path / "cache")
    msg = str(err.value)
    assert QUESTIONS in msg and QUESTIONS_SHA256 in msg and actual in msg


def test_verification_is_cached_by_path_size_mtime(mirror: Path, tmp_path: Path, monkeypatch):
    copy = _copy_into(mirror, tmp_path / "mirror", CHATLOGS)
    calls = []
    real = fetch_mod._hash_bytes
    monkeypatch.setattr(fetch_mod, "_hash_bytes", lambda p: calls.append(p) or real(p))
    for _ in range(3):
        assert data_path(CHATLOGS, mirror=tmp_path / "mirror") == copy
    assert len(calls) == 1
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # "touched"
    assert data_path(CHATLOGS, mirror=tmp_path / "mirror") == copy
    assert len(calls) == 2


# --------------------------------------------------------------------------------------
# data_path: download
# --------------------------------------------------------------------------------------


def test_missing_mirror_file_and_failed_download_raise_runtime_error(tmp_path: Path, monkeypatch):
    def offline(*args, **kwargs):
        raise OSError("Temporary failure in name resolution")

    monkeypatch.setattr(pooch, "retrieve", offline)
    empty = tmp_path / "empty_mirror"
    empty.mkdir()
    with pytest.raises(RuntimeError, match=MIRROR_ENV) as err:
        data_path(QUESTIONS, mirror=empty, cache_dir=tmp_path / "cache")
    msg = str(err.value)
    assert "online" in msg and str(empty) in msg and QUESTIONS in msg
    assert isinstance(err.value.__cause__, OSError)

    # No mirror at all (environment cleared) fails the same way.
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    with pytest.raises(RuntimeError, match=f"{MIRROR_ENV}.*online"):
        data_path(QUESTIONS, cache_dir=tmp_path / "cache")


def test_download_goes_through_pooch_into_the_cache(mirror: Path, tmp_path: Path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    seen = []

    def fake_retrieve(url, known_hash=None, fname=None, path=None, progressbar=False, **kw):
        seen.append(
            dict(url=url, known_hash=known_hash, fname=fname, path=Path(path), bar=progressbar)
        )
        dest = Path(path) / fname
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mirror / CHATLOGS, dest)
        return str(dest)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    cache = tmp_path / "cache"
    got = data_path(CHATLOGS, cache_dir=cache)
    assert got == cache / CHATLOGS
    assert seen == [
        dict(
            url=load_manifest()[CHATLOGS].upstream_url,
            known_hash=f"sha256:{CHATLOGS_SHA256}",
            fname="chatlogs.md",
            path=cache / "chroma" / "corpora",
            bar=True,
        )
    ]
    # A verified cached copy is reused without asking pooch again.
    monkeypatch.setattr(pooch, "retrieve", _refuse_download)
    assert data_path(CHATLOGS, cache_dir=cache) == got


def test_download_default_cache_dir_follows_environment(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c" / "data"
    monkeypatch.delenv("CHUNKWISE_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "chunkwise" / "data"

    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    paths = []

    def fake_retrieve(url, known_hash=None, fname=None, path=None, **kw):
        paths.append(Path(path))
        raise OSError("offline")

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    with pytest.raises(RuntimeError):
        data_path(QUESTIONS)
    assert paths == [tmp_path / "c" / "data" / "chroma"]


def test_pooch_hash_mismatch_stays_a_value_error(tmp_path: Path, monkeypatch):
    def mismatch(*args, **kwargs):
        raise ValueError("SHA256 hash of downloaded file does not match the known hash")

    monkeypatch.setattr(pooch, "retrieve", mismatch)
    with pytest.raises(ValueError, match=QUESTIONS_SHA256):
        data_path(QUESTIONS, mirror=tmp_path, cache_dir=tmp_path / "cache")


def test_mirror_only_file_missing_from_mirror(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(pooch, "retrieve", _refuse_download)
    with pytest.raises(RuntimeError, match=f"only from a local mirror.*{MIRROR_ENV}"):
        data_path("crud_rag/qa_subset.json", mirror=tmp_path, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("bad", ["chroma/nope.md", "../chroma/questions_df.csv", "/etc/passwd"])
def test_unknown_or_escaping_paths_are_rejected(bad: str, tmp_path: Path):
    with pytest.raises(ValueError):
        data_path(bad, mirror=tmp_path, cache_dir=tmp_path)


# --------------------------------------------------------------------------------------
# Chroma benchmark
# --------------------------------------------------------------------------------------


def test_corpora_lengths_and_read_mode(corpora: dict[str, str], mirror: Path):
    assert tuple(corpora) == CHROMA_CORPORA
    assert {k: len(v) for k, v in corpora.items()} == CORPUS_CHARS
    for name, text in corpora.items():
        # No '\r' anywhere: text mode (upstream's open(path, 'r')) equals a plain decode, so
        # the offsets hold whichever way a reader opens the file.
        raw = (mirror / f"chroma/corpora/{name}.md").read_bytes().decode("utf-8")
        assert "\r" not in raw and raw == text


def test_questions_counts(questions):
    assert len(questions) == 472
    assert list(questions.columns) == [
        "question_id",
        "question",
        "corpus",
        "references",
        "reference_texts",
    ]
    assert questions["references"].map(len).sum() == 790
    assert set(questions["corpus"]) == set(CHROMA_CORPORA)
    assert questions["corpus"].value_counts().to_dict() == QUESTIONS_PER_CORPUS
    refs = questions.groupby("corpus")["references"].agg(lambda s: sum(map(len, s))).to_dict()
    assert refs == REFERENCES_PER_CORPUS
    assert questions["question_id"].dtype == "int64"
    assert questions["question_id"].tolist() == list(range(472))
    assert questions["references"].map(len).between(1, 5).all()


def test_questions_spans_are_half_open_character_offsets(questions, corpora):
    first = questions.iloc[0]
    assert first["corpus"] == "state_of_the_union"
    assert first["references"] == [(27346, 27425), (27866, 28023)]
    assert first["reference_texts"][0] == (
        "My administration announced we\u2019re cutting credit card late fees from $32 to $8."
    )
    for spans, texts, name in zip(
        questions["references"], questions["reference_texts"], questions["corpus"]
    ):
        for (start, end), text in zip(spans, texts, strict=True):
            assert type(start) is int and type(end) is int
            assert end - start == len(text)
            assert corpora[name][start:end] == text


def test_questions_filtered_by_corpus_keep_upstream_ids(mirror: Path, questions):
    fin = load_chroma_questions("finance", mirror=mirror)
    assert len(fin) == QUESTIONS_PER_CORPUS["finance"]
    assert set(fin["corpus"]) == {"finance"}
    expected = questions.loc[questions["corpus"] == "finance", "question_id"].tolist()
    assert fin["question_id"].tolist() == expected
    two = load_chroma_questions(["pubmed", "chatlogs"], mirror=mirror)
    assert len(two) == QUESTIONS_PER_CORPUS["pubmed"] + QUESTIONS_PER_CORPUS["chatlogs"]
    with pytest.raises(ValueError, match="unknown Chroma corpora"):
        load_chroma_questions(["finance", "novels"], mirror=mirror)
    with pytest.raises(ValueError, match="unknown Chroma corpora"):
        load_chroma_corpora("novels", mirror=mirror)


def test_span_check_fails_on_corrupted_corpus(questions, corpora, mirror: Path, monkeypatch):
    row = questions[questions["corpus"] == "wikitexts"].iloc[3]
    start, end = row["references"][0]
    text = corpora["wikitexts"]
    mid = (start + end) // 2
    replacement = "#" if text[mid] != "#" else "%"
    bad = dict(corpora, wikitexts=text[:mid] + replacement + text[mid + 1 :])
    assert len(bad["wikitexts"]) == len(text)

    qid = int(row["question_id"])
    with pytest.raises(ValueError, match=rf"question {qid} \(corpus 'wikitexts'\)"):
        check_chroma_references(questions, bad)
    check_chroma_references(questions, corpora)  # the genuine corpora pass

    # The loader runs the same check on whatever corpus text it gets.
    monkeypatch.setattr(
        chroma_mod, "load_chroma_corpora", lambda names, **kw: {n: bad[n] for n in names}
    )
    with pytest.raises(ValueError, match=rf"question {qid} \(corpus 'wikitexts'\)"):
        load_chroma_questions(mirror=mirror)

    # A truncated corpus puts spans out of range.
    short = dict(corpora, finance=corpora["finance"][:1000])
    with pytest.raises(ValueError, match=r"corpus 'finance'.*outside the corpus of 1000"):
        check_chroma_references(questions, short)


@pytest.mark.parametrize(
    ("corpus_id", "name"),
    [
        ("finance", "finance"),
        ("pubmed.md", "pubmed"),
        ("chunking_evaluation/evaluation_framework/general_evaluation_data/corpora/chatlogs.md",
         "chatlogs"),
        ("C:\\Users\\x\\general_evaluation_data\\corpora\\wikitexts.md", "wikitexts"),
        ("  ./corpora/State_of_the_Union.MD ", "state_of_the_union"),
        ("state-of-the-union", "state_of_the_union"),
    ],
)
def test_corpus_id_mapping(corpus_id: str, name: str):
    assert chroma_corpus_name(corpus_id) == name


@pytest.mark.parametrize("corpus_id", ["", "corpora/", "finance_2.md", "novels.md", "nan"])
def test_corpus_id_mapping_rejects_unknown(corpus_id: str):
    with pytest.raises(ValueError, match="does not name a Chroma corpus"):
        chroma_corpus_name(corpus_id)


def test_cli_fetch_data_from_the_mirror(capsys):
    from chunkwise.cli import main

    mirror = Path(__file__).resolve().parents[2] / "shared" / "data"
    if not mirror.is_dir():
        pytest.skip("no data mirror beside the repository")
    assert main(["fetch-data", "chroma/", "--mirror", str(mirror)]) == 0
    out = capsys.readouterr().out
    assert out.count("ok  chroma/") == 6  # 5 corpora and the questions
    assert main(["fetch-data", "no-such-prefix/"]) == 2
