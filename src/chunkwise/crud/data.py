"""The CRUD-RAG question-answering benchmark: QA items, the news corpus, RAGQuestEval caches.

Lyu et al. (2024) built CRUD-RAG, a Chinese RAG benchmark on news, with its code and data in
the repository ``IAAR-Shanghai/CRUD_RAG`` (README: Apache-2.0; the news texts belong to their
outlets). This module loads the "Read" part of it, the three question-answering tasks, pinned to
commit ``1aace38`` of that repository:

- :func:`load_crud_qa` -- the QA items of ``questanswer_1doc``, ``questanswer_2docs`` or
  ``questanswer_3docs`` as a :class:`datasets.Dataset`. Upstream's full split,
  ``data/crud_split/split_merged.json`` (about 800 items per task), is downloaded with
  :mod:`pooch` and checked against its **git blob sha1** (its sha256 is not in our manifest yet,
  see :data:`SPLIT_MERGED_BLOB_SHA1`). Offline, the mirror gives the first 50 1-document items
  (``crud_rag/qa_1doc_first50.json``, question and answer; 4 of them with their gold news) and 3
  complete items of each multi-document task (``crud_rag/qa_subset.json``); which was used is
  always reported (a warning for the mirror, and the ``source`` column of every row).
- :func:`load_crud_corpus` -- the retrieval corpus ``data/80000_docs``, one news article per line
  (ids ``"<part>:<line>"``), with a summary of the parts that could not be loaded (parts 12-15
  are not in our mirror or manifest).
- :func:`load_quest_gt` -- upstream's cached RAGQuestEval ground truth (questions generated from
  the reference answer and the reference answers to them).
- :func:`pooled_corpus` -- a small retrieval corpus for small machines: the union of the top-N
  BM25 documents per question over the whole available corpus, optionally with the items' gold
  news added.

Every file goes through :func:`chunkwise.datasets.fetch.data_path` (local mirror, cache, or
pinned download with a sha256 check), except ``split_merged.json`` while its sha256 is unknown.

References
----------
.. [1] Y. Lyu, Z. Li, S. Niu, F. Xiong, B. Tang, W. Wang, H. Wu, H. Liu, T. Xu and E. Chen,
   "CRUD-RAG: A Comprehensive Chinese Benchmark for Retrieval-Augmented Generation of Large
   Language Models", arXiv:2401.17043, 2024.
.. [2] https://github.com/IAAR-Shanghai/CRUD_RAG (commit 1aace383994e1f68efa12cf2a8e2dadfb4102ceb)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.datasets import fetch

__all__ = [
    "CRUD_COMMIT",
    "CRUD_QA_TASKS",
    "CorpusSummary",
    "CrudCorpus",
    "PooledCorpus",
    "SPLIT_MERGED_BLOB_SHA1",
    "SPLIT_MERGED_PATH",
    "SPLIT_MERGED_SHA256",
    "SPLIT_MERGED_URL",
    "crud_corpus_parts",
    "git_blob_sha1",
    "load_crud_corpus",
    "load_crud_qa",
    "load_quest_gt",
    "load_pool",
    "pooled_corpus",
    "save_pool",
]

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]

#: The pinned upstream commit of IAAR-Shanghai/CRUD_RAG.
CRUD_COMMIT = "1aace383994e1f68efa12cf2a8e2dadfb4102ceb"

#: The QA tasks: task name -> number of gold news per item.
CRUD_QA_TASKS: dict[str, int] = {
    "questanswer_1doc": 1,
    "questanswer_2docs": 2,
    "questanswer_3docs": 3,
}

#: Data-root path of upstream's full split (mirror / cache layout, as in the manifest).
SPLIT_MERGED_PATH = "crud_rag/crud_split/split_merged.json"
#: Raw URL of the full split at the pinned commit.
SPLIT_MERGED_URL = (
    f"https://raw.githubusercontent.com/IAAR-Shanghai/CRUD_RAG/{CRUD_COMMIT}/data/crud_split/split_merged.json"
)
#: Git blob sha1 of ``data/crud_split/split_merged.json`` at the pinned commit: the sha1 of
#: ``b"blob <size>\\0" + content``. Every copy (download, cache, mirror) is checked against it.
SPLIT_MERGED_BLOB_SHA1 = "2dd57307cc39efca886d8ed955d4cade84fe9887"
#: sha256 of the same file, not known yet (no machine of ours has downloaded it). When it is,
#: add the manifest row ``crud_rag/crud_split/split_merged.json <sha256> <SPLIT_MERGED_URL>``;
#: :func:`load_crud_qa` then resolves the file through :func:`~chunkwise.datasets.fetch.data_path`
#: (and still checks the blob sha1). A successful download logs the sha256 to add.
SPLIT_MERGED_SHA256: str | None = None

_QA_SUBSET_PATH = "crud_rag/qa_subset.json"
_QA_FIRST50_PATH = "crud_rag/qa_1doc_first50.json"
_CORPUS_DIR = "crud_rag/80000_docs"
_QUEST_GT_FILES = {
    "questanswer_1doc": "crud_rag/quest_eval/QuestAnswer1Doc_quest_gt_save.json",
    "questanswer_2docs": "crud_rag/quest_eval/QuestAnswer2Docs_quest_gt_save.json",
    "questanswer_3docs": "crud_rag/quest_eval/QuestAnswer3Docs_quest_gt_save.json",
}
_DUP_PARTS = 15  # documents_dup_part_1 .. _15, each in three files _part_1 .. _part_3
_SUB_PARTS = 3


# ---------------------------------------------------------------------------------------------
# QA items
# ---------------------------------------------------------------------------------------------


def git_blob_sha1(path: PathLike) -> str:
    """Return the git blob id of a file: ``sha1(b"blob <size>\\0" + content)`` in hex.

    This is the id ``git hash-object <file>`` prints and the id GitHub's tree API lists; it lets a
    downloaded file be checked against a commit when only the tree, not a sha256, is known.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
        40 lower-case hex digits.
    """
    p = Path(path)
    h = hashlib.sha1()
    h.update(b"blob %d\0" % p.stat().st_size)
    with open(p, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _check_blob(path: Path, where: str) -> Path:
    expected = SPLIT_MERGED_BLOB_SHA1
    actual = git_blob_sha1(path)
    if actual != expected:
        head = path.read_bytes()[:200]
        lfs = " It looks like a Git LFS pointer, not the data." if head.startswith(b"version https://git-lfs") else ""
        raise ValueError(
            f"{SPLIT_MERGED_PATH} from {where} ({path}) has git blob sha1 {actual}, expected "
            f"{expected} (IAAR-Shanghai/CRUD_RAG@{CRUD_COMMIT[:7]}).{lfs} Delete it and download again."
        )
    return path


def _split_merged_file(mirror: PathLike | None, cache_dir: PathLike | None) -> Path:
    """A blob-checked local copy of upstream's split_merged.json (mirror, cache or download)."""
    if SPLIT_MERGED_PATH in fetch.load_manifest():
        # Once the sha256 is in the manifest, the usual mirror/cache/download rules apply.
        return _check_blob(fetch.data_path(SPLIT_MERGED_PATH, mirror=mirror, cache_dir=cache_dir), "data_path")

    if mirror is None:
        mirror = os.environ.get(fetch.MIRROR_ENV) or None
    if mirror is not None:
        candidate = Path(mirror).expanduser() / SPLIT_MERGED_PATH
        if candidate.is_file():
            return _check_blob(candidate, f"mirror {mirror}")
    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else fetch.default_cache_dir()
    cached = cache_root / SPLIT_MERGED_PATH
    if cached.is_file():
        if git_blob_sha1(cached) == SPLIT_MERGED_BLOB_SHA1:
            return cached
        cached.unlink()  # a partial or stale download: fetch again

    import pooch

    # pooch logs "Downloading data from <url>" at INFO before it tries; with source="auto" on an
    # offline machine that line is printed for an attempt that then falls back to the mirror. Our own
    # warning below reports a download that succeeded, and the progress bar shows one in flight.
    pooch_logger = pooch.get_logger()
    level = pooch_logger.level
    pooch_logger.setLevel(max(level, logging.WARNING))
    try:
        got = Path(
            pooch.retrieve(
                SPLIT_MERGED_URL,
                known_hash=None,  # sha256 unknown: the git blob sha1 is checked below instead
                fname=cached.name,
                path=cached.parent,
                progressbar=True,
            )
        )
    except Exception as exc:  # offline, DNS, HTTP errors...
        raise RuntimeError(
            f"could not download {SPLIT_MERGED_URL} ({type(exc).__name__}: {exc}). This machine may be "
            f"offline; put a copy at <mirror>/{SPLIT_MERGED_PATH} or go online."
        ) from exc
    finally:
        pooch_logger.setLevel(level)
    try:
        _check_blob(got, "download")
    except ValueError:
        got.unlink(missing_ok=True)
        raise
    digest = fetch.sha256_file(got)
    logger.warning(
        "Downloaded %s (git blob %s verified). Its sha256 is %s: add the manifest row "
        "'%s\\t%s\\t%s' so it can be checked like every other file.",
        SPLIT_MERGED_PATH, SPLIT_MERGED_BLOB_SHA1, digest, SPLIT_MERGED_PATH, digest, SPLIT_MERGED_URL,
    )
    return got


def _normalise_item(raw: Mapping[str, Any], task: str, source: str, *, news_optional: bool = False) -> dict[str, Any]:
    """One QA item in chunkwise's shape; ``news_optional`` admits items that carry no gold news.

    Upstream's split gives every field. The mirror's ``qa_1doc_first50.json`` has only ``ID``,
    ``questions`` and ``answers``: such an item gets ``event=None`` and ``news=[]`` (it has no
    gold article; its answer must be found in the corpus, as CRUD-RAG itself retrieves it).
    """
    n_news = CRUD_QA_TASKS[task]
    required = ("ID", "questions", "answers") if news_optional else ("ID", "event", "questions", "answers")
    missing = [k for k in required if k not in raw]
    if missing:
        raise ValueError(f"{task} item {raw.get('ID', '?')!r} from {source} lacks fields {missing}")
    news = [raw[f"news{k}"] for k in range(1, 4) if raw.get(f"news{k}")]
    if len(news) != n_news and not (news_optional and not news):
        raise ValueError(
            f"{task} item {raw['ID']!r} from {source} has {len(news)} news texts, expected {n_news}"
        )
    for name in ("ID", "event", "questions", "answers"):
        if name == "event" and raw.get("event") is None and news_optional:
            continue
        if not isinstance(raw[name], str):
            raise ValueError(f"{task} item {raw['ID']!r}: field {name!r} is not a string: {raw[name]!r}")
    return {
        "ID": raw["ID"],
        "event": raw.get("event"),
        "news": [str(n) for n in news],
        "questions": raw["questions"],
        "answers": raw["answers"],
        "task": task,
        "source": source,
    }


def _mirror_1doc_first50(mirror: PathLike | None, cache_dir: PathLike | None) -> tuple[list[dict[str, Any]], str]:
    """The first 50 ``questanswer_1doc`` items (``qa_1doc_first50.json``), with the gold news of
    those also in ``qa_subset.json`` attached (questions must agree; answers come from first50)."""
    path = fetch.data_path(_QA_FIRST50_PATH, mirror=mirror, cache_dir=cache_dir)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    raw = data.get("questanswer_1doc")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path} has no 'questanswer_1doc' list of items")
    with open(fetch.data_path(_QA_SUBSET_PATH, mirror=mirror, cache_dir=cache_dir), encoding="utf-8") as f:
        complete = {r["ID"]: r for r in json.load(f).get("questanswer_1doc", [])}
    label = "mirror:qa_1doc_first50.json"
    rows = []
    for r in raw:
        full = complete.get(r.get("ID"))
        if full is not None:
            if full["questions"] != r.get("questions"):
                raise ValueError(
                    f"item {r['ID']!r}: qa_1doc_first50.json and qa_subset.json disagree on the question; "
                    f"the mirror is inconsistent (check MANIFEST.tsv hashes)"
                )
            # first50's answer is the clean copy (the subset's carries line-wrap '>' characters)
            r = dict(full, answers=r["answers"])
        rows.append(_normalise_item(r, "questanswer_1doc", label, news_optional=True))
    return rows, label


def load_crud_qa(
    task: str,
    source: str = "auto",
    mirror: PathLike | None = None,
    *,
    cache_dir: PathLike | None = None,
) -> Any:
    """Load one CRUD-RAG question-answering task as a :class:`datasets.Dataset`.

    Parameters
    ----------
    task : {"questanswer_1doc", "questanswer_2docs", "questanswer_3docs"}
        The task: questions whose answer needs 1, 2 or 3 news articles.
    source : {"auto", "upstream", "mirror", "subset"}, default "auto"
        ``"upstream"``: the full split ``data/crud_split/split_merged.json`` at the pinned commit
        (from ``<mirror>/crud_rag/crud_split/split_merged.json``, the download cache, or a
        download with :mod:`pooch`), checked against its git blob sha1
        (:data:`SPLIT_MERGED_BLOB_SHA1`); about 800 items per task. ``"mirror"``: what the
        offline mirror has -- for ``questanswer_1doc`` the first 50 items of upstream's split
        (``crud_rag/qa_1doc_first50.json``: question and answer only; the 4 also in
        ``qa_subset.json`` get their gold news from there, the other 46 have ``news=[]``), for the
        2- and 3-document tasks the 3 complete items each of ``crud_rag/qa_subset.json``.
        ``"subset"``: only the complete items of ``qa_subset.json`` (4 / 3 / 3 per task, every
        one with its gold news). ``"auto"``: upstream, else (e.g. offline) ``"mirror"``.
    mirror : str or os.PathLike, optional
        Local data mirror; default ``$CHUNKWISE_DATA_MIRROR``.
    cache_dir : str or os.PathLike, optional
        Download cache; default ``$CHUNKWISE_CACHE_DIR/data`` or ``~/.cache/chunkwise/data``.

    Returns
    -------
    datasets.Dataset
        One row per item, upstream's order (no shuffling, as upstream's ``quick_start.py``
        calls its loader). Columns: ``ID`` (str; the same IDs recur across the three tasks with
        different items), ``event`` (str, None for an item without it), ``news`` (list of 1-3 str:
        the gold articles ``news1``.. in order; empty for an item that has no gold article), ``questions`` (str: one question), ``answers`` (str: the
        reference answer), ``task`` (str) and ``source`` (str: ``"upstream:split_merged.json@1aace38"``
        ``"mirror:qa_1doc_first50.json"`` or ``"mirror:qa_subset.json"``).
        ``Dataset.info.description`` says the same.

    Raises
    ------
    ValueError
        For an unknown task or source, a file with the wrong hash, or a malformed item.
    RuntimeError
        With ``source="upstream"`` when the split cannot be obtained (offline without a copy);
        with ``"mirror"`` when no mirror holds the subset.

    Warns
    -----
    UserWarning
        Whenever mirror items are returned (they are a sample, not the benchmark), and when
        ``"auto"`` falls back to them (with the reason).
    """
    import datasets

    if task not in CRUD_QA_TASKS:
        raise ValueError(f"unknown CRUD-RAG QA task {task!r}; expected one of {tuple(CRUD_QA_TASKS)}")
    if source not in ("auto", "upstream", "mirror", "subset"):
        raise ValueError(f"source must be 'auto', 'upstream', 'mirror' or 'subset', got {source!r}")

    reason = None
    if source in ("auto", "upstream"):
        try:
            path = _split_merged_file(mirror, cache_dir)
        except (RuntimeError, OSError) as exc:
            if source == "upstream":
                raise
            detail = str(exc)
            reason = f"{type(exc).__name__}: {detail[:160]}{'...' if len(detail) > 160 else ''}"
        else:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if task not in data:
                raise ValueError(f"{path} has no task {task!r}; it has {sorted(data)}")
            label = f"upstream:split_merged.json@{CRUD_COMMIT[:7]}"
            rows = [_normalise_item(r, task, label) for r in data[task]]
            logger.info("CRUD-RAG %s: %d items from upstream split_merged.json (%s)", task, len(rows), path)
            info = datasets.DatasetInfo(
                description=f"CRUD-RAG {task}: {len(rows)} items from upstream {path.name} "
                f"(IAAR-Shanghai/CRUD_RAG@{CRUD_COMMIT[:7]}, git blob verified)."
            )
            return datasets.Dataset.from_list(rows, info=info)

    because = f" because upstream split_merged.json is unavailable ({reason})" if reason else ""
    if source in ("auto", "mirror") and task == "questanswer_1doc":
        rows, label = _mirror_1doc_first50(mirror, cache_dir)
        n_gold = sum(bool(r["news"]) for r in rows)
        what = (f"the first {len(rows)} items of upstream's split from qa_1doc_first50.json ({n_gold} with their "
                f"gold news from qa_subset.json, {len(rows) - n_gold} without)")
    else:
        path = fetch.data_path(_QA_SUBSET_PATH, mirror=mirror, cache_dir=cache_dir)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        label = "mirror:qa_subset.json"
        rows = [_normalise_item(r, task, label) for r in data.get(task, [])]
        what = f"the {len(rows)} complete items of this task in qa_subset.json"
    warnings.warn(
        f"CRUD-RAG {task}: using the OFFLINE MIRROR: {what}{because}. This is NOT the benchmark "
        f"(about 800 items per task): numbers from it are a sample, not CRUD-RAG results.",
        UserWarning,
        stacklevel=2,
    )
    info = datasets.DatasetInfo(
        description=f"CRUD-RAG {task}: {len(rows)} items from the offline mirror ({what}; NOT the full "
        f"benchmark){because}."
    )
    return datasets.Dataset.from_list(rows, info=info)


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------


def crud_corpus_parts() -> list[str]:
    """Names of the corpus files of upstream ``data/80000_docs``, in our loading order.

    ``documents_dup_part_{1..15}_part_{1..3}`` then ``documents_hallu.txt_part_{1..3}``.
    Parts 1-11 and the hallu parts are in the manifest; the names of parts 12-15 follow the same
    pattern but are not in the manifest (not verified against upstream's tree).
    """
    names = [f"documents_dup_part_{i}_part_{j}" for i in range(1, _DUP_PARTS + 1) for j in range(1, _SUB_PARTS + 1)]
    names += [f"documents_hallu.txt_part_{j}" for j in range(1, _SUB_PARTS + 1)]
    return names


def _select_parts(parts: Iterable[str | int] | str | int | None) -> list[str]:
    everything = crud_corpus_parts()
    if parts is None:
        return everything
    if isinstance(parts, (str, int)):
        parts = [parts]
    chosen: list[str] = []
    for p in parts:
        if isinstance(p, bool):
            raise ValueError(f"bad corpus part {p!r}")
        if isinstance(p, int):
            if not 1 <= p <= _DUP_PARTS:
                raise ValueError(f"corpus part number must be 1..{_DUP_PARTS}, got {p}")
            names = [f"documents_dup_part_{p}_part_{j}" for j in range(1, _SUB_PARTS + 1)]
        elif p == "hallu":
            names = [f"documents_hallu.txt_part_{j}" for j in range(1, _SUB_PARTS + 1)]
        elif p in everything:
            names = [p]
        else:
            raise ValueError(
                f"unknown corpus part {p!r}; give a number 1..{_DUP_PARTS}, 'hallu', or a file name "
                f"from crud_corpus_parts()"
            )
        chosen.extend(n for n in names if n not in chosen)
    order = {n: i for i, n in enumerate(everything)}
    return sorted(chosen, key=order.__getitem__)


@dataclass
class CorpusSummary:
    """What :func:`load_crud_corpus` loaded.

    Attributes
    ----------
    loaded : dict of str -> int
        Part file name -> number of documents read from it.
    missing : dict of str -> str
        Part file name -> why it was not loaded.
    n_docs : int
        Documents loaded in all.
    """

    loaded: dict[str, int] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    n_docs: int = 0

    def __str__(self) -> str:
        lines = [f"CRUD-RAG corpus: {self.n_docs} documents from {len(self.loaded)} part files"]
        if self.missing:
            lines.append(f"{len(self.missing)} part files missing:")
            lines += [f"  {name}: {why}" for name, why in self.missing.items()]
        return "\n".join(lines)


class CrudCorpus(list):
    """A list of article texts (``list[str]``) that also carries ids and a load summary.

    Attributes
    ----------
    ids : list of str
        ``"<part file>:<line number>"`` (1-based) for each text, stable whichever parts are loaded.
    summary : CorpusSummary
    """

    def __init__(self, texts: Iterable[str] = (), ids: Iterable[str] = (), summary: CorpusSummary | None = None):
        super().__init__(texts)
        self.ids: list[str] = list(ids)
        if len(self.ids) != len(self):
            raise ValueError(f"{len(self)} texts but {len(self.ids)} ids")
        self.summary = summary if summary is not None else CorpusSummary(n_docs=len(self))


def load_crud_corpus(
    mirror: PathLike | None = None,
    parts: Iterable[str | int] | str | int | None = None,
    *,
    cache_dir: PathLike | None = None,
    warn: bool = True,
) -> CrudCorpus:
    """Load the retrieval corpus (upstream ``data/80000_docs``): one news article per line.

    Parameters
    ----------
    mirror : str or os.PathLike, optional
        Local data mirror; default ``$CHUNKWISE_DATA_MIRROR``.
    parts : iterable of (int or str), optional
        Which part files: numbers ``1..15`` (the three files of ``documents_dup_part_<n>``),
        ``"hallu"`` (the three ``documents_hallu.txt_part_*`` files), or file names from
        :func:`crud_corpus_parts`. Default: all 48 files (upstream indexes the whole folder).
    cache_dir : str or os.PathLike, optional
        Download cache (files absent from the mirror are downloaded when online).
    warn : bool, default True
        Warn when part files are missing.

    Returns
    -------
    CrudCorpus
        A ``list[str]`` of articles (file order, then line order; empty lines skipped, a trailing
        ``"\\r"`` removed) with ``.ids`` (``"<part>:<line>"``) and ``.summary``
        (:class:`CorpusSummary`: documents per loaded part, and why each missing part is missing).
        With our mirror: 68,798 documents (parts 1-11: 63,668; hallu: 5,130); parts 12-15 (about
        23,152 documents upstream) are reported missing: they are not in the manifest.

    Raises
    ------
    ValueError
        For an unknown part, or a mirror file whose sha256 differs from the manifest's.

    Warns
    -----
    UserWarning
        When some requested parts are missing (the summary lists them).
    """
    manifest = fetch.load_manifest()
    summary = CorpusSummary()
    texts: list[str] = []
    ids: list[str] = []
    mirror_root = mirror if mirror is not None else (os.environ.get(fetch.MIRROR_ENV) or None)
    for name in _select_parts(parts):
        rel = f"{_CORPUS_DIR}/{name}"
        if rel not in manifest:
            present = mirror_root is not None and (Path(mirror_root).expanduser() / rel).is_file()
            summary.missing[name] = (
                "in the mirror but not in the manifest (no sha256 to check it against): add a manifest row"
                if present
                else "not in the manifest or the mirror (upstream only)"
            )
            continue
        try:
            path = fetch.data_path(rel, mirror=mirror, cache_dir=cache_dir)
        except RuntimeError as exc:  # not in the mirror and not downloadable
            summary.missing[name] = f"unavailable: {exc}"
            continue
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
        n = 0
        for lineno, line in enumerate(lines, start=1):
            line = line.removesuffix("\r")
            if not line.strip():
                continue
            texts.append(line)
            ids.append(f"{name}:{lineno}")
            n += 1
        summary.loaded[name] = n
    summary.n_docs = len(texts)
    if summary.missing and warn:
        warnings.warn(
            f"CRUD-RAG corpus: {len(summary.missing)} of {len(summary.missing) + len(summary.loaded)} part "
            f"files missing ({', '.join(list(summary.missing)[:4])}{', ...' if len(summary.missing) > 4 else ''}); "
            f"loaded {summary.n_docs} documents. See the returned corpus's .summary.",
            UserWarning,
            stacklevel=2,
        )
    return CrudCorpus(texts, ids, summary)


# ---------------------------------------------------------------------------------------------
# RAGQuestEval ground truth
# ---------------------------------------------------------------------------------------------


def load_quest_gt(
    task: str,
    mirror: PathLike | None = None,
    *,
    cache_dir: PathLike | None = None,
    mismatch: str = "keep",
) -> dict[str, dict[str, Any]]:
    """Load upstream's cached RAGQuestEval ground truth for a QA task.

    RAGQuestEval (CRUD-RAG's ``src/metric/quest_eval.py``) asks an LLM to write questions about
    the key facts of the reference answer, then answers them from the reference (cached here)
    and from the generated text, and compares the two answer lists.

    Parameters
    ----------
    task : {"questanswer_1doc", "questanswer_2docs", "questanswer_3docs"}
    mirror, cache_dir
        As :func:`load_crud_corpus`.
    mismatch : {"keep", "truncate", "drop", "raise"}, default "keep"
        What to do with entries whose ``question`` and ``answers`` lists differ in length (40, 18
        and 16 of the 800 entries in the three files): ``"keep"`` them as they are (``aligned`` is
        False); ``"truncate"`` both lists to the shorter length (pairs by position, as a ``zip``
        would); ``"drop"`` the entry; ``"raise"`` a ``ValueError``.

    Returns
    -------
    dict of str -> dict
        Item ``ID`` -> ``{"key_info": list[str], "question": list[str], "answers": list[str],
        "aligned": bool}``, in file order. Upstream's ``"无法推断"`` ("cannot be inferred")
        answers are kept as they are.

    Raises
    ------
    ValueError
        For an unknown task or mismatch policy, a malformed entry, or a mismatch with
        ``mismatch="raise"``.
    """
    if task not in _QUEST_GT_FILES:
        raise ValueError(f"unknown CRUD-RAG QA task {task!r}; expected one of {tuple(_QUEST_GT_FILES)}")
    if mismatch not in ("keep", "truncate", "drop", "raise"):
        raise ValueError(f"mismatch must be 'keep', 'truncate', 'drop' or 'raise', got {mismatch!r}")
    path = fetch.data_path(_QUEST_GT_FILES[task], mirror=mirror, cache_dir=cache_dir)
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    out: dict[str, dict[str, Any]] = {}
    n_mismatch = 0
    for item_id, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{path.name}: entry {item_id!r} is not an object")
        questions = [str(q) for q in entry.get("question", [])]
        answers = [str(a) for a in entry.get("answers", [])]
        key_info = [str(k) for k in entry.get("key_info", [])]
        aligned = len(questions) == len(answers)
        if not aligned:
            n_mismatch += 1
            if mismatch == "raise":
                raise ValueError(
                    f"{path.name}: entry {item_id!r} has {len(questions)} questions but {len(answers)} answers"
                )
            if mismatch == "drop":
                continue
            if mismatch == "truncate":
                n = min(len(questions), len(answers))
                questions, answers = questions[:n], answers[:n]
        out[str(item_id)] = {"key_info": key_info, "question": questions, "answers": answers, "aligned": aligned}
    if n_mismatch:
        logger.info("%s: %d of %d entries have len(question) != len(answers) (policy %r)",
                    path.name, n_mismatch, len(raw), mismatch)
    return out


# ---------------------------------------------------------------------------------------------
# Pooled corpus
# ---------------------------------------------------------------------------------------------


@dataclass
class PooledCorpus:
    """A small retrieval corpus: the BM25 neighbours of every question (and, optionally, gold news).

    Attributes
    ----------
    texts : list of str
        The documents: first every distinct gold news text (item order), then every retrieved
        corpus document (question order, then rank), each once.
    ids : list of str
        ``"gold:<sha1 of the text, 12 hex>"`` for gold news, the corpus id (e.g.
        ``"documents_dup_part_3_part_2:17"``) for retrieved ones.
    origin : list of str
        ``"gold"`` or ``"bm25"`` per document (a corpus document that equals a gold text is kept
        once, as gold).
    gold : dict of str -> list of str
        Item key (``"<task>/<ID>"``, or ``ID`` when items have no task) -> ids of its gold news.
    retrieved : dict of str -> list of str
        Item key -> ids of its top-N BM25 documents, best first.
    top_n : int
    n_corpus_docs : int
        Size of the corpus the BM25 search ran over.
    timings : dict of str -> float
        Seconds: ``"index"`` (BM25 index of the corpus; 0 when an index was given), ``"search"``.
    add_gold : bool
        Whether the items' gold news were added (:func:`pooled_corpus`'s ``add_gold``).
    """

    texts: list[str]
    ids: list[str]
    origin: list[str]
    gold: dict[str, list[str]]
    retrieved: dict[str, list[str]]
    top_n: int
    n_corpus_docs: int
    timings: dict[str, float]
    add_gold: bool = True

    def __len__(self) -> int:
        return len(self.texts)


def _item_key(item: Mapping[str, Any]) -> str:
    task = item.get("task")
    return f"{task}/{item['ID']}" if task else str(item["ID"])


def _gold_id(text: str) -> str:
    return "gold:" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def pooled_corpus(
    items: Iterable[Mapping[str, Any]],
    corpus: Sequence[str],
    top_n: int = 50,
    *,
    ids: Sequence[str] | None = None,
    bm25: Any = None,
    tokenizer: str = "jieba",
    n_jobs: int = 1,
    cache_dir: PathLike | None = None,
    show_progress: bool = False,
    add_gold: bool = True,
) -> PooledCorpus:
    """Build a *pooled* retrieval corpus: the top-N BM25 documents per question (plus gold news).

    Embedding all ~69k articles (hundreds of thousands of 128-token chunks) takes hours on a
    small CPU machine. Pooling keeps the retrieval problem honest at a fraction of the cost: every
    question's gold articles are in the pool, and so are the documents a lexical retriever finds
    hardest to tell apart from them -- its top-N over the *whole* available corpus -- for every
    question, pooled together (as TREC pools judged documents). Retrieval over the pool is easier
    than over the full corpus (fewer distractors), so results on it are labelled "pooled".

    Note that CRUD-RAG removed the gold articles themselves from ``80000_docs`` (other outlets'
    reports of the same events remain), so without the gold news added here the answer may
    not be in the corpus at all.

    Parameters
    ----------
    items : iterable of mapping
        QA items with ``ID``, ``questions`` (the query) and ``news`` (gold texts), e.g. the rows
        of :func:`load_crud_qa` (of one or several tasks).
    corpus : sequence of str
        The documents to search, e.g. :func:`load_crud_corpus` (whose ``.ids`` are used).
    top_n : int, default 50
        Documents retrieved per question.
    ids : sequence of str, optional
        Document ids; default ``corpus.ids`` when present, else ``"corpus:<index>"``.
    bm25 : chunkwise.retrieval.BM25Retriever, optional
        A BM25 index already built over ``corpus`` (same order); built here otherwise.
    tokenizer : {"jieba", "char"}, default "jieba"
        Tokenizer of the BM25 index built here (see :class:`chunkwise.retrieval.BM25Retriever`).
    n_jobs : int, default 1
        Processes used to tokenize the corpus.
    cache_dir : str or os.PathLike, optional
        Where the BM25 index is saved and reused (keyed by the corpus content and settings).
    show_progress : bool, default False
    add_gold : bool, default True
        Add every item's gold news (``news``; items without any contribute none). With
        ``False`` the pool is what a retriever over the corpus can find, for every item alike
        (CRUD-RAG's own setting: the benchmark retrieves from ``80000_docs``).

    Returns
    -------
    PooledCorpus
        ``gold`` lists each item's gold ids when ``add_gold``, else empty lists.

    Raises
    ------
    ValueError
        If ``top_n < 1`` or the ids do not match the corpus.
    """
    from chunkwise.retrieval import BM25Retriever

    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise ValueError(f"top_n must be a positive int, got {top_n!r}")
    if ids is None:
        ids = getattr(corpus, "ids", None) or [f"corpus:{i}" for i in range(len(corpus))]
    ids = list(ids)
    if len(ids) != len(corpus):
        raise ValueError(f"{len(corpus)} documents but {len(ids)} ids")
    items = list(items)

    t0 = time.perf_counter()
    if bm25 is None:
        bm25 = BM25Retriever(
            list(zip(ids, corpus)), language="zh", tokenizer=tokenizer, n_jobs=n_jobs, cache_dir=cache_dir,
            show_progress=show_progress, name="bm25-pool",
        )
        t_index = time.perf_counter() - t0
    else:
        t_index = 0.0

    texts: list[str] = []
    out_ids: list[str] = []
    origin: list[str] = []
    seen_text: dict[str, str] = {}
    gold: dict[str, list[str]] = {}
    for item in items:
        key = _item_key(item)
        gold[key] = []
        for text in (item["news"] if add_gold else ()):
            if text not in seen_text:
                gid = _gold_id(text)
                seen_text[text] = gid
                texts.append(text)
                out_ids.append(gid)
                origin.append("gold")
            gold[key].append(seen_text[text])

    t1 = time.perf_counter()
    retrieved: dict[str, list[str]] = {}
    seen_id = set(out_ids)
    for item in items:
        key = _item_key(item)
        hits = bm25.retrieve(item["questions"], top_n)
        retrieved[key] = []
        for hit in hits:
            doc_id, text = hit[0], hit[1]
            if text in seen_text:  # identical to a gold text (or already pooled)
                retrieved[key].append(seen_text[text])
                continue
            retrieved[key].append(doc_id)
            if doc_id not in seen_id:
                seen_id.add(doc_id)
                seen_text[text] = doc_id
                texts.append(text)
                out_ids.append(doc_id)
                origin.append("bm25")
    t_search = time.perf_counter() - t1
    return PooledCorpus(
        texts=texts, ids=out_ids, origin=origin, gold=gold, retrieved=retrieved, top_n=top_n,
        n_corpus_docs=len(corpus), timings={"index": t_index, "search": t_search}, add_gold=bool(add_gold),
    )


def save_pool(pool: PooledCorpus, path: PathLike) -> Path:
    """Write a pooled corpus's *membership* (ids, origins, text sha1s; no texts) as JSON.

    The file is small enough to commit, so a book build can rebuild the same pool with
    :func:`load_pool` without searching the whole corpus again (a BM25 index over all ~69k
    articles takes minutes and over a gigabyte of memory).

    Parameters
    ----------
    pool : PooledCorpus
    path : str or os.PathLike
        Output file (parent folders are created).

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": "chunkwise-crud-pool/1",
        "top_n": pool.top_n,
        "add_gold": pool.add_gold,
        "n_corpus_docs": pool.n_corpus_docs,
        "ids": pool.ids,
        "origin": pool.origin,
        "sha1": [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in pool.texts],
        "gold": pool.gold,
        "retrieved": pool.retrieved,
    }
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def load_pool(
    path: PathLike,
    items: Iterable[Mapping[str, Any]],
    corpus: Sequence[str] | None = None,
    top_n: int | None = None,
) -> PooledCorpus:
    """Rebuild a pooled corpus from :func:`save_pool`'s file, the QA items and the corpus.

    The pool is rebuilt *for the given items* (and ``top_n``): when they are a subset of the
    items the file was pooled for (fewer tasks, or the first ``n`` items of each), or ``top_n``
    is smaller than the file's, only the documents those items pooled -- their gold news and
    their first ``top_n`` BM25 documents (the lists are best first) -- are kept, which is what
    :func:`pooled_corpus` over the subset would have pooled (documents in file order). Gold
    texts come from the items' ``news``; retrieved documents from ``corpus`` by id (its
    ``.ids``, e.g. :func:`load_crud_corpus`). Every text is checked against the recorded sha1.

    Parameters
    ----------
    path : str or os.PathLike
    items : iterable of mapping
        QA items with ``ID`` (and ``task``, as when the pool was made) and ``news``; each must
        be one of the file's items.
    corpus : sequence of str, optional
        Needed when the kept documents include retrieved (``"bm25"``) ones.
    top_n : int, optional
        BM25 documents per question to keep, at most the file's ``top_n``; default: the file's.

    Returns
    -------
    PooledCorpus
        ``timings`` is ``{"index": 0.0, "search": 0.0}`` (nothing was searched).

    Raises
    ------
    ValueError
        If the file is not a pool file, ``top_n`` exceeds the file's, an item is not in it, a
        kept document is missing from
        the items or the corpus, or a text's sha1 differs (the corpus or QA data changed:
        rebuild the pool with :func:`pooled_corpus`).
    """
    path = Path(path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("format") != "chunkwise-crud-pool/1":
        raise ValueError(f"{path} is not a chunkwise pool file (format {doc.get('format')!r})")
    items = list(items)
    wanted = {_item_key(item) for item in items}
    absent = sorted(wanted - set(doc["gold"]))
    if absent:
        raise ValueError(
            f"{path}: item(s) {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''} are not in this pool "
            f"({len(doc['gold'])} items); rebuild the pool for these items with pooled_corpus"
        )
    file_top_n = int(doc["top_n"])
    if top_n is None:
        top_n = file_top_n
    if isinstance(top_n, bool) or not isinstance(top_n, int) or not 1 <= top_n <= file_top_n:
        raise ValueError(f"{path}: top_n must be an int from 1 to the pool's {file_top_n}, got {top_n!r}; "
                         f"a larger pool needs pooled_corpus")
    keys = [k for k in doc["gold"] if k in wanted]  # file order
    retrieved = {k: list(doc["retrieved"][k][:top_n]) for k in keys}
    keep = {d for k in keys for d in doc["gold"][k] + retrieved[k]}
    gold_text = {}
    for item in items:
        for text in item["news"]:
            gold_text[_gold_id(text)] = text
    by_id: dict[str, int] = {}
    if corpus is not None:
        ids = getattr(corpus, "ids", None) or [f"corpus:{i}" for i in range(len(corpus))]
        by_id = {d: i for i, d in enumerate(ids)}
    texts, kept_ids, kept_origin = [], [], []
    for doc_id, origin, sha in zip(doc["ids"], doc["origin"], doc["sha1"], strict=True):
        if doc_id not in keep:
            continue
        if origin == "gold":
            text = gold_text.get(doc_id)
            where = "the QA items' gold news"
        else:
            text = corpus[by_id[doc_id]] if doc_id in by_id else None
            where = "the corpus" if corpus is not None else "the corpus (none was given)"
        if text is None:
            owners = [k for k, g in doc["gold"].items() if doc_id in g and k not in wanted]
            if origin == "gold" and owners:  # BM25 found another item's gold article for these items
                where += f" (it is the gold news of {owners[0]}, which BM25 retrieved for these items: load that item too)"
            raise ValueError(f"{path}: document {doc_id!r} is not in {where}; load the same items/corpus parts, or rebuild the pool")
        if hashlib.sha1(text.encode("utf-8")).hexdigest() != sha:
            raise ValueError(f"{path}: document {doc_id!r} differs from the one pooled (sha1 mismatch); rebuild the pool with pooled_corpus")
        texts.append(text)
        kept_ids.append(doc_id)
        kept_origin.append(origin)
    return PooledCorpus(
        texts=texts, ids=kept_ids, origin=kept_origin, gold={k: list(doc["gold"][k]) for k in keys},
        retrieved=retrieved, top_n=top_n,
        n_corpus_docs=int(doc["n_corpus_docs"]), timings={"index": 0.0, "search": 0.0},
        add_gold=bool(doc.get("add_gold", True)),  # files written before the option always added gold
    )
