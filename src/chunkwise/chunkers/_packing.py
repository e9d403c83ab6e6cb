"""Greedy packing of whole units (sentences, blocks) into token budgets, shared by the
sentence and structure chunkers.

A *unit* is a half-open character span of the source. A *group* is a run of consecutive
units ``units[i:j]``; its text is ``source[units[i].start : units[j - 1].end]`` (the
whitespace between the units is inside it, exactly as in the source) and its size is the
token count of that text measured as a whole.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

from chunkwise.tokens import TokenSpanner

__all__ = ["check_nonneg_int", "make_counter", "pack_units"]


def make_counter(spanner: TokenSpanner) -> Callable[[str], int]:
    """Return ``str -> int``: the number of tokens of a text under ``spanner``.

    A tiktoken-backed spanner (one with ``encode``) counts with ``len(encode(text))``, which
    is the sum of the ``n_tokens`` of its units; other spanners add up ``n_tokens`` over
    ``token_spans(text)``.
    """
    encode = getattr(spanner, "encode", None)
    if callable(encode):
        return lambda s: len(encode(s)) if s else 0
    return lambda s: sum(u[2] for u in spanner.token_spans(s)) if s else 0


def pack_units(
    text: str,
    units: Sequence[tuple[int, int]],
    size: int,
    count: Callable[[str], int],
    overlap_units: int = 0,
) -> list[tuple[int, int, int]]:
    """Pack consecutive units greedily into groups of at most ``size`` tokens.

    Rule: a group starts at unit ``i`` and takes units while the text
    ``text[units[i].start : units[j-1].end]`` measures at most ``size`` tokens (measured
    whole, not summed). A unit that alone is over ``size`` still forms a group of one (the
    callers decide what to do with it before calling, so this only happens for units they
    accept as oversized). The next group starts ``overlap_units`` units before the end of the
    previous one, but always after its start, and later still while the repeated units and
    the first new unit together would be over ``size`` (overlap gives way to progress).

    Lengths are found by galloping then bisecting over the number of units (a token count
    grows when text is appended), so a group of ``k`` units costs ``O(log k)`` measurements.

    Returns
    -------
    list of (i, j, n_tokens)
        Unit ranges ``[i, j)`` in order, with the group's token count.
    """
    n = len(units)
    out: list[tuple[int, int, int]] = []
    measured: dict[tuple[int, int], int] = {}

    def measure(i: int, j: int) -> int:
        key = (i, j)
        if key not in measured:
            measured[key] = count(text[units[i][0] : units[j - 1][1]])
        return measured[key]

    i = 0
    while i < n:
        # Gallop: the largest j in (i, n] with measure(i, j) <= size; at least i + 1.
        good, step = i + 1, 1
        bad = n + 1
        while good < n:
            probe = min(good + step, n)
            if measure(i, probe) <= size:
                good = probe
                step *= 2
            else:
                bad = probe
                break
        lo, hi = good, min(bad, n + 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if measure(i, mid) <= size:
                lo = mid
            else:
                hi = mid
        j = lo
        out.append((i, j, measure(i, j)))
        if j >= n:
            break
        nxt = max(j - overlap_units, i + 1)
        while nxt < j and measure(nxt, j + 1) > size:
            nxt += 1
        i = nxt
    return out


def check_nonneg_int(name: str, value: Any, unit: str) -> int:
    """Return ``value`` if it is an int >= 0, else raise ``ValueError`` naming it and its unit."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an int >= 0 ({unit}), got {value!r}.")
    return int(value)
