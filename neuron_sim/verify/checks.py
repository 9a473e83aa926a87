"""The ordered checks and the verdict on one topology.

As Alive2 lists its checks, ``CHECKS`` is a list of ``Check`` objects run in order, the first
that fails being the verdict; each has an exact ``ERROR:`` line that tests match:

1. ``ERROR: Target is malformed`` — the target breaks an HLO rule for the topology, or its
   signature differs from the source's (before anything runs), or its outputs do not have the
   source's shapes;
2. ``ERROR: Target fails where source does not`` — executing the target raises (or runs far
   longer than the source);
3. ``ERROR: Collective mismatch in target`` — the target's devices do not meet at the same
   collectives;
4. ``ERROR: Value mismatch`` — an output element differs (bitwise by default; the pass's
   contract decides which differences are allowed).

Adding a check is one entry in ``CHECKS``. Before the checks, the source must be well formed
and run: otherwise the verdict is ``ERROR`` (``SOURCE_MALFORMED``, ``SOURCE_FAILS``,
``UNSUPPORTED``). If the *source* has a collective mismatch (or does not finish), it is
undefined on that input and any target refines it: the trial is skipped and the verdict says so.

Reduction order: XLA leaves the order in which a collective (or reduce, dot...) combines its
operands to the implementation. A value mismatch found on generic floats is therefore replayed
on exactly representable values (small multiples of 1/4, whose sums are exact in any order):
if the mismatch persists, the replay is the reported witness and it cannot be rounding noise;
if it vanishes, is rounding-sized and a reduction is involved, it is classified as
reassociation — reported as a note, not as UNSOUND. A mismatch that needs NaN, an infinity, a
signed zero or an extreme value to show stays UNSOUND with its original witness.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloInstruction, HloModule, dependencies
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.topology import Topology
from neuron_sim.passes.contracts import Contract
from neuron_sim.verify import compare
from neuron_sim.verify.execution import (FailureKind, Outcome, Runner, run_outcome,
                                         target_limit)
from neuron_sim.verify.inputs import exact_counterpart, generate_inputs, given_inputs, style_of_trial
from neuron_sim.verify.result import Counterexample, Status, TopologyVerdict
from neuron_sim.verify.trial_batches import TrialBatches

TARGET_MALFORMED = "ERROR: Target is malformed"
TARGET_FAILS = "ERROR: Target fails where source does not"
COLLECTIVE_MISMATCH = "ERROR: Collective mismatch in target"
VALUE_MISMATCH = "ERROR: Value mismatch"
# ERROR-status lines: the verifier could not decide.
SOURCE_MALFORMED = "ERROR: Source is malformed"
SOURCE_FAILS = "ERROR: Source could not be executed"
UNSUPPORTED = "ERROR: Unsupported by the interpreter"
PASS_FAILED = "ERROR: Pass failed"

EXACT_REPLAYS = 3

# Opcodes whose combination order XLA leaves to the implementation.
REORDERING_OPCODES = frozenset({
    Opcode.ALL_REDUCE, Opcode.ALL_REDUCE_START, Opcode.REDUCE_SCATTER, Opcode.REDUCE,
    Opcode.REDUCE_WINDOW, Opcode.DOT, Opcode.CONVOLUTION, Opcode.SCATTER,
    Opcode.SELECT_AND_SCATTER,
})


# --------------------------------------------------------------------------------------------
# A trial and what a check finds in it.


@dataclass
class Trial:
    """One input set on one topology: both modules, and (once run) both outcomes."""

    source: HloModule
    target: HloModule
    topology: Topology
    inputs: list
    style: str
    contract: Contract
    source_outcome: Outcome
    target_outcome: Outcome

    @functools.cached_property
    def mismatch(self) -> compare.Mismatch | None:
        """The first output element the contract does not allow (both must have run)."""
        return compare.find_mismatch(self.source_outcome.outputs, self.target_outcome.outputs,
                                     self.contract)

    def counterexample(self, check: str, **fields: Any) -> Counterexample:
        return Counterexample(check=check, topology=self.topology, inputs=self.inputs,
                              style=self.style, exact=self.style == "exact", **fields)


@dataclass
class Finding:
    """A failed check on one trial."""

    check: str                                   # its ERROR line
    counterexample: Counterexample
    rounding_sized: bool = False                 # every difference could be rounding
    leaves: tuple[int, ...] = ()                 # every output leaf with a mismatch


@dataclass(frozen=True)
class Check:
    """One check: its name, its exact ``ERROR:`` line, and how it looks for a failure.

    ``before_running(source, target, topology)`` returns a message if the pair fails the check
    without running anything; ``on_trial(trial)`` returns a Finding for a trial that fails it.
    Either may be None.
    """

    name: str
    error_line: str
    before_running: Callable[[HloModule, HloModule, Topology], str | None] | None = None
    on_trial: Callable[[Trial], Finding | None] | None = None


# --------------------------------------------------------------------------------------------
# The checks.


def malformed(module: HloModule, topology: Topology) -> str | None:
    """Why ``module`` breaks an HLO rule on ``topology``, or None."""
    try:
        check_module(module, topology)
    except (HloCheckError, ValueError) as exc:  # ValueError: replica groups, other IR rules
        return str(exc)
    return None


def signature_problem(source: HloModule, target: HloModule) -> str | None:
    """How the target's entry signature differs from the source's, or None."""
    s_params = [p.shape for p in source.entry.parameters]
    t_params = [p.shape for p in target.entry.parameters]
    if len(s_params) != len(t_params):
        return (f"the target's entry has {len(t_params)} parameters, the source's "
                f"{len(s_params)}")
    for i, (s, t) in enumerate(zip(s_params, t_params)):
        if not s.compatible(t):
            return f"parameter {i} is {t} in the target but {s} in the source"
    # The outputs compared are the flattened leaves (out{j}): a result nested differently with
    # the same leaves in the same order (FlattenEntryTuple) has the source's signature.
    s_root, t_root = source.entry.root.shape, target.entry.root.shape
    s_leaves, t_leaves = list(s_root.leaves()), list(t_root.leaves())
    if len(s_leaves) != len(t_leaves) or not all(s.compatible(t)
                                                 for s, t in zip(s_leaves, t_leaves)):
        return f"the target returns {t_root} but the source returns {s_root}"
    return None


def _target_malformed(source: HloModule, target: HloModule, topology: Topology) -> str | None:
    return signature_problem(source, target) or malformed(target, topology)


def _outputs_malformed(trial: Trial) -> Finding | None:
    if not trial.target_outcome.ok or trial.mismatch is None or \
            trial.mismatch.shape_problem is None:
        return None
    return Finding(TARGET_MALFORMED,
                   trial.counterexample(TARGET_MALFORMED, message=trial.mismatch.shape_problem))


def _target_fails(trial: Trial) -> Finding | None:
    outcome = trial.target_outcome
    if outcome.ok or outcome.failure is FailureKind.COLLECTIVE_MISMATCH:
        return None
    message = outcome.message
    if outcome.failure is FailureKind.TIMEOUT:
        message = f"the target {message}; the source took {trial.source_outcome.seconds:.2g} s"
    return Finding(TARGET_FAILS, trial.counterexample(TARGET_FAILS, message=message))


def _collective_mismatch(trial: Trial) -> Finding | None:
    if trial.target_outcome.failure is not FailureKind.COLLECTIVE_MISMATCH:
        return None
    return Finding(COLLECTIVE_MISMATCH,
                   trial.counterexample(COLLECTIVE_MISMATCH, message=trial.target_outcome.message))


def _value_mismatch(trial: Trial) -> Finding | None:
    if not trial.target_outcome.ok or trial.mismatch is None or \
            trial.mismatch.shape_problem is not None:
        return None
    source, target = trial.source_outcome.outputs, trial.target_outcome.outputs
    contract, mismatch = trial.contract, trial.mismatch
    s_leaf, t_leaf = source[mismatch.leaf], target[mismatch.leaf]
    cex = trial.counterexample(
        VALUE_MISMATCH, device=mismatch.device, leaf=mismatch.leaf, index=mismatch.index,
        leaf_shape=_shape_text(s_leaf), source_value=mismatch.source_text,
        target_value=mismatch.target_text, source_device_values=s_leaf[mismatch.device],
        target_device_values=t_leaf[mismatch.device], mismatch_devices=mismatch.devices,
        mismatch_count=mismatch.count,
        same_as_source_device=_source_device_with(s_leaf, t_leaf[mismatch.device], contract,
                                                  mismatch.device))
    disallowed = [~contract.allowed(s, t) for s, t in zip(source, target)]
    rounding = all(compare.rounding_sized_mask(s[bad], t[bad]).all()
                   for s, t, bad in zip(source, target, disallowed) if bad.any())
    leaves = tuple(j for j, bad in enumerate(disallowed) if bad.any())
    return Finding(VALUE_MISMATCH, cex, rounding_sized=rounding, leaves=leaves)


CHECKS: tuple[Check, ...] = (
    Check("target malformed", TARGET_MALFORMED, before_running=_target_malformed,
          on_trial=_outputs_malformed),
    Check("target fails", TARGET_FAILS, on_trial=_target_fails),
    Check("collective mismatch", COLLECTIVE_MISMATCH, on_trial=_collective_mismatch),
    Check("value mismatch", VALUE_MISMATCH, on_trial=_value_mismatch),
)
"""The checks in the order they run; the first that fails is the verdict."""


def _shape_text(stacked: np.ndarray) -> str:
    """``f32[2,4]`` for a ``[D, 2, 4]`` float32 stack."""
    try:
        spelling = ElementType.from_numpy(stacked.dtype).spelling
    except (KeyError, ValueError, TypeError):
        spelling = str(stacked.dtype)
    return f"{spelling}[{','.join(map(str, stacked.shape[1:]))}]"


def _source_device_with(source_leaf: np.ndarray, target_value: np.ndarray, contract: Contract,
                        skip: int) -> int | None:
    """A device on which the source computes exactly what the target gave device ``skip``."""
    if target_value.size < 2 or compare.equal_mask(target_value, target_value.reshape(-1)[0]).all():
        return None  # a single repeated value matches too easily to mean anything
    fits = contract.allowed(source_leaf, target_value[np.newaxis]).reshape(len(source_leaf), -1)
    devices = np.flatnonzero(fits.all(axis=1))
    devices = devices[devices != skip]
    return int(devices[0]) if devices.size else None


# --------------------------------------------------------------------------------------------
# The instructions that lead to an output leaf.


def leaf_producer(module: HloModule, leaf: int) -> HloInstruction:
    """The entry instruction that produces flattened output leaf ``leaf`` (through tuples)."""
    node, target = module.entry.root, leaf
    while node.shape.is_tuple and node.opcode is Opcode.TUPLE:
        for operand in node.operands:
            count = len(list(operand.shape.leaves()))
            if target < count:
                node = operand
                break
            target -= count
        else:
            break
    return node


def path_to(module: HloModule, leaf: int | None, limit: int = 12) -> list[str]:
    """The entry instructions an output leaf depends on, operands first (the last ``limit``)."""
    root = module.entry.root if leaf is None else leaf_producer(module, leaf)
    needed = dependencies(root)
    path = [inst for inst in module.entry.instructions if inst in needed]
    lines = [inst.to_text() for inst in path[-limit:]]  # only the lines kept are written
    if len(path) > limit:
        lines.insert(0, f"... ({len(path) - limit} more)")
    return lines


def leaf_has_reordering_reduction(module: HloModule, leaf: int) -> bool:
    """Does output leaf ``leaf`` depend on a reduction whose order is free (in the entry or in a
    computation called on the way)?"""
    return any(inst.opcode in REORDERING_OPCODES
               for inst in dependencies(leaf_producer(module, leaf), into_calls=True))


# --------------------------------------------------------------------------------------------
# The verdict on one topology.


@dataclass
class _Skipped:
    """A trial not compared because the source is undefined or unfinished there."""

    undefined: bool
    text: str


def _run_trial(source: HloModule, target: HloModule, topology: Topology, inputs: list,
               style: str, contract: Contract, runner: Runner, seed: int,
               timeout: float | None, checks: Sequence[Check]
               ) -> Finding | _Skipped | TopologyVerdict | None:
    """Run both modules on one input set and apply the checks in order.

    Returns None if every check passed, the first Finding, a _Skipped trial, or an ERROR
    verdict (the source fails, or either module needs what the interpreter lacks)."""
    where = f"topology {topology}, {style} inputs"
    src = run_outcome(runner, source, inputs, topology, seed, timeout)
    if src.failure is FailureKind.COLLECTIVE_MISMATCH:
        return _Skipped(True, f"{where}: {src.message}")
    if src.failure is FailureKind.TIMEOUT:
        return _Skipped(False, f"{where}: {src.message}")
    if src.failure is FailureKind.UNSUPPORTED:
        return TopologyVerdict(topology).fail(
            Status.ERROR, UNSUPPORTED,
            f"the source cannot be executed on topology {topology}: {src.message}")
    if not src.ok:
        return TopologyVerdict(topology).fail(
            Status.ERROR, SOURCE_FAILS, f"on topology {topology} with {style} inputs: "
                                        f"{src.message}")
    tgt = run_outcome(runner, target, inputs, topology, seed, target_limit(timeout, src))
    if tgt.failure is FailureKind.UNSUPPORTED:
        return TopologyVerdict(topology).fail(
            Status.ERROR, UNSUPPORTED,
            f"the target cannot be executed on topology {topology}: {tgt.message}")
    trial = Trial(source, target, topology, inputs, style, contract, src, tgt)
    for check in checks:
        finding = check.on_trial(trial) if check.on_trial is not None else None
        if finding is not None:
            return finding
    return None


def _replay_exact(source: HloModule, target: HloModule, topology: Topology, seed: int,
                  trial: int, original: list, contract: Contract, runner: Runner,
                  timeout: float | None, checks: Sequence[Check]) -> Finding | None:
    """Look for a failure on exactly representable inputs: first the original inputs with
    every finite nonzero float made exact (special values kept in place), then fresh exact
    inputs. On these no summation order can round or overflow differently. Each candidate is
    drawn only when the ones before it showed nothing (usually the first one does)."""
    candidates = itertools.chain(
        (exact_counterpart(original, seed=seed + k) for k in range(EXACT_REPLAYS)),
        (generate_inputs(source, topology, seed=seed + 7919 * (k + 1), trial=trial + k,
                         style="exact") for k in range(EXACT_REPLAYS)))
    for values in candidates:
        found = _run_trial(source, target, topology, values, "exact", contract, runner, seed,
                           timeout, checks)
        if isinstance(found, Finding):
            return found
    return None


def verify_topology(source: HloModule, target: HloModule, topology: Topology, *,
                    trials: int, seed: int, inputs: Sequence[Any] | None, contract: Contract,
                    runner: Runner, timeout: float | None,
                    checks: Sequence[Check] = CHECKS) -> TopologyVerdict:
    """The verdict on ``topology``: ``trials`` generated input sets (or the given ``inputs``),
    each run through ``checks`` in order until one fails."""
    verdict = TopologyVerdict(topology, target=target)
    problem = malformed(source, topology)
    if problem is not None:
        return verdict.fail(Status.ERROR, SOURCE_MALFORMED, f"on topology {topology}: {problem}")
    for check in checks:
        problem = check.before_running(source, target, topology) \
            if check.before_running is not None else None
        if problem is not None:
            cex = Counterexample(check=check.error_line, topology=topology, inputs=[],
                                 style="none", exact=True, message=problem)
            return verdict.fail(Status.UNSOUND, check.error_line, problem, cex)

    undefined: list[str] = []
    unfinished: list[str] = []
    reassociation: Counterexample | None = None
    plan = [("given", 0)] if inputs is not None else \
        [(style_of_trial(t), t) for t in range(trials)]
    # The first set runs alone; the others together when it was fast (trial_batches.py).
    batches = TrialBatches(runner, source, target, topology, seed)
    sets: dict[int, list] = {}
    trial_runner = batches.first()
    for index, (style, number) in enumerate(plan):
        if index == 1:
            sets = {n: generate_inputs(source, topology, seed=seed, trial=n)
                    for _, n in plan[1:]}
            trial_runner = batches.rest(list(sets.values()))
        values = given_inputs(source, inputs, topology) if inputs is not None else \
            sets[number] if number in sets else \
            generate_inputs(source, topology, seed=seed, trial=number)
        found = _run_trial(source, target, topology, values, style, contract, trial_runner,
                           seed, timeout, checks)
        if found is None:
            verdict.compared += 1
            continue
        if isinstance(found, _Skipped):
            (undefined if found.undefined else unfinished).append(found.text)
            continue
        if isinstance(found, TopologyVerdict):
            found.target, found.compared = target, verdict.compared
            return found
        verdict.compared += 1
        if found.check == VALUE_MISMATCH and style != "exact" and inputs is None:
            replay = _replay_exact(source, target, topology, seed, number, values, contract,
                                   runner, timeout, checks)
            if replay is not None:
                return verdict.fail(Status.UNSOUND, replay.check,
                                    replay.counterexample.summary(), replay.counterexample)
            # Not reproducible once every finite value is exact: what remains is rounding,
            # or overflow of the extreme values, in a reduction whose order is free.
            overflow = style == "boundary"
            reorderable = all(leaf_has_reordering_reduction(source, j) or
                              leaf_has_reordering_reduction(target, j) for j in found.leaves)
            if (found.rounding_sized or overflow) and reorderable:
                reassociation = reassociation or found.counterexample
                continue
            found.counterexample.exact = False
        return verdict.fail(Status.UNSOUND, found.check, found.counterexample.summary(),
                            found.counterexample)

    if reassociation is not None:
        verdict.classification = "reassociation"
        cex = reassociation
        verdict.notes.append(
            f"outputs differ by rounding only (e.g. device {cex.device}, leaf {cex.leaf} index "
            f"{list(cex.index)}: {cex.source_value} vs {cex.target_value} on topology "
            f"{cex.topology}), and the difference vanishes on exactly representable inputs: "
            "reassociation of a reduction whose order XLA leaves to the implementation, not a "
            "miscompile")
    if unfinished:
        verdict.warnings.append(
            f"the source did not finish on {len(unfinished)} input set(s) (a loop that may not "
            "end on such inputs); nothing to compare there: " + unfinished[0])
    if undefined:
        verdict.warnings.append(
            "the source has undefined behaviour (a collective mismatch) on "
            f"{len(undefined)} input set(s); any target refines it there: " + undefined[0])
        verdict.classification = verdict.classification or "source undefined"
    if (undefined or unfinished) and verdict.compared == 0:
        why = "undefined" if undefined and not unfinished else \
            "unfinished" if not undefined else "undefined or unfinished"
        return verdict.fail(Status.FAILED_TO_PROVE, None,
                            f"the source is {why} on every input tried: nothing was compared")
    return verdict
