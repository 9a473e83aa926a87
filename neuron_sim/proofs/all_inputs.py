"""Proof for all inputs: the source and target run on symbols on every device of a topology.

``prove(source, target, topology)`` runs both modules with ``neuron_sim.proofs.symbolic`` on one term
table: each input element is a variable per (parameter, device, element), one per (parameter,
element) for a leaf declared replicated (``neuron_sim.hlo.replication``, as the sampled
inputs read it).
Equal handles on every output element of every device prove the target equal to the source for
all inputs on that topology — modulo the reassociation of reductions (a reduction by add,
multiply, min, max, and, or, xor is compared as the multiset of what it reduces; XLA leaves
the order to the implementation). The outcome is ``"equal"``, ``"differ"`` (the first differing
device, leaf, index and both terms) or ``"unsupported"`` (why symbolic execution stopped).

``decide_differences`` hands the distinct differing term pairs to z3 (``neuron_sim.proofs.smt``)
under a contract's predicate; ``neuron_sim.verify.proving`` turns all of it into a verdict.

Inside ``sharing_source_runs()`` a source already run on the same topology (the same text and
replication) is not run again: the next target runs on its term table (a campaign such as the
sweep compares one source with several rewrites).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.evaluator import time_limit
from neuron_sim.interpreter.memory import estimate_memory
from neuron_sim.proofs.symbolic import SymbolicUnsupported, TermTable, run_symbolic
from neuron_sim.hlo.ir import HloModule
from neuron_sim.hlo.literals import LiteralError
from neuron_sim.hlo.replication import declared_replication, spmd_topology
from neuron_sim.passes.contracts import Contract
from neuron_sim.topology import Topology
from neuron_sim.proofs.smt import Decision, decide, rule_of
from neuron_sim.proofs.symbolic.loops import LOOP_REST, LoopBound

__all__ = ["PROOF_MODES", "Proof", "constant_inputs", "decide_differences", "prove",
           "separating_inputs", "sharing_source_runs", "symbolic_memory"]

PROOF_MODES = ("auto", "symbolic", "sampled")
# Bytes per element of a symbolic run: its int64 handle in place of the element, and for a fresh
# term its table row (3 x 8), its share of the hash slots (at most half full: 2 x 8) and the
# lookup's temporaries (hash, positions, pending: about 6 x 8).
SYMBOLIC_BYTES_PER_ELEMENT = 96
TERM_TEXT = 160


@dataclass
class Proof:
    """The outcome of one symbolic comparison on one topology."""

    outcome: str                 # "equal" | "differ" | "unsupported"
    reason: str = ""             # why unsupported; the difference, when differ
    device: int | None = None
    leaf: int | None = None
    index: tuple[int, ...] = ()
    source_term: str = ""
    target_term: str = ""
    terms: int = 0               # term-table size
    seconds: float = 0.0
    pairs: list[tuple[int, int]] = field(default_factory=list)  # distinct differing handles
    loop_bounds: list[LoopBound] = field(default_factory=list)  # the source's truncated loops
    table: TermTable | None = field(default=None, repr=False)


def replication_flags(module: HloModule, topology: Topology) -> list[tuple[bool, ...]]:
    """Per entry parameter, per leaf: is it declared replicated on ``topology``?"""
    spmd = spmd_topology(topology.replica_count, topology.num_partitions)
    return [declared_replication(p, spmd=spmd) for p in module.entry.parameters]


# The source run kept while ``sharing_source_runs`` is active: key -> (table, outputs, bounds).
_shared_runs: dict[tuple, tuple[TermTable, list[np.ndarray], list[LoopBound]]] | None = None


@contextlib.contextmanager
def sharing_source_runs() -> Iterator[None]:
    """Within the block, ``prove`` keeps its last source run (term table and output handles)
    and compares the next target with the same source on the same topology against it
    instead of running the source again. The table then also holds the earlier targets'
    terms, which changes no handle of the source (hash-consing). Nothing is kept after the
    block."""
    global _shared_runs
    outer = _shared_runs
    if outer is None:
        _shared_runs = {}
    try:
        yield
    finally:
        _shared_runs = outer


def prove(source: HloModule, target: HloModule, topology: Topology, *,
          timeout: float | None = None, fixed: Mapping[int, np.ndarray] | None = None) -> Proof:
    """Compare ``source`` and ``target`` symbolically on every device of ``topology``; the
    entry parameters numbered in ``fixed`` hold those arrays on every device (a rewrite's
    ``SourceBinding``) instead of variables."""
    start = time.perf_counter()
    flags = replication_flags(source, topology)
    key = None
    if _shared_runs is not None and not fixed:
        key = (source.to_text(), topology, tuple(tuple(f) for f in flags))
    known = _shared_runs.get(key) if key is not None else None
    table = known[0] if known is not None else TermTable()
    bounds: list[LoopBound] = list(known[2]) if known is not None else []
    try:
        with time_limit(timeout):
            if known is not None:
                left = known[1]
            else:
                left = run_symbolic(source, topology, table, flags, fixed=fixed,
                                    loop_bounds=bounds)
                if key is not None:
                    _shared_runs.clear()
                    _shared_runs[key] = (table, left, list(bounds))
            right = run_symbolic(target, topology, table, flags, fixed=fixed)
    except SymbolicUnsupported as exc:
        return Proof("unsupported", str(exc), terms=table.size,
                     seconds=time.perf_counter() - start)
    except InterpreterError as exc:
        return Proof("unsupported", f"the symbolic run failed: {exc}", terms=table.size,
                     seconds=time.perf_counter() - start)
    if len(left) != len(right) or any(a.shape != b.shape for a, b in zip(left, right)):
        return Proof("unsupported", "the source and target results differ in shape",
                     terms=table.size, seconds=time.perf_counter() - start)
    pairs: list[np.ndarray] = []
    first = None
    for leaf, (a, b) in enumerate(zip(left, right)):
        differs = a != b
        if differs.any():
            if first is None:
                first = (leaf, tuple(int(i) for i in np.argwhere(differs)[0]))
            pairs.append(np.stack([a[differs], b[differs]], axis=1))
    if first is None:
        return Proof("equal", terms=table.size, seconds=time.perf_counter() - start)
    leaf, where = first
    device, index = where[0], where[1:]
    s_term = table.render(left[leaf][where], TERM_TEXT)
    t_term = table.render(right[leaf][where], TERM_TEXT)
    distinct = [(int(x), int(y)) for x, y in np.unique(np.concatenate(pairs), axis=0)]
    opaque = next((found for x, y in distinct for found in (opaque_in(table, x),
                                                            opaque_in(table, y)) if found), None)
    if opaque is not None:  # an op compared only as a whole: no model says more
        return Proof("unsupported", f"the terms differ at device {device}, output {leaf} "
                                    f"index {list(index)}, under a {opaque}, which the proof "
                                    "compares only as a whole (the same op on the same "
                                    "operands)", terms=table.size,
                     seconds=time.perf_counter() - start)
    return Proof("differ", f"device {device}, output {leaf} index {list(index)}: "
                           f"source {s_term}, target {t_term}",
                 device=device, leaf=leaf, index=index, source_term=s_term,
                 target_term=t_term, terms=table.size, seconds=time.perf_counter() - start,
                 pairs=distinct, table=table, loop_bounds=bounds)


def _first_row(table: TermTable, handle: int, found: Callable[[tuple], Any]) -> Any:
    """The first non-None ``found(signature)`` over the rows of ``handle``'s term (its
    operands and a multiset's leaves, each row once; variables and constants end a branch), or
    None."""
    seen: set[int] = set()
    stack = [int(handle)]
    while stack:
        h = stack.pop()
        if h < 0 or h in seen:
            continue
        seen.add(h)
        signature, a, b = table.row(h)
        result = found(signature)
        if result is not None:
            return result
        kind = signature[0]
        if kind in ("variable", "constant"):
            continue
        stack.extend(table.leaves(h) or () if kind == "multiset" else (a, b))
    return None


def opaque_in(table: TermTable, handle: int) -> str | None:
    """The op (its spelling) of an opaque term inside ``handle``'s term, if any: ops the
    symbolic run compares only as a whole (``SymbolicEvaluator._opaque``)."""
    return _first_row(table, handle,
                      lambda signature: str(signature[1]) if signature[0] == "opaque" else None)


def separating_inputs(module: HloModule, topology: Topology, seed: int) -> list[Any]:
    """Distinct random values for every input variable (floats from a normal distribution,
    integers from a wide range), shaped per device unless the leaf is declared replicated: two
    different terms over the variables almost surely take different values on them."""
    return _inputs(module, topology, np.random.default_rng(seed), _random)


def constant_inputs(module: HloModule, others: Sequence[HloModule], topology: Topology,
                    seed: int, limit: int = 8) -> list[list[Any]]:
    """Input sets whose float elements all hold one float constant of ``module`` or ``others``
    (one set per constant, at most ``limit``, 0 and 1 among them), the rest drawn as
    ``separating_inputs``: where a rewrite changed a constant (ReplaceMinimumConstant's -inf ->
    lowest), inputs equal to the new constant reach what random values never do — a masked
    softmax row whose kept values are all lowest gives exp(lowest - lowest) = 1 where the
    source had exp(-inf - lowest) = 0. Only witness candidates: the verifier runs them."""
    found = {value for m in (module, *others) for value in _float_constants(m)}
    pool = sorted(found - {0.0, 1.0}, key=lambda v: (np.isnan(v), v))[:max(0, limit - 2)]
    sets = []
    for number, value in enumerate([*pool, 0.0, 1.0]):
        def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
                 value: float = value) -> np.ndarray:
            if dtype.kind != "f":
                return _random(rng, shape, dtype)
            with np.errstate(over="ignore", invalid="ignore"):
                return np.full(shape, value, np.float64).astype(dtype)
        sets.append(_inputs(module, topology, np.random.default_rng(seed + number), draw))
    return sets


def _float_constants(module: HloModule) -> set[float]:
    """The values of the scalar float constants in ``module``'s computations."""
    found: set[float] = set()
    for computation in module.computations:
        for inst in computation.instructions:
            shape = inst.shape
            if inst.literal is None or not shape.is_array or shape.rank or \
                    not shape.element_type.is_float:
                continue
            try:
                found.add(float(np.asarray(inst.literal.value, np.float64)))
            except (TypeError, ValueError, LiteralError):
                continue
    return found


def _inputs(module: HloModule, topology: Topology, rng: np.random.Generator,
            draw: Any) -> list[Any]:
    """Every entry parameter leaf drawn by ``draw(rng, shape, dtype)``, shaped per device unless
    the leaf is declared replicated."""
    values = []
    for param, flags in zip(module.entry.parameters, replication_flags(module, topology)):
        leaves = param.shape.leaves() if param.shape.is_tuple else [param.shape]
        made = []
        for position, shape in enumerate(leaves):
            dims = tuple(shape.dims) if shape.is_array else (0,)
            replicated = flags[position] if position < len(flags) else False
            full = dims if replicated else (topology.num_devices, *dims)
            dtype = shape.element_type.numpy_dtype if shape.is_array else np.dtype(bool)
            made.append(draw(rng, full, np.dtype(dtype)))
        values.append(tuple(made) if param.shape.is_tuple else made[0])
    return values


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = max(int(info.min), -(1 << 20)), min(int(info.max), 1 << 20)
        return rng.integers(low, high, shape, endpoint=True).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def symbolic_memory(module: HloModule, topology: Topology) -> int:
    """An upper bound of the bytes a symbolic run of ``module`` on ``topology`` holds: the
    interpreter's numeric peak (``neuron_sim.interpreter.memory``) counted in elements of the module's
    narrowest array type, at ``SYMBOLIC_BYTES_PER_ELEMENT`` each."""
    peak = estimate_memory(module, topology).peak_bytes
    sizes = [leaf.element_type.numpy_dtype.itemsize for comp in module.computations
             for inst in comp.instructions for leaf in inst.shape.leaves()
             if leaf.is_array and leaf.element_type.is_array_type]
    return peak // max(1, min(sizes, default=1)) * SYMBOLIC_BYTES_PER_ELEMENT


def decide_differences(proof: Proof, contract: Contract) -> Decision:
    """z3 on the differing term pairs under ``contract`` (``neuron_sim.proofs.smt``). Where
    the pairs hold a loop continued past its unrolled bound and that decides nothing, z3 is
    asked again on the inputs on which the source's truncated loops end within their bounds:
    a proof there is the bounded verdict (``Decision.iterations``), a refutation there a
    witness within the bound."""
    rule = rule_of(contract)
    if rule is None or proof.table is None:
        return Decision("unknown", f"z3 has no predicate for the {contract.describe()} contract")
    decision = _decide(proof, rule)
    if decision.outcome == "proved" or not proof.loop_bounds or not any(
            rest_in(proof.table, h) for pair in proof.pairs for h in pair):
        return decision
    bounded = _decide(proof, rule, [b.conditions for b in proof.loop_bounds])
    if bounded.outcome == "unknown":
        return decision
    if bounded.outcome == "proved":
        bounded.iterations = min(b.iterations for b in proof.loop_bounds)
        bounded.reason += (f", on every input on which each loop of the source whose condition "
                           f"depends on the inputs ends within {bounded.iterations} iterations")
    return bounded


def rest_in(table: TermTable, handle: int) -> bool:
    """Whether ``handle``'s term holds a loop continued past its unrolled bound."""
    return _first_row(table, handle,
                      lambda signature: True if signature[0] == LOOP_REST else None) is True


def _decide(proof: Proof, rule: str, assume_ended: list | None = None) -> Decision:
    """z3 on the pairs under ``rule`` (the bf16 rounding case only when needed)."""
    ended = assume_ended or ()
    parts = rule.split(" | ")
    if "bf16-rounding" in parts and len(parts) > 1:
        # The rounding case costs z3 two float conversions per pair: first ask without it
        # (a stronger predicate, so a proof of it is a proof of the contract).
        cheaper = decide(proof.table, proof.pairs,
                         " | ".join(p for p in parts if p != "bf16-rounding"),
                         assume_ended=ended)
        if cheaper.outcome == "proved":
            return cheaper
    return decide(proof.table, proof.pairs, rule, assume_ended=ended)
