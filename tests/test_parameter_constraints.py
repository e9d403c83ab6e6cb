"""Tests generated from the parameter constraints (``chunkwise._validation``): every function that declares
its settings as data refuses each kind of wrong value with one message naming the parameter."""

from __future__ import annotations

import importlib
import inspect
import re

import numpy as np
import pytest

from chunkwise._validation import CONSTRAINED, Interval, Options, check_param, validate_params

# the modules whose functions declare constraints (importing them fills CONSTRAINED)
for _module in ("chunkwise.experiments.whatmatters",):
    importlib.import_module(_module)


def _cases():
    for func, constraints in CONSTRAINED:
        if not func.__module__.startswith("chunkwise."):
            continue
        for name, allowed in constraints.items():
            bad = [v for c in allowed if c is not None for v in c.invalid_examples()]
            for value in bad:
                if any((c is None and value is None) or (c is not None and c.accepts(value)) for c in allowed):
                    continue  # refused by one constraint, admitted by another
                yield pytest.param(func, constraints, name, value, id=f"{func.__qualname__}-{name}-{value!r}")


CASES = list(_cases())


def test_the_tables_declare_constraints():
    names = {f.__qualname__ for f, _ in CONSTRAINED if f.__module__.startswith("chunkwise.")}
    assert {"cross_fitted_contrast", "factor_ranges", "variance_shares", "ranking_agreement",
            "range_difference"} <= names
    assert len(CASES) >= 5 * 2 * 5


@pytest.mark.parametrize(("func", "constraints", "name", "value"), CASES)
def test_each_wrong_value_is_refused_before_the_body_runs(func, constraints, name, value):
    kwargs = {}
    for param in inspect.signature(func).parameters.values():
        if param.name == name:
            kwargs[param.name] = value
        elif param.name in constraints:
            first = next(c for c in constraints[param.name] if c is not None)
            kwargs[param.name] = first.valid_example()
        elif param.default is inspect.Parameter.empty:
            kwargs[param.name] = None  # never reached: the check comes first
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must be .*, got {re.escape(repr(value))}[ .]"):
        func(**kwargs)


def test_check_param_in_words_and_values():
    assert check_param("k", np.int64(3), [Interval(int, 1, None)]) == 3
    assert type(check_param("k", np.int64(3), [Interval(int, 1, None)])) is int
    with pytest.raises(ValueError, match=r"^k must be an int >= 1 or None, got 0\.$"):
        check_param("k", 0, [Interval(int, 1, None), None])
    with pytest.raises(ValueError, match=r"^confidence must be a number in \(0\.5, 1\), got 1\.$"):
        check_param("confidence", 1, [Interval(float, 0.5, 1, closed="neither")])
    with pytest.raises(ValueError, match=r"^n must be one of 0 or an int >= 100, got 50 \(0: none\)\.$"):
        check_param("n", 50, [Options((0,)), Interval(int, 100, None)], hint=" (0: none)")
    assert check_param("n", 0, [Options((0,)), Interval(int, 100, None)]) == 0
    for refused, kind in ((True, "bool"), (2.5, "float"), (float("nan"), "float"), ("3", "str")):
        with pytest.raises(ValueError, match=rf"^k must be an int >= 1, got {re.escape(repr(refused))} \({kind}\)\.$"):
            check_param("k", refused, [Interval(int, 1, None)])
    assert not Options(("exact", "hnsw")).accepts(np.array(["exact"]))
    assert Interval(int, 0, 3, closed="neither").valid_example() == 1


def test_a_constraint_on_a_missing_parameter_is_refused_at_decoration():
    with pytest.raises(ValueError, match=r"has no parameter\(s\) \['depth'\]"):
        @validate_params({"depth": [Interval(int, 1, None)]})
        def f(k=1):
            return k
