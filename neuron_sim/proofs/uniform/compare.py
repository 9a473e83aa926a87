"""The proof on symbolic positions: are source and target equal at every position of every
output, on every device, for all inputs?

For each device (concrete) and output leaf, ``prove_positions`` builds both element terms at a
symbolic position (``positions.PositionEvaluator``) and reduces their equality to one z3
formula over the position: the same input read at the same index, the same constants, the
same elementwise ops on equal operands, reductions as multisets (equal up to reassociation,
which XLA leaves to the implementation — as the element-wise proof says), cases implying
equality, dots and reduces equal when their operands are equal at every bound position
(quantified), called values equal when their positions are and their recipes are at every
formal position. z3 then decides that formula within the position's bounds: valid on every device ->
``"equal"``. Memory is that of the terms, independent of the tensor's size.

A position where the formula fails (z3's model, or any position when the terms have different
shapes) is not yet a bug: both terms are *replayed* there, on concrete input values drawn per
(parameter, device, element) (``replay.py``). Values that differ -> ``"differ"`` with that
witness (device, output, index, both values); values that agree at every tried position ->
``"unsupported"`` (the proof cannot decide; the caller falls back to element-wise execution).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from neuron_sim.hlo.ir import HloModule
from neuron_sim.lazy import LazyModule
from neuron_sim.proofs.uniform.positions import (PositionEvaluator, PositionsUnsupported, Term,
                                                 leaf_shape, formals)
from neuron_sim.proofs.uniform.replay import REPLAY_BUDGET, Replayer, replayed_text, same_value
from neuron_sim.semantics.elementwise import is_commutative
from neuron_sim.topology import Topology

z3 = LazyModule("z3")

__all__ = ["OutputProof", "PositionsProof", "PositionWitness", "prove_positions"]

WITNESS_TRIES = 3
SOLVER_TIMEOUT_MS = 10_000


@dataclass
class PositionWitness:
    """A device and output position where source and target give different values on the
    replayed inputs (``replay.py``: value of input element e on device d)."""

    device: int
    leaf: int
    index: tuple[int, ...]
    source_value: str
    target_value: str


@dataclass
class OutputProof:
    """What the proof established for one output leaf over every device."""

    leaf: int
    shape: str
    outcome: str          # "equal" | "differ" | "unsupported"
    seconds: float
    queries: int = 0      # z3 queries (a formula that simplifies to true needs none)
    reason: str = ""


@dataclass
class PositionsProof:
    """The outcome of the proof on symbolic positions on one topology."""

    outcome: str                          # "equal" | "differ" | "unsupported"
    reason: str = ""
    outputs: list[OutputProof] = field(default_factory=list)
    seconds: float = 0.0
    peak_bytes: int = 0                   # the process's peak resident memory afterwards
    witness: PositionWitness | None = None


def _conj(parts: Sequence[Any]) -> Any:
    """And of formulas and Python booleans (False absorbs, True drops out)."""
    rest = []
    for part in parts:
        if part is False:
            return False
        if part is not True:
            rest.append(part)
    if not rest:
        return True
    return rest[0] if len(rest) == 1 else z3.And(*rest)


def _implies(condition: Any, formula: Any) -> Any:
    if formula is True:
        return True
    if formula is False:
        return z3.Not(condition)
    return z3.Implies(condition, formula)


def _devices(term: Term, memo: dict[int, tuple]) -> tuple:
    """The devices whose inputs ``term`` reads (-1 for a leaf declared replicated), sorted:
    what tells apart the members of a collective's group whose terms have the same shape."""
    key = id(term)
    found = memo.get(key)
    if found is not None:
        return found[1]
    kind = term[0]
    if kind == "read":
        value: tuple = (-1 if term[3] is None else term[3],)
    elif kind == "op":
        value = tuple(sorted(set().union(*[_devices(t, memo) for t in term[4]])))
    elif kind == "reduce":
        value = tuple(sorted(set().union(*[_devices(t, memo) for t in term[3]])))
    elif kind == "cases":
        value = tuple(sorted(set().union(*[_devices(t, memo) for _, t in term[1]])))
    elif kind in ("dot", "fold"):
        value = tuple(sorted(set(_devices(term[5], memo)) | set(_devices(term[6], memo))))
    elif kind == "call":
        value = (term[2],)
    else:
        value = ()
    memo[key] = (term, value)
    return value


def _key(term: Term, memo: dict[int, tuple]) -> tuple:
    """What a multiset member is matched by: which input and device it reads, or its kind and
    the devices it reads."""
    kind = term[0]
    if kind == "read":
        return ("read", term[1], term[2], -1 if term[3] is None else term[3])
    if kind == "const":
        return ("const", term[1], term[3])
    if kind in ("op", "reduce"):
        return (kind, term[1].spelling, term[2], _devices(term, memo))
    if kind in ("dot", "fold"):
        return (kind, repr(term[1]), term[2], _devices(term, memo))
    if kind == "call":
        return ("call", term[2], str(term[1].shape))
    return (kind, _devices(term, memo))


class _Comparer:
    """``equal_formula`` with a memo per (source term, target term): element terms are DAGs
    (a softmax reads its scores three times, every member of an all-reduce is a dot chain), so
    without it the walk would be exponential in their depth."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], tuple[Term, Term, Any]] = {}
        self.devices: dict[int, tuple] = {}
        self.functions: dict[tuple, Any] = {}

    def equal(self, a: Term, b: Term) -> Any:
        if a is b:
            return True
        key = (id(a), id(b))
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = (a, b, self._equal(a, b))
        return found[2]

    def _same_function(self, a: Term, b: Term) -> Any:
        """A closed formula whose validity means the two called values are equal at every
        position (their bodies compared at the same formal position), or None when their
        shapes differ."""
        key = (id(a[5]), id(a[1]), a[2], a[3], id(b[5]), id(b[1]), b[2], b[3])
        found = self.functions.get(key)
        if found is not None:
            return found[2]
        shape = leaf_shape(a[1].shape, a[3])
        other = leaf_shape(b[1].shape, b[3])
        if (shape.element_type, tuple(shape.dims)) != (other.element_type, tuple(other.dims)):
            value: Any = None
        else:
            variables = formals(shape.rank)
            inner = self.equal(a[5].body(a[1], a[2], a[3]), b[5].body(b[1], b[2], b[3]))
            if inner is True or inner is False:
                value = inner
            else:
                bounds = [z3.And(v >= 0, v < d) for v, d in zip(variables, shape.dims)]
                value = z3.ForAll(variables, z3.Implies(z3.And(*bounds), inner)) \
                    if variables else inner
        self.functions[key] = (a, b, value)
        return value

    def _equal(self, a: Term, b: Term) -> Any:
        if a[0] == "cases" and b[0] == "cases" and len(a[1]) == len(b[1]) and \
                all(c.get_id() == d.get_id() for (c, _), (d, _) in zip(a[1], b[1])):
            # The same case split (an unchanged all-gather, concatenate, pad): case by case,
            # not every case of one against every case of the other.
            return _conj([_implies(c, self.equal(t, u)) for (c, t), (_, u) in zip(a[1], b[1])])
        if a[0] == "cases":
            return _conj([_implies(c, self.equal(t, b)) for c, t in a[1]])
        if b[0] == "cases":
            return _conj([_implies(c, self.equal(a, t)) for c, t in b[1]])
        if a[0] == "call" and b[0] == "call":
            same = self._same_function(a, b)
            if same is not None and same is not False:
                return _conj([same, *[True if x.get_id() == y.get_id() else x == y
                                      for x, y in zip(a[4], b[4])]])
        if a[0] == "call":  # compared through its recipe at the called position
            return self.equal(a[5].element(a[1], a[2], a[4], a[3]), b)
        if b[0] == "call":
            return self.equal(a, b[5].element(b[1], b[2], b[4], b[3]))
        kind = a[0]
        if kind != b[0]:
            return False
        if kind == "read":
            if a[1:4] != b[1:4] or a[5] != b[5]:
                return False
            # Index expressions are simplified and hash-consed by z3: the same id is the same
            # expression, and needs no formula.
            return _conj([True if x.get_id() == y.get_id() else x == y
                          for x, y in zip(a[4], b[4])])
        if kind == "const":
            return a[1] == b[1] and a[3] == b[3]
        if kind == "index":
            if a[2] != b[2]:
                return False
            return True if a[1].get_id() == b[1].get_id() else a[1] == b[1]
        if kind == "op":
            if a[1:4] != b[1:4] or len(a[4]) != len(b[4]):
                return False
            straight = _conj([self.equal(x, y) for x, y in zip(a[4], b[4])])
            if straight is not False or len(a[4]) != 2 or not is_commutative(a[1]):
                return straight
            # Operands swapped, tried only when the straight pairing cannot hold: trying both
            # on every commutative op of a deep term would be exponential in its depth.
            return _conj([self.equal(a[4][0], b[4][1]), self.equal(a[4][1], b[4][0])])
        if kind == "reduce":
            if a[1:3] != b[1:3] or len(a[3]) != len(b[3]):
                return False
            left = sorted(a[3], key=lambda t: repr(_key(t, self.devices)))
            right = sorted(b[3], key=lambda t: repr(_key(t, self.devices)))
            if [_key(t, self.devices) for t in left] != [_key(t, self.devices) for t in right]:
                return False
            return _conj([self.equal(x, y) for x, y in zip(left, right)])
        if kind in ("dot", "fold"):
            # The same op (attributes or computation, type, contracting sizes) over the same
            # bound positions: equal when its operands are equal at every bound position.
            if a[1:4] != b[1:4] or [v.get_id() for v in a[4]] != [v.get_id() for v in b[4]]:
                return False
            inner = _conj([self.equal(a[5], b[5]), self.equal(a[6], b[6])])
            if inner is True or inner is False:
                return inner
            # Quantified here, not left free: a reduce nested in another's operand at a
            # position that does not read the outer one's variable reuses its name.
            bounds = z3.And(*[z3.And(v >= 0, v < size) for v, size in zip(a[4], a[3])])
            return z3.ForAll(list(a[4]), z3.Implies(bounds, inner))
        return False


def equal_formula(a: Term, b: Term) -> Any:
    """A formula over the position (the bound positions of dots and reduces and the formal
    positions of called values quantified universally inside it) whose validity implies
    ``a == b`` (False: the terms differ in shape, so nothing is implied)."""
    return _Comparer().equal(a, b)


def _position(model: Any, variables: Sequence[Any]) -> tuple[int, ...]:
    return tuple(model.eval(v, model_completion=True).as_long() for v in variables)


def prove_positions(source: HloModule, target: HloModule, topology: Topology, *,
                    replicated: Sequence[Sequence[bool]] | None = None,
                    seed: int = 0, timeout: float | None = None) -> PositionsProof:
    """Compare ``source`` and ``target`` on symbolic positions on every device of
    ``topology`` (module docstring); ``timeout`` bounds the whole proof in seconds."""
    start = time.perf_counter()
    proof = _prove(source, target, topology, replicated, seed, timeout, start)
    proof.seconds = time.perf_counter() - start
    proof.peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return proof


def _prove(source: HloModule, target: HloModule, topology: Topology,
           replicated: Sequence[Sequence[bool]] | None, seed: int, timeout: float | None,
           start: float) -> PositionsProof:
    try:
        left = PositionEvaluator(source, topology, replicated)
        right = PositionEvaluator(target, topology, replicated)
    except PositionsUnsupported as exc:
        return PositionsProof("unsupported", exc.reason)
    leaves, other = left.output_leaves(), right.output_leaves()
    if [(s.element_type, tuple(s.dims)) for _, s in leaves] != \
            [(s.element_type, tuple(s.dims)) for _, s in other]:
        return PositionsProof("unsupported", "the source and target results have different "
                                             "shapes")
    replayer = Replayer(seed)
    outputs: list[OutputProof] = []
    for number, (path, shape) in enumerate(leaves):
        began = time.perf_counter()
        dims = list(shape.dims)
        variables = [z3.Int(f"position{k}") for k in range(len(dims))]
        bounds = [z3.And(v >= 0, v < d) for v, d in zip(variables, dims)]
        queries = 0
        comparer = _Comparer()
        for device in range(topology.num_devices):
            if timeout is not None and time.perf_counter() - start > timeout:
                return PositionsProof("unsupported", f"the proof on symbolic positions took "
                                                     f"more than {timeout:g} s", outputs)
            try:
                a = left.output_element(device, path, variables)
                b = right.output_element(device, path, variables)
            except PositionsUnsupported as exc:
                outputs.append(OutputProof(number, str(shape), "unsupported",
                                           time.perf_counter() - began, queries, exc.reason))
                return PositionsProof("unsupported", exc.reason, outputs)
            formula = comparer.equal(a, b)
            if formula is True:
                continue
            if formula is not False:
                formula = z3.simplify(formula)
                if z3.is_true(formula):
                    continue
            if 0 in dims:
                continue
            solver = z3.Solver()
            solver.set("timeout", SOLVER_TIMEOUT_MS)
            solver.add(*bounds)
            if formula is not False:
                solver.add(z3.Not(formula))
            queries += 1
            answer = solver.check()
            if answer == z3.unsat:
                continue
            unreplayed = False
            for _ in range(WITNESS_TRIES):
                if answer != z3.sat:
                    break
                position = _position(solver.model(), variables)
                values = (replayer.value(a, device, position), replayer.value(b, device, position))
                unreplayed = unreplayed or None in values
                if None not in values and not same_value(*values):
                    outputs.append(OutputProof(number, str(shape), "differ",
                                               time.perf_counter() - began, queries))
                    witness = PositionWitness(device, number, position,
                                              replayed_text(values[0]), replayed_text(values[1]))
                    return PositionsProof(
                        "differ", f"device {device}, output {number} index {list(position)}: "
                                  f"source {witness.source_value}, target "
                                  f"{witness.target_value}", outputs, witness=witness)
                if not variables:
                    break
                solver.add(z3.Or(*[v != p for v, p in zip(variables, position)]))
                answer = solver.check()
            reason = (f"z3 could not decide output {number} on device {device}"
                      if answer == z3.unknown else
                      f"on device {device}, output {number}: the element terms differ and the "
                      "replay could not evaluate them (a construct it has no model of, or more "
                      f"than {REPLAY_BUDGET} bound positions of dots and reduces at once)"
                      if unreplayed else
                      f"on device {device}, output {number}: the element terms differ and the "
                      "replayed values agree at every position tried")
            outputs.append(OutputProof(number, str(shape), "unsupported",
                                       time.perf_counter() - began, queries, reason))
            return PositionsProof("unsupported", reason, outputs)
        outputs.append(OutputProof(number, str(shape), "equal", time.perf_counter() - began,
                                   queries))
    return PositionsProof("equal", outputs=outputs)
