"""Parameter constraints as data: one validator, one message format, tests generated from the tables.

A function declares what each of its settings may be, next to its signature, in the manner of
scikit-learn's ``_parameter_constraints``::

    @validate_params({"n_resamples": [Interval(int, 100, None)],
                      "confidence": [Interval(float, 0.5, 1, closed="neither")],
                      "candidates": [Interval(int, 1, None), None]})
    def f(wide, n_resamples=2000, confidence=0.95, candidates=None): ...

Before the body runs, every listed argument is checked against its constraints (any one may hold;
``None`` in the list admits ``None``); a value that fits none raises one :class:`ValueError` that
names the parameter, what it may be and what it got (``"n_resamples must be an int >= 100, got 5."``).
Integers arrive as Python ``int`` (a ``numpy.int64`` is accepted and converted); ``bool`` is never a
number. Code that checks one value outside a signature calls :func:`check_param` with the same
constraints.

Every decorated function is recorded in :data:`CONSTRAINED`, from which the test suite generates a
failing call for each parameter and each kind of wrong value (:meth:`Interval.invalid_examples`),
so a new constraint is tested by being declared. This module imports nothing of chunkwise.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["CONSTRAINED", "Interval", "Options", "check_param", "validate_params"]

F = TypeVar("F", bound=Callable[..., Any])


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Interval:
    """Numbers of one kind between two bounds.

    Parameters
    ----------
    kind : {int, float}
        ``int``: whole numbers only (Python or numpy integers, never ``bool``); ``float``: any real
        number, integers included, but not NaN.
    low, high : number or None
        The bounds; None leaves that side open-ended.
    closed : {"both", "left", "right", "neither"}, default "both"
        Which bounds belong to the interval.

    Raises
    ------
    ValueError
        For another kind, a ``closed`` outside the four words, or ``low > high``.
    """

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"

    def __post_init__(self) -> None:
        if self.kind not in (int, float):
            raise ValueError(f"Interval kind must be int or float, got {self.kind!r}.")
        if self.closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"Interval closed must be 'both', 'left', 'right' or 'neither', got {self.closed!r}.")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"Interval low {self.low} is above high {self.high}.")

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` lies in the interval (and is of its kind)."""
        if not (_is_int(value) if self.kind is int else _is_real(value)) or math.isnan(float(value)):
            return False
        if self.low is not None:
            if value < self.low or (value == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if value > self.high or (value == self.high and self.closed in ("left", "neither")):
                return False
        return True

    def describe(self) -> str:
        """In words: ``"an int >= 1"``, ``"a number in (0, 1)"``."""
        noun = "an int" if self.kind is int else "a number"
        lo_in = self.closed in ("both", "left")
        hi_in = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            return f"{noun} in {'[' if lo_in else '('}{self.low:g}, {self.high:g}{']' if hi_in else ')'}"
        if self.low is not None:
            return f"{noun} {'>=' if lo_in else '>'} {self.low:g}"
        if self.high is not None:
            return f"{noun} {'<=' if hi_in else '<'} {self.high:g}"
        return noun

    def valid_example(self) -> int | float:
        """A value inside the interval."""
        if self.low is not None and self.high is not None:
            if self.kind is float:
                return (self.low + self.high) / 2
            return next(v for v in range(math.ceil(self.low), math.floor(self.high) + 1) if self.accepts(v))
        if self.low is not None:
            return (int(self.low) if self.kind is int else float(self.low)) + 1
        if self.high is not None:
            return (int(self.high) if self.kind is int else float(self.high)) - 1
        return 1

    def invalid_examples(self) -> list[Any]:
        """Values the interval refuses: just past each bound, a bool, a string, NaN, and for ints a float."""
        out: list[Any] = [True, "1", float("nan")]
        if self.low is not None:
            out.append(self.low if self.closed in ("right", "neither") else self.low - 1)
        if self.high is not None:
            out.append(self.high if self.closed in ("left", "neither") else self.high + 1)
        if self.kind is int:
            out.append(float(self.valid_example()) + 0.5)
        return out


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values (e.g. ``Options(("exact", "hnsw"))``)."""

    values: tuple[Any, ...]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is one of the options: a string equal to a string option, an integer
        (numpy's too) equal to an integer option, or an equal value of an option's own type; a bool
        never stands for 0 or 1, an array never for its elements."""
        for option in self.values:
            if isinstance(option, bool) != isinstance(value, bool):
                continue
            if _is_int(option) and _is_int(value) and int(value) == option:
                return True
            if isinstance(option, str) and isinstance(value, str) and value == option:
                return True
            if type(value) is type(option) and value == option:
                return True
        return False

    def describe(self) -> str:
        """In words: ``"one of 'exact', 'hnsw'"``."""
        return "one of " + ", ".join(repr(v) for v in self.values)

    def valid_example(self) -> Any:
        """The first option."""
        return self.values[0]

    def invalid_examples(self) -> list[Any]:
        """A value outside the options."""
        return ["<not an option>", 12345]


Constraint = Interval | Options | None


def _normal(value: Any) -> Any:
    return int(value) if _is_int(value) else value


def check_param(name: str, value: Any, constraints: Sequence[Constraint], *, hint: str = "") -> Any:
    """Check one value against its constraints; return it (an integer as a Python ``int``).

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value
        What the caller passed.
    constraints : sequence of Interval, Options or None
        Any one may hold; ``None`` admits ``None``.
    hint : str, optional
        Appended to the message (what to do, e.g. ``"; pass a whole number such as 1"``).

    Raises
    ------
    ValueError
        ``"<name> must be <what> [or None], got <value>."`` when no constraint holds (with the
        value's type after it when it is not a number of a constraint's kind: ``got 2.0 (float)``).
    """
    for c in constraints:
        if (c is None and value is None) or (c is not None and c.accepts(value)):
            return _normal(value)
    what = " or ".join(c.describe() if c is not None else "None" for c in constraints)
    right_kind = any(isinstance(c, Options) or (isinstance(c, Interval) and (_is_int(value) if c.kind is int
                                                                              else _is_real(value)))
                     for c in constraints)
    kind = "" if right_kind or value is None else f" ({type(value).__name__})"
    raise ValueError(f"{name} must be {what}, got {value!r}{kind}{hint}.")


#: Every function decorated with :func:`validate_params`, with its constraints (read by the tests).
CONSTRAINED: list[tuple[Callable[..., Any], Mapping[str, Sequence[Constraint]]]] = []


def validate_params(constraints: Mapping[str, Sequence[Constraint]]) -> Callable[[F], F]:
    """Decorate a function so that its listed arguments are checked before its body runs.

    Parameters
    ----------
    constraints : mapping of parameter name -> list of Interval, Options or None
        See :func:`check_param`.

    Raises
    ------
    ValueError
        At decoration, for a name that is not a parameter of the function; at call time, as
        :func:`check_param` (and ``TypeError`` for arguments that do not bind to the signature).
    """

    def wrap(func: F) -> F:
        signature = inspect.signature(func)
        unknown = [n for n in constraints if n not in signature.parameters]
        if unknown:
            raise ValueError(f"{func.__qualname__} has no parameter(s) {unknown} to constrain.")

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            for name, allowed in constraints.items():
                bound.arguments[name] = check_param(name, bound.arguments[name], allowed)
            return func(*bound.args, **bound.kwargs)

        checked._parameter_constraints = dict(constraints)  # type: ignore[attr-defined]
        CONSTRAINED.append((checked, dict(constraints)))
        return checked  # type: ignore[return-value]

    return wrap
