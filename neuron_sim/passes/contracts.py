"""What a pass promises about the program's results, as objects the verifier asks.

A contract answers one question elementwise: may the rewritten program (the target) produce
this value where the original (the source) produced that one? ``allowed(source, target)`` is a
boolean mask. Three kinds (docs/passes.md, "The framework"):

* ``EXACT`` — every output bit for bit on every device (NaN equals NaN whatever its bits;
  ``-0`` differs from ``+0``). The default.
* ``Refinement(rule, predicate, description)`` — exact, or where ``predicate(source, target)``
  holds: the target's behaviours are a subset of what the source allows. ``INFINITY_TO_FINITE``
  is ReplaceMinimumConstant's (an infinity may become a finite value of its sign, a NaN
  anything: see ``infinity_to_finite``);
  ReplaceRng's would be "every target value is one the rng could have produced".
* ``CHANGES_RESULTS`` — compared exactly, but a difference is *expected*: the pass is a
  positive control for the verifier (InjectNumericalErrors).

``weakest`` combines the contracts of a pipeline's passes; ``contract_of`` accepts the old
strings (``"exact"``, ``"refinement"``, ``"changes-results"``) for compatibility.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import ml_dtypes
import numpy as np

from neuron_sim.arrays import equal_mask, is_float
from neuron_sim.errors import UserError

Predicate = Callable[[np.ndarray, np.ndarray], np.ndarray]


class Contract:
    """A pass's promise about results; ``allowed`` says, elementwise, which target values the
    verifier must accept for the source's."""

    name: str = ""                  # "exact" | "refinement" | "changes-results"
    expects_change: bool = False    # True only for changes-results: a difference is expected

    def allowed(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Elementwise: may the target hold this value where the source holds that one? True
        wherever ``equal_mask`` is (the source's own value is always allowed: the verifier
        skips outputs that are the source's bit for bit)."""
        raise NotImplementedError

    def describe(self) -> str:
        """One line for reports: what the verifier accepts under this contract."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Contract {self.describe()}>"


class Exact(Contract):
    """Bitwise equality on every output element (NaN equals NaN; -0 differs from +0)."""

    name = "exact"

    def allowed(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        return equal_mask(source, target)

    def describe(self) -> str:
        return "exact: every output bit for bit (NaN equals NaN, -0 differs from +0)"


class ChangesResults(Contract):
    """Compared exactly, and a difference is the expected outcome (a positive control)."""

    name = "changes-results"
    expects_change = True

    def allowed(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        return equal_mask(source, target)

    def describe(self) -> str:
        return "changes-results: compared exactly; the pass is expected to change results"


class Refinement(Contract):
    """Exact, or where ``predicate(source, target)`` allows the target's value instead.

    ``rule`` names the refinement (``infinity-to-finite``); ``predicate`` is elementwise and
    must accept arrays of any dtype (returning False where the rule does not apply).
    """

    name = "refinement"

    def __init__(self, name_of_rule: str, predicate: Predicate, description: str) -> None:
        self.rule = name_of_rule
        self.predicate = predicate
        self.description = description

    def allowed(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        source = np.asarray(source)
        target = np.asarray(target)
        return equal_mask(source, target) | np.asarray(self.predicate(source, target), dtype=bool)

    def describe(self) -> str:
        return f"refinement ({self.rule}): exact, or {self.description}"


def infinity_to_finite(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Elementwise, for real floats of one dtype: the source is -inf and the target a finite
    negative value, or +inf and a finite positive value, or the source is NaN (any target).

    What replacing a -inf sentinel by the lowest finite value can do downstream: the sentinel
    itself becomes ``finfo.min``, arithmetic on it gives other finite values of the same sign
    (``lowest * 0.5``, ``-lowest == finfo.max``), and an operation whose source value is NaN
    only because of the infinity (``-inf - -inf``) becomes finite (``lowest - lowest == 0``).
    Elementwise, provenance is not visible: any infinity and any NaN of the source is covered,
    not only those the sentinel produced. A *finite* source value that changes (``1 / (x -
    -inf) == 0`` against a nonzero denormal) is not allowed."""
    source = np.asarray(source)
    target = np.asarray(target)
    if not is_float(source) or source.dtype.kind == "c" or source.dtype != target.dtype:
        return np.zeros(np.broadcast_shapes(source.shape, target.shape), dtype=bool)
    wide_s = source.astype(np.float64)
    wide_t = target.astype(np.float64)
    finite_t = np.isfinite(wide_t)
    return (((wide_s == -np.inf) & finite_t & (wide_t < 0))
            | ((wide_s == np.inf) & finite_t & (wide_t > 0))
            | np.isnan(wide_s))


class Tolerance(Contract):
    """Exact, or within ``ulps`` units in the last place of ``unit`` (an ml_dtypes / numpy float
    dtype) at the source's value: what a rewrite that computes in a narrower type promises.

    For a real-float source value s: a finite target t with ``|t - s| <= ulps * ulp_unit(s)``
    (``ulp_unit(s)`` the spacing of ``unit`` in s's binade, at least its smallest subnormal), or
    s finite beyond ``unit``'s largest finite value and t the same-signed infinity or beyond it
    too (overflow in the narrow type). NaN only for NaN (``EXACT``'s rule). ``also``, a
    Refinement, adds what it allows (a pipeline's composition). Non-float outputs: exact.
    """

    name = "tolerance"

    def __init__(self, rule: str, ulps: float, unit: Any, description: str,
                 also: Refinement | None = None) -> None:
        self.rule = rule
        self.ulps = float(ulps)
        self.unit = np.dtype(unit)
        self.description = description
        self.also = also

    def allowed(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        source = np.asarray(source)
        target = np.asarray(target)
        mask = equal_mask(source, target)
        if self.also is not None:
            mask = mask | self.also.allowed(source, target)
        if not is_float(source) or source.dtype.kind == "c" or source.dtype != target.dtype:
            return mask
        finfo = ml_dtypes.finfo(self.unit)
        wide_s = source.astype(np.float64)
        wide_t = target.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            _, exponent = np.frexp(wide_s)
            smallest = float(finfo.smallest_subnormal)
            spacing = np.maximum(np.ldexp(1.0, exponent - 1 - int(finfo.nmant)), smallest)
            close = np.isfinite(wide_t) & (np.abs(wide_t - wide_s) <= self.ulps * spacing)
            largest = float(finfo.max)
            overflow = ((np.abs(wide_s) > largest) & (np.abs(wide_t) > largest)
                        & (np.sign(wide_s) == np.sign(wide_t)))
        return mask | (np.isfinite(wide_s) & (close | overflow))

    def describe(self) -> str:
        text = f"tolerance ({self.rule}): exact, or {self.description}"
        return text + (f"; or {self.also.description}" if self.also is not None else "")


EXACT: Contract = Exact()
CHANGES_RESULTS: Contract = ChangesResults()
INFINITY_TO_FINITE = Refinement(
    "infinity-to-finite", infinity_to_finite,
    "where the source is -inf / +inf the target may be a finite negative / positive value, and "
    "where the source is NaN any value (ReplaceMinimumConstant's -inf -> lowest, and what "
    "arithmetic on it gives)")

BF16_HALF_ULP = Tolerance(
    "bf16 rounding", 0.5, ml_dtypes.bfloat16,
    "within half a bf16 ulp of the source's value (one round-to-nearest into bf16; "
    "RewriteModuleDtype's value-movement family)")

_BY_NAME: dict[str, Contract] = {"exact": EXACT, "refinement": INFINITY_TO_FINITE,
                                 "tolerance": BF16_HALF_ULP, "changes-results": CHANGES_RESULTS}


def contract_of(value: Contract | str) -> Contract:
    """``value`` as a Contract; a string is one of the three old names (``"refinement"`` means
    INFINITY_TO_FINITE, the only refinement those names could express)."""
    if isinstance(value, Contract):
        return value
    contract = _BY_NAME.get(str(value))
    if contract is None:
        raise UserError(f"unknown contract {value!r}; contracts are {', '.join(_BY_NAME)}")
    return contract


def weakest(contracts: Iterable[Contract | str]) -> Contract:
    """The contract a pipeline of passes with these contracts keeps (their composition).

    changes-results if any pass expects a change; else, if any pass has a tolerance, one
    tolerance whose bound is the sum of theirs (each pass may add its error to the previous
    one's), in the coarsest of their units, that also allows what any refinement allows;
    else, if any pass is a refinement, a refinement that allows what *any* of them allows (the
    union: each pass may apply its rule, so the pipeline's outputs may show any of them — a
    composition of two rules on one element is not covered); else exact. So exact ∘ X = X,
    refinement ∘ refinement = their union, tolerance ∘ refinement = tolerance allowing both.
    """
    unique: list[Contract] = []
    for contract in map(contract_of, contracts):
        if contract not in unique:
            unique.append(contract)
    if any(c.expects_change for c in unique):
        return CHANGES_RESULTS
    refinements = [c for c in unique if isinstance(c, Refinement)]
    refinements += [c.also for c in unique if isinstance(c, Tolerance) and c.also is not None]
    refinement = _union(refinements)
    tolerances = [c for c in unique if isinstance(c, Tolerance)]
    if tolerances:
        if len(tolerances) == 1 and tolerances[0].also is refinement:
            return tolerances[0]
        unit = max((t.unit for t in tolerances), key=lambda u: float(ml_dtypes.finfo(u).eps))
        return Tolerance(" + ".join(t.rule for t in tolerances), sum(t.ulps for t in tolerances),
                         unit, " then ".join(t.description for t in tolerances), also=refinement)
    return refinement if refinement is not None else EXACT


def _union(refinements: list[Refinement]) -> Refinement | None:
    """One refinement allowing what any of ``refinements`` allows (None for none)."""
    unique = list(dict.fromkeys(refinements))
    if len(unique) <= 1:
        return unique[0] if unique else None
    predicates = [r.predicate for r in unique]

    def any_rule(source: np.ndarray, target: np.ndarray) -> np.ndarray:
        masks = [np.asarray(p(source, target), dtype=bool) for p in predicates]
        return np.logical_or.reduce(masks)

    return Refinement(" | ".join(r.rule for r in unique), any_rule,
                      " or ".join(r.description for r in unique))
