"""Shrink an UNSOUND case to the smallest module pair, topology and inputs that still show it.

Greedy delta debugging (after C-Reduce and LLVM's bugpoint): propose a smaller variant, keep it
if the verdict stays UNSOUND *with the same ERROR line*, repeat until no proposal is accepted.
The proposals, tried in this order:

* narrow a tuple root to the one output element that is wrong;
* bypass an instruction (its users take one of its same-shaped operands instead);
* replace an instruction by a new parameter or by a zero constant (its operands go dead);
* drop unused parameters;
* shrink the topology (fewer replicas, fewer partitions), keeping the module's groups valid;
* finally simplify the inputs: zero whole parameters, then halves, quarters... of them.

Soundness of the reduction itself matters as much as its size. With a pass (``check_pass``),
only the *source* is edited and the pass is re-run, so the reported pair is one the pass really
produces. With two given modules, an edit is applied only to an instruction that is identical
in both (same name, same text): the shared prefix is cut the same way on both sides, the
rewritten part is never touched — otherwise the minimizer could "find" a bug it made itself.

Size is counted in entry-computation instructions (reduction bodies such as ``%sum`` are not
counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.topology import Topology
from neuron_sim.passes.xla.dce import DeadCodeElimination
from neuron_sim.verify.inputs import content_key
from neuron_sim.verify.result import Minimized, Status, VerificationResult


class PairVerifier(Protocol):
    """What judges each candidate: a ``Verifier`` (verifier.py) with the original
    verification's options."""

    def check_case(self, before: HloModule, after: HloModule, topology: Topology,
                   inputs: Sequence[Any] | None) -> VerificationResult:
        """The verdict on one candidate pair on ``topology`` (inputs None: generated ones),
        unminimized."""


Rewriter = Callable[[HloModule, Topology], HloModule | None]
"""``rewrite(source, topology)``: the passes' target for a candidate source, None if the passes
fail or change nothing."""

MAX_CHECKS = 400          # verifier calls per minimization (module, topology and inputs)
MAX_INPUT_CHECKS = 80


def module_size(module: HloModule) -> int:
    """Instructions in the entry computation."""
    return len(module.entry.instructions)


def pair_size(before: HloModule, after: HloModule) -> int:
    """The size of a case: the larger entry computation of the two."""
    return max(module_size(before), module_size(after))


# --------------------------------------------------------------------------------------------
# Editing one module.


def _dce(module: HloModule) -> None:
    """Remove what an edit left dead (XLA's HloDCE: side effects stay). The module is a
    candidate's own clone, dropped whole when an edit raises, so the pass edits it in place
    (``run`` would copy it once more to keep it intact)."""
    dce = DeadCodeElimination()
    dce.run_on_module(module, dce.bind())


def _drop_layout_header(module: HloModule) -> None:
    # The entry layout names the signature; edits change the signature.
    module.header.pop("entry_computation_layout", None)


def _new_parameter(module: HloModule, shape: Any) -> HloInstruction:
    comp = module.entry
    number = len(comp.parameters)
    param = make_instruction(comp, Opcode.PARAMETER, shape=shape,
                             name=module.unique_name(f"p{number}"), parameter_number=number)
    comp.add_before(param, comp.instructions[0])
    _drop_layout_header(module)
    return param


def _replace(module: HloModule, inst: HloInstruction, new: HloInstruction) -> None:
    comp = module.entry
    inst.replace_all_uses_with(new)
    if inst is not comp.root and not inst.users and inst.opcode is not Opcode.PARAMETER:
        comp.remove_with_dead_operands(inst)
    _dce(module)


def _zero_constant(module: HloModule, inst: HloInstruction) -> HloInstruction | None:
    shape = inst.shape
    if not isinstance(shape, ArrayShape) or not shape.is_array or shape.element_count > 64:
        return None
    try:
        dtype = shape.element_type.numpy_dtype
    except (TypeError, ValueError, AttributeError):
        return None
    literal = Literal.from_array(shape, np.zeros(shape.dims, dtype=dtype))
    const = make_instruction(module.entry, Opcode.CONSTANT, shape=shape,
                             name=module.unique_name("zero"), literal=literal)
    module.entry.add_before(const, inst)
    return const


def _remove_parameter(module: HloModule, number: int) -> None:
    comp = module.entry
    param = comp.parameter(number)
    comp.instructions.remove(param)
    param.parent = None
    for other in comp.parameters:
        if other.parameter_number > number:
            other.parameter_number -= 1
    _drop_layout_header(module)


def _set_topology(module: HloModule, topology: Topology) -> None:
    for key, value in (("replica_count", topology.replica_count),
                       ("num_partitions", topology.num_partitions)):
        if value == 1 and key not in module.header:
            continue
        module.header[key] = value


# --------------------------------------------------------------------------------------------
# Proposals. An edit is a function that mutates a (before, after) pair of clones and returns
# False if it does not apply.

Edit = Callable[[HloModule, HloModule | None], bool]


def _entry_named(module: HloModule, name: str) -> HloInstruction | None:
    for inst in module.entry.instructions:
        if inst.name == name:
            return inst
    return None


def _shared(before: HloModule, after: HloModule | None, name: str) -> list[HloModule] | None:
    """The modules an edit of instruction ``name`` applies to; None if it may not be edited."""
    inst = _entry_named(before, name)
    if inst is None:
        return None
    if after is None:
        return [before]
    twin = _entry_named(after, name)
    if twin is None or twin.to_text() != inst.to_text():
        return None
    return [before, after]


def _edits(before: HloModule, after: HloModule | None,
           wrong_leaf: int | None) -> Iterator[tuple[str, Edit]]:
    root = before.entry.root
    if root.opcode is Opcode.TUPLE and (after is None or after.entry.root.opcode is Opcode.TUPLE):
        leaves = list(range(len(root.operands)))
        if wrong_leaf is not None and wrong_leaf < len(leaves):
            leaves.remove(wrong_leaf)
            leaves.insert(0, wrong_leaf)
        for j in leaves:
            yield f"root -> element {j}", _narrow_root(j)
    names = [inst.name for inst in reversed(before.entry.instructions)
             if inst.opcode is not Opcode.PARAMETER]
    for name in names:
        inst = _entry_named(before, name)
        for i, operand in enumerate(inst.operands):
            if operand.shape.compatible(inst.shape):
                yield f"bypass %{name} -> operand {i}", _bypass(name, i)
    for name in names:
        yield f"%{name} -> parameter", _to_parameter(name)
    for name in names:
        if _entry_named(before, name).opcode is not Opcode.CONSTANT:
            yield f"%{name} -> zeros", _to_zeros(name)
    for param in reversed(before.entry.parameters):
        yield f"drop parameter {param.parameter_number}", _drop_parameter(param.parameter_number)


def _narrow_root(j: int) -> Edit:
    def edit(before: HloModule, after: HloModule | None) -> bool:
        for module in [before] + ([after] if after is not None else []):
            root = module.entry.root
            if root.opcode is not Opcode.TUPLE or j >= len(root.operands):
                return False
            new_root = root.operand(j)
            module.entry.root = new_root
            module.entry.remove_with_dead_operands(root)
            _dce(module)
            _drop_layout_header(module)
        return True
    return edit


def _substitute(name: str,
                replacement: Callable[[HloModule, HloInstruction], HloInstruction | None]
                ) -> Edit:
    """Replace instruction ``name`` (where it may be edited) by ``replacement(module, inst)``
    in each module; None from ``replacement`` means the edit does not apply."""
    def edit(before: HloModule, after: HloModule | None) -> bool:
        modules = _shared(before, after, name)
        if not modules:
            return False
        for module in modules:
            inst = _entry_named(module, name)
            new = replacement(module, inst)
            if new is None:
                return False
            _replace(module, inst, new)
        return True
    return edit


def _bypass(name: str, i: int) -> Edit:
    return _substitute(name, lambda module, inst: inst.operand(i))


def _to_parameter(name: str) -> Edit:
    def parameter(module: HloModule, inst: HloInstruction) -> HloInstruction | None:
        if inst.shape.is_tuple or inst.shape.is_token:
            return None
        return _new_parameter(module, inst.shape)
    return _substitute(name, parameter)


def _to_zeros(name: str) -> Edit:
    return _substitute(name, _zero_constant)


def _drop_parameter(number: int) -> Edit:
    def edit(before: HloModule, after: HloModule | None) -> bool:
        modules = [before] + ([after] if after is not None else [])
        for module in modules:
            if number >= len(module.entry.parameters) or \
                    module.entry.parameter(number).users or \
                    module.entry.parameter(number) is module.entry.root:
                return False
        for module in modules:
            _remove_parameter(module, number)
        return True
    return edit


def _smaller_topologies(topology: Topology) -> list[Topology]:
    """Fewer devices first: every (R', P') with R' <= R, P' <= P, default device assignment."""
    R, P = topology.replica_count, topology.num_partitions
    candidates = {(r, p) for r in range(1, R + 1) for p in range(1, P + 1)} - {(R, P)}
    return [Topology(r, p) for r, p in sorted(candidates, key=lambda rp: (rp[0] * rp[1], rp))]


# --------------------------------------------------------------------------------------------
# The loop.


@dataclass
class _Case:
    before: HloModule
    after: HloModule
    topology: Topology
    result: VerificationResult


class _Minimizer:
    def __init__(self, original: VerificationResult, verifier: PairVerifier,
                 rewrite: Rewriter | None) -> None:
        self.original = original
        self.verifier = verifier
        self.rewrite = rewrite
        self.line = original.error_line
        self.checks = 0

    def judge(self, before: HloModule, after: HloModule | None,
              topology: Topology, inputs: Sequence[Any] | None = None) -> _Case | None:
        """The case if (before, after) on ``topology`` is still UNSOUND with the same line.
        With a rewrite, ``after`` is what it makes of ``before``."""
        if self.checks >= MAX_CHECKS:
            return None
        self.checks += 1
        if self.rewrite is not None:
            after = self.rewrite(before, topology)
            if after is None:
                return None
        return self._verdict(before, after, topology, inputs)

    def _verdict(self, before: HloModule, after: HloModule, topology: Topology,
                 inputs: Sequence[Any] | None) -> _Case | None:
        result = self.verifier.check_case(before, after, topology, inputs)
        if result.status is not Status.UNSOUND or result.error_line != self.line:
            return None
        return _Case(before, after, topology, result)

    def judge_inputs(self, case: _Case, inputs: list,
                     judged: dict[tuple, _Case | None]) -> _Case | None:
        """The case on ``inputs`` if its pair is still UNSOUND there with the same line. The
        pair is the case's own (a rewrite already made its target, and a pass makes the same
        target of the same source), and the same inputs give the same verdict: an input set
        in ``judged`` (this case's, by content) is not run again — zeroing one chunk of a
        parameter can give a set already tried, when the rest of it is zero — though it
        counts as a check as before."""
        if self.checks >= MAX_CHECKS:
            return None
        self.checks += 1
        key = content_key(inputs)
        if key not in judged:
            judged[key] = self._verdict(case.before, case.after, case.topology, inputs)
        return judged[key]

    def _size_key(self, before: HloModule, after: HloModule | None) -> tuple[int, int]:
        size = module_size(before) + (module_size(after) if self.rewrite is None and after
                                      is not None else 0)
        return size, len(before.entry.parameters)

    def shrink_modules(self, case: _Case) -> tuple[_Case, int]:
        steps = 0
        progress = True
        while progress and self.checks < MAX_CHECKS:
            progress = False
            leaf = case.result.counterexample.leaf if case.result.counterexample else None
            for label, edit in _edits(case.before, None if self.rewrite else case.after, leaf):
                before = case.before.clone()
                after = None if self.rewrite else case.after.clone()
                try:
                    if not edit(before, after):
                        continue
                except Exception:  # noqa: BLE001 - an edit the IR refuses is just not applied
                    continue
                if self._size_key(before, after) >= self._size_key(case.before, case.after):
                    continue
                new = self.judge(before, after, case.topology)
                if new is not None:
                    case = new
                    steps += 1
                    progress = True
                    break
        return case, steps

    def shrink_topology(self, case: _Case) -> tuple[_Case, int]:
        for topology in _smaller_topologies(case.topology):
            before = case.before.clone()
            after = case.after.clone() if self.rewrite is None else None
            _set_topology(before, topology)
            if after is not None:
                _set_topology(after, topology)
            new = self.judge(before, after, topology)
            if new is not None:
                return new, 1
        return case, 0

    def shrink_inputs(self, case: _Case) -> tuple[_Case, int]:
        cex = case.result.counterexample
        if cex is None or not cex.inputs or self.original.status is not Status.UNSOUND:
            return case, 0
        budget = self.checks + MAX_INPUT_CHECKS
        inputs = [tuple(np.array(v) for v in value) if isinstance(value, tuple)
                  else np.array(value) for value in cex.inputs]
        steps = 0
        judged: dict[tuple, _Case | None] = {}

        def still_fails(candidate: list) -> _Case | None:
            if self.checks >= budget:
                return None
            return self.judge_inputs(case, candidate, judged)

        best: _Case | None = None
        for i, value in enumerate(inputs):
            if isinstance(value, tuple):
                continue
            chunks = [np.arange(value.size)]
            while chunks:
                chunk = chunks.pop(0)
                flat = inputs[i].reshape(-1)
                if not np.any(flat[chunk] != 0):
                    continue
                trial = [v.copy() if not isinstance(v, tuple) else v for v in inputs]
                trial[i].reshape(-1)[chunk] = 0
                found = still_fails(trial)
                if found is not None:
                    inputs = trial
                    best = found
                    steps += 1
                elif len(chunk) > 1 and len(chunk) > value.size // 16:
                    half = len(chunk) // 2
                    chunks += [chunk[:half], chunk[half:]]
        if best is None:
            return case, 0
        new_cex = best.result.counterexample
        new_cex.style = cex.style
        new_cex.exact = cex.exact
        return best, steps

    def run(self) -> Minimized | None:
        original = self.original
        if original.counterexample is None:
            return None
        topology = original.counterexample.topology
        start = self.judge(original.source.clone(), original.target.clone(), topology)
        if start is None:
            return None
        case, steps = self.shrink_modules(start)
        case, more = self.shrink_topology(case)
        steps += more
        if more:
            case, more = self.shrink_modules(case)
            steps += more
        case, more = self.shrink_inputs(case)
        steps += more
        return Minimized(before=case.before, after=case.after,
                         counterexample=case.result.counterexample,
                         original_size=pair_size(original.source, original.target),
                         size=pair_size(case.before, case.after), steps=steps)


def minimize_case(result: VerificationResult, verifier: PairVerifier, *,
                  rewrite: Rewriter | None = None) -> Minimized | None:
    """Minimize an UNSOUND result, starting from its counterexample's topology; ``verifier``
    judges each candidate.

    Without ``rewrite``, a before/after pair: edits touch only instructions identical in both.
    With ``rewrite`` (the passes), only the source is edited and the target is what ``rewrite``
    makes of it, so the reported pair is one the passes really produce.
    """
    return _Minimizer(result, verifier, rewrite).run()
