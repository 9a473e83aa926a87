"""What every execute of a module needs to know about its structure, kept while it holds.

An execute used to walk the whole module three times before running anything — the call depth
(``limits``), unbounded dimensions (``api``), and each computation's plan check — and for the
small modules of XLA's corpus those walks cost more than running them. ``facts_of(module)``
keeps the results with a snapshot of what they were derived from, and one cheap pass per
execute compares the module against the snapshot: the computation list, each computation's
instruction list, every instruction's opcode, shape and operands (list comparisons that stop
at the first difference, identity first), and every attribute that names a computation or a
tuple index (compared by identity). Modules are mutable (passes rewrite them); any difference
rebuilds the facts, and with them the plans. The facts also count how often each computation
has been walked before it gets its plan (``WALKED_EVALUATIONS``).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

from neuron_sim.hlo import HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.attributes import COMPUTATION_ATTRIBUTES
from neuron_sim.hlo.shapes import ArrayShape

from neuron_sim.interpreter.values import numpy_dtype

from neuron_sim.interpreter.plan import Plan, plan_for

_STRUCTURE = attrgetter("opcode", "shape", "operands")

# A computation is walked instruction by instruction (``Evaluator._evaluate_walking``) on its
# first evaluations and gets its compiled plan on the next: writing and compiling a plan costs
# about 2 ms, as much as walking 100 instructions, and most computations of a fuzz campaign's
# or a sweep's modules are evaluated once or twice (the 800 modules of `bench.py`'s fuzz
# campaign: 2,407 plans, 689 run once and 1,447 twice, their building 23% of the CPU time).
# A loop body or a module executed again gets its plan on its third evaluation.
WALKED_EVALUATIONS = 2


class ModuleFacts:
    """A module's call depth, its first instruction with an unbounded dimension, its entry
    parameters' dtypes and dimensions when all are arrays (``signature``, else None), and its
    computations' plans, valid while ``current()``."""

    __slots__ = ("module", "call_depth", "unbounded", "signature", "plans", "_entry",
                 "_computations", "_snapshots", "_bound", "_evaluations")

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self._entry = module.entry
        self._computations = list(module.computations)
        self._snapshots = [(c, list(c.instructions),
                            [_snapshot(i) for i in c.instructions]) for c in self._computations]
        self._bound = _Bound()
        self._bound.extend((i, key, value) for c in self._computations for i in c.instructions
                           for key, value in _bound_attributes(i))
        self.call_depth = module.call_depth()
        self.unbounded = _first_unbounded(module)
        self.signature = _signature(module)
        self.plans: dict[HloComputation, Plan] = {}
        self._evaluations: dict[HloComputation, int] = {}  # walked so far, before its plan

    def current(self) -> bool:
        """Whether the module still has the structure the facts were derived from."""
        module = self.module
        if module.entry is not self._entry or module.computations != self._computations:
            return False
        for computation, instructions, snapshot in self._snapshots:
            order = computation.instructions
            if order != instructions or list(map(_STRUCTURE, order)) != snapshot:
                return False
        return self._bound.hold()

    def plan(self, computation: HloComputation) -> Plan | None:
        """``computation``'s plan, or None while it has been evaluated fewer than
        ``WALKED_EVALUATIONS`` times (the caller walks it, and this counts the evaluation);
        a computation of another module gets its own check."""
        plan = self.plans.get(computation)
        if plan is None:
            count = self._evaluations.get(computation, 0)
            if count < WALKED_EVALUATIONS:
                self._evaluations[computation] = count + 1
                return None
            plan = plan_for(computation)
            if computation in self._computations:
                self.plans[computation] = plan
                self._bound.extend(plan.bound)  # what the plan read, checked from now on
        return plan


_ATTRS = attrgetter("attrs")


class _Bound:
    """Attributes read when the facts and plans were made: (instruction, name, value)."""

    __slots__ = ("insts", "names", "values", "_read")

    def __init__(self) -> None:
        self.insts: list[HloInstruction] = []
        self.names: list[str] = []
        self.values: list[Any] = []
        self._read: set[tuple[int, str]] = set()

    def extend(self, entries: Any) -> None:
        """Check these from now on; an attribute already checked is not added again (a plan
        reads a reduce's ``to_apply`` that the facts read too)."""
        for inst, name, value in entries:
            key = (id(inst), name)
            if key in self._read:
                continue
            self._read.add(key)
            self.insts.append(inst)
            self.names.append(name)
            self.values.append(value)

    def hold(self) -> bool:
        """Whether every attribute still has its value (the same object, or an equal one)."""
        return list(map(dict.get, map(_ATTRS, self.insts), self.names)) == self.values


def _snapshot(inst: HloInstruction) -> tuple:
    return (inst.opcode, inst.shape, list(inst.operands))


def _bound_attributes(inst: HloInstruction) -> list[tuple[str, Any]]:
    attrs = inst.attrs
    found = [(key, attrs[key]) for key in COMPUTATION_ATTRIBUTES.intersection(attrs)]
    if inst.opcode is Opcode.GET_TUPLE_ELEMENT:
        found.append(("index", attrs.get("index")))
    return found


def _signature(module: HloModule) -> list[tuple[np.dtype, tuple[int, ...]]] | None:
    """Each entry parameter's dtype and dimensions, or None unless all are arrays of a type
    numpy holds (the general argument path then reports what does not fit)."""
    shapes = [p.shape for p in module.entry.parameters]
    if not all(isinstance(s, ArrayShape) and s.is_array for s in shapes):
        return None
    try:
        return [(numpy_dtype(s.element_type), tuple(s.dims)) for s in shapes]
    except TypeError:
        return None


def _first_unbounded(module: HloModule) -> HloInstruction | None:
    for comp in module.computations:
        for inst in comp.instructions:
            if any(d < 0 for leaf in inst.shape.leaves() if leaf.is_array for d in leaf.dims):
                return inst
    return None


def facts_of(module: HloModule) -> ModuleFacts:
    """``module``'s facts: the kept ones while current, else new ones. They are kept in the
    module's own ``derived`` caches (they refer to its computations, so a table keyed by the
    module would keep it alive forever) and go with it."""
    facts = module.derived.get(ModuleFacts)
    if facts is None or not facts.current():
        facts = module.derived[ModuleFacts] = ModuleFacts(module)
    return facts


__all__ = ["ModuleFacts", "facts_of"]
