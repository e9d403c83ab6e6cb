"""The analysis plan: every headline verdict's specification, declared before it is run.

A verdict computed under one specification chosen by its author, at times after seeing
results, says more than its evidence. The plan (``data/findings/plan.toml``) fixes, for every
headline question of the findings page, the *primary specification* (arms, reference, metric,
k or token budget, corpora, interval method, decision rule and the practical margin ``delta``)
and the *declared alternatives* the verdict must survive (another reference, another metric,
each corpus, each seed, another interval method, missing answers scored 0 ...). A chapter reads
its specifications from the plan (:func:`specifications`), runs each one, and hands the results
to :func:`chunkwise.evaluation.robustness.classify`.

Amendments. The plan ends with a ``[[ledger]]`` of records, appended and never edited: one
``declared`` record per entry, then an ``amended`` record for every later change of that entry,
with its date, its reason and what the previous specification gave. Each record holds the hash of
its entry's content after the change (:func:`entry_hash`) and a link hash over the previous
record (a hash chain), so

- an entry edited without a new ledger record no longer matches its last record's hash;
- a ledger record edited or removed breaks every later link.

:func:`check_plan` raises on either; the test suite also checks that every committed version of
the file's ledger is a prefix of the current one (append-only). ``chunkwise plan amend`` appends a
record. Entries may also carry ``prior_amendments``: changes made before the plan existed,
stated with what the earlier specification gave, shown on the page like the ledger's.

The page shows every amendment (:func:`amendments`); the findings page and the chapters print a
verdict's robustness class beside it.

References
----------
U. Simonsohn, J. P. Simmons and L. D. Nelson, "Specification curve analysis", *Nature Human
Behaviour* 4, 1208-1214 (2020): run every reasonable specification, show them all, mark the
primary one.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DECISION_RULES",
    "KINDS",
    "PlanError",
    "PlanEntry",
    "Plan",
    "amendments",
    "append_ledger_record",
    "check_plan",
    "entry_hash",
    "link_hash",
    "load_plan",
    "plan_path",
    "specifications",
]

#: How a specification's interval becomes a verdict (:mod:`chunkwise.evaluation.robustness`).
DECISION_RULES: dict[str, str] = {
    "difference": "one paired difference: above 0, below 0, within +/- delta (two one-sided tests), else cannot tell",
    "pattern": "two paired differences (the gap where the effect is expected and the interaction): "
               "supports when both lie above 0, contradicts when either lies below 0, "
               "no effect larger than delta when the interaction lies within +/- delta, else cannot tell",
    "k_winner": "the chunker ranked first at k = 5 against the one ranked first at the larger k: yes when both "
                "leads lie above 0, no when the same chunker leads alone at both, else cannot tell",
    "order": "a measured order against a stated one: yes when every pair is ordered as stated by more than delta, "
             "no when a pair is ordered the other way by more than delta, else cannot tell",
}

#: Entry kinds: a ``test`` runs through the robustness panel; a ``reproduction`` is a number held
#: against a published one with a tolerance (no sampling, no alternatives); ``not assessed`` is a
#: statistical verdict whose panel is declared but not yet run by its chapter.
KINDS = ("test", "reproduction")

_REQUIRED_PRIMARY = ("metric", "interval", "confidence")
_LEDGER_FIELDS = ("entry", "date", "kind", "reason", "previous", "hash", "link")


class PlanError(ValueError):
    """The analysis plan is malformed, or an entry changed without an amendment."""


@dataclass(frozen=True)
class PlanEntry:
    """One headline question's declared analysis.

    ``primary`` is the primary specification (a flat mapping of names to values); every
    alternative is ``{"name": ..., "set": {...}}``: the primary with the ``set`` values replaced.
    ``delta`` is the practical margin in ``unit`` (an effect within +/- delta is too small to act
    on); ``words`` maps the rule's generic verdicts (``above``, ``below``) to the claim's words.
    """

    entry_id: str
    headline: str
    chapter: str
    kind: str
    question: str
    rule: str
    delta: float
    unit: str
    primary: Mapping[str, Any]
    alternatives: tuple[Mapping[str, Any], ...]
    words: Mapping[str, str]
    prior_amendments: tuple[Mapping[str, Any], ...]
    raw: Mapping[str, Any] = field(repr=False)

    @property
    def hash(self) -> str:
        """:func:`entry_hash` of the entry's declared content."""
        return entry_hash(self.raw)


@dataclass(frozen=True)
class Plan:
    """The parsed plan: ``entries`` by id and the ``ledger`` records in file order."""

    path: Path
    entries: Mapping[str, PlanEntry]
    ledger: tuple[Mapping[str, Any], ...]

    def __getitem__(self, entry_id: str) -> PlanEntry:
        try:
            return self.entries[entry_id]
        except KeyError:
            raise PlanError(f"{entry_id!r} is not an entry of {self.path}; its entries are "
                            f"{', '.join(sorted(self.entries))}. Declare it there first "
                            "(`chunkwise plan amend` records the declaration).") from None

    def for_headline(self, headline_id: str) -> PlanEntry | None:
        """The entry of a headline question, or None when the plan has none."""
        for e in self.entries.values():
            if e.headline == headline_id:
                return e
        return None


def plan_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path``, else ``<repo>/data/findings/plan.toml``."""
    if path is not None:
        return Path(path)
    from chunkwise._env import repo_root

    return repo_root() / "data" / "findings" / "plan.toml"


def entry_hash(raw: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of an entry's content as canonical JSON (keys sorted), so
    the hash changes with any value and not with the file's layout or comments."""
    text = json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def link_hash(previous_link: str, record: Mapping[str, Any]) -> str:
    """The chain link of a ledger record: SHA-256 (16 hex digits) of the previous record's link
    and this record's fields (``link`` itself excluded). The first record's previous link is
    ``""``."""
    body = {k: record.get(k, "") for k in _LEDGER_FIELDS if k != "link"}
    text = previous_link + "\n" + json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _entry(entry_id: str, raw: Mapping[str, Any], where: str) -> PlanEntry:
    def need(name: str, kind: type | tuple[type, ...]) -> Any:
        if name not in raw:
            raise PlanError(f"{where}: entry {entry_id!r} has no {name!r}")
        value = raw[name]
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise PlanError(f"{where}: entry {entry_id!r}: {name!r} must be {getattr(kind, '__name__', kind)}, "
                            f"got {value!r}")
        return value

    kind = raw.get("kind", "test")
    if kind not in KINDS:
        raise PlanError(f"{where}: entry {entry_id!r}: kind must be one of {KINDS}, got {kind!r}")
    headline = need("headline", str)
    chapter = need("chapter", str)
    question = need("question", str)
    primary = need("primary", dict)
    if kind == "reproduction":
        return PlanEntry(entry_id, headline, chapter, kind, question, "", 0.0, str(raw.get("unit", "")),
                         primary, (), {}, tuple(raw.get("prior_amendments", ())), raw)
    rule = need("rule", str)
    if rule not in DECISION_RULES:
        raise PlanError(f"{where}: entry {entry_id!r}: rule must be one of {sorted(DECISION_RULES)}, got {rule!r}")
    delta = need("delta", (int, float))
    if not delta > 0:
        raise PlanError(f"{where}: entry {entry_id!r}: delta (the practical margin) must be > 0, got {delta!r}")
    missing = [k for k in _REQUIRED_PRIMARY if k not in primary]
    if missing:
        raise PlanError(f"{where}: entry {entry_id!r}: the primary specification lacks {', '.join(missing)}")
    alts = raw.get("alternatives", [])
    if not isinstance(alts, list) or not alts:
        raise PlanError(f"{where}: entry {entry_id!r}: a test needs at least one declared alternative "
                        "([[entry.<id>.alternatives]] with name and set)")
    names: set[str] = set()
    for a in alts:
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not isinstance(a.get("set"), dict):
            raise PlanError(f"{where}: entry {entry_id!r}: each alternative needs a name and a set table, got {a!r}")
        if a["name"] in names or a["name"] == "primary":
            raise PlanError(f"{where}: entry {entry_id!r}: alternative name {a['name']!r} is repeated or reserved")
        names.add(a["name"])
        unknown = [k for k in a["set"] if k not in primary]
        if unknown:
            raise PlanError(f"{where}: entry {entry_id!r}: alternative {a['name']!r} sets {', '.join(unknown)}, "
                            "which the primary specification does not have; declare them in primary first")
    words = raw.get("words", {})
    return PlanEntry(entry_id, headline, chapter, kind, question, rule, float(delta), str(raw.get("unit", "")),
                     primary, tuple(alts), dict(words), tuple(raw.get("prior_amendments", ())), raw)


def load_plan(path: str | os.PathLike[str] | None = None, *, check: bool = True) -> Plan:
    """Read and validate the analysis plan.

    Parameters
    ----------
    path : path-like, optional
        Default ``<repo>/data/findings/plan.toml``.
    check : bool, default True
        Also run :func:`check_plan` (every entry matches its last ledger record; the chain holds).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    PlanError
        Naming the entry or record: a malformed entry, or (with ``check``) an entry changed
        without an amendment or a broken ledger.
    """
    p = plan_path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{p} is not valid TOML: {exc}") from None
    raw_entries = data.get("entry", {})
    if not isinstance(raw_entries, dict) or not raw_entries:
        raise PlanError(f"{p} declares no [entry.<id>] tables")
    entries = {eid: _entry(eid, raw, str(p)) for eid, raw in raw_entries.items()}
    ledger = tuple(data.get("ledger", []))
    plan = Plan(p, entries, ledger)
    if check:
        check_plan(plan)
    return plan


def check_plan(plan: Plan, entries: Sequence[str] | None = None) -> None:
    """Raise unless every entry's content matches its last ledger record and the chain holds.

    ``entries`` limits the content check to those entries (the chain is always checked whole).

    Raises
    ------
    PlanError
        Naming what to do: an entry with no ``declared`` record, an entry whose content hash differs
        from its last record's (changed without an amendment: run ``chunkwise plan amend``), a record
        for an unknown entry, a malformed record, or a link that does not follow from the one before
        (a record edited or removed).
    """
    previous = ""
    last: dict[str, Mapping[str, Any]] = {}
    for n, rec in enumerate(plan.ledger, start=1):
        missing = [k for k in _LEDGER_FIELDS if not isinstance(rec.get(k), str)]
        if missing:
            raise PlanError(f"{plan.path}: ledger record {n} lacks {', '.join(missing)} (text fields)")
        if rec["kind"] not in ("declared", "amended"):
            raise PlanError(f"{plan.path}: ledger record {n}: kind must be 'declared' or 'amended', got {rec['kind']!r}")
        if rec["entry"] not in plan.entries:
            raise PlanError(f"{plan.path}: ledger record {n} names {rec['entry']!r}, which is not an entry; "
                            "entries are never removed (amend them instead)")
        if rec["kind"] == "declared" and rec["entry"] in last:
            raise PlanError(f"{plan.path}: ledger record {n} declares {rec['entry']!r} a second time; "
                            "a change is an 'amended' record")
        if rec["kind"] == "amended" and (rec["entry"] not in last or not rec["reason"].strip()
                                         or not rec["previous"].strip()):
            raise PlanError(f"{plan.path}: ledger record {n} amends {rec['entry']!r} without a declaration "
                            "before it, a reason, or what the previous specification gave")
        want = link_hash(previous, rec)
        if rec["link"] != want:
            raise PlanError(f"{plan.path}: ledger record {n} ({rec['entry']}, {rec['date']}) has link "
                            f"{rec['link']}, but the records before it give {want}: a record was edited or "
                            "removed. The ledger is append-only; restore it from git.")
        previous = rec["link"]
        last[rec["entry"]] = rec
    for eid, e in plan.entries.items():
        if entries is not None and eid not in entries:
            continue
        if eid not in last:
            raise PlanError(f"{plan.path}: entry {eid!r} has no ledger record; declare it with "
                            f"`chunkwise plan amend {eid} --declare --reason ...`")
        if last[eid]["hash"] != e.hash:
            raise PlanError(
                f"{plan.path}: entry {eid!r} changed since its last ledger record ({last[eid]['date']}, "
                f"hash {last[eid]['hash']}, now {e.hash}) without an amendment. Record why and what the "
                f"previous specification gave: `chunkwise plan amend {eid} --reason ... --previous ...`")


def append_ledger_record(path: str | os.PathLike[str] | None, entry_id: str, *, reason: str,
                         previous: str = "", declare: bool = False, date: str | None = None) -> dict[str, str]:
    """Append a ``declared`` or ``amended`` record for ``entry_id`` to the plan's ledger.

    The record holds the entry's current hash and the chain link; the file is appended to, never
    rewritten, so comments and layout stay as they were.

    Parameters
    ----------
    path : path-like or None
        The plan (default :func:`plan_path`).
    entry_id : str
    reason : str
        Why the entry was declared or changed.
    previous : str
        For an amendment: what the previous specification gave (its verdict and interval).
    declare : bool
        A first record for a new entry instead of an amendment.
    date : str, optional
        ISO date; default today (UTC).

    Raises
    ------
    PlanError
        If the entry does not exist, an amendment lacks ``reason`` or ``previous``, or the ledger as it
        stands is broken (fix that first).
    """
    p = plan_path(path)
    plan = load_plan(p, check=False)
    entry = plan[entry_id]
    if not reason.strip():
        raise PlanError("a ledger record needs a reason")
    if not declare and not previous.strip():
        raise PlanError("an amendment must say what the previous specification gave (--previous)")
    # the chain before this record must hold; entries other than this one must match their records
    previous_link = plan.ledger[-1]["link"] if plan.ledger else ""
    rec = {"entry": entry_id, "date": date or _dt.date.today().isoformat(),
           "kind": "declared" if declare else "amended", "reason": reason.strip(),
           "previous": previous.strip(), "hash": entry.hash}
    rec["link"] = link_hash(previous_link, rec)
    trial = Plan(p, plan.entries, (*plan.ledger, rec))
    check_plan(trial, entries=[entry_id])
    lines = ["", "[[ledger]]"] + [f"{k} = {json.dumps(rec[k], ensure_ascii=False)}" for k in _LEDGER_FIELDS]
    with p.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return rec


def specifications(entry: PlanEntry) -> Iterator[tuple[str, dict[str, Any]]]:
    """``("primary", primary)`` then ``(name, primary with the alternative's values set)`` for each
    declared alternative, in the plan's order. The mappings are copies."""
    yield "primary", copy.deepcopy(dict(entry.primary))
    for alt in entry.alternatives:
        spec = copy.deepcopy(dict(entry.primary))
        spec.update(copy.deepcopy(alt["set"]))
        yield str(alt["name"]), spec


def amendments(plan: Plan, entry_id: str) -> list[dict[str, str]]:
    """Every change of an entry, oldest first: its ``prior_amendments`` (before the plan existed)
    and its ``amended`` ledger records, each ``{date, reason, previous}``."""
    entry = plan[entry_id]
    out = [{"date": str(a.get("date", "")), "reason": str(a.get("reason", "")),
            "previous": str(a.get("previous", ""))} for a in entry.prior_amendments]
    out += [{"date": r["date"], "reason": r["reason"], "previous": r["previous"]}
            for r in plan.ledger if r["entry"] == entry_id and r["kind"] == "amended"]
    return out
