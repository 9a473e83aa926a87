"""Passes whose soundness depends on context they do not check, and the rule that decides, per
instruction the pass would rewrite, whether the rewrite is safe on a topology.

A rule is data: ``HAZARDS`` maps a registry key to a ``Hazard`` (what context the pass relies on
and a ``judge`` that lists the pass's sites on a module). A pass without an entry is taken to be
context-free (its own contract holds everywhere, which the verifier checks separately).

* DeletePermute (``aws_neuron_delete_permute``) deletes every all-reduce and collective-permute;
  the seed says it is correct only where they are the identity. Each one is judged with XLA's
  degenerate rules (SEMANTICS.md §2; ``passes.neuron.delete_permute.identity_violation``). The
  guarded variants are judged by the same rule, which cross-checks their guards.
* The all-reduce + dynamic-slice folds read the offset computation and the groups under the
  topology: each pair a fold would rewrite is judged by the z3 fold proof on the topology.
* ReplaceRng without a pinned ``seed`` plants constants drawn from ``std::random_device``: two
  compiles of one module differ. Every rng is a site, unsafe unless the seed is pinned.
* DeviceAssignmentLegalization must run once: a collective whose groups are already physical
  is legalized a second time. After it, a pass that reads groups as logical ids (the folds,
  the guarded deletions, XLA's simplifiers) misreads them — unless the assignment is the
  identity, where physical and logical ids coincide.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.topology import Topology
from passes.analysis.ar_ds_pairs import pair_of
from passes.analysis.fold_proof import prove_pair
from passes.base import HloPass, OpExpanderPass
from passes.neuron.delete_permute import identity_violation


class Verdict(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"

    def __str__(self) -> str:
        return self.value


@dataclass
class Site:
    """One instruction a pass would rewrite, and whether that is safe on the topology."""

    pass_key: str
    computation: str
    instruction: str
    verdict: Verdict
    reason: str = ""
    witness: str | None = None          # filled in by the dynamic confirmation
    notes: list[str] = field(default_factory=list)
    position: int = 0                   # index of the pass in the pipeline

    @property
    def unsafe(self) -> bool:
        return self.verdict is Verdict.UNSAFE

    def to_json(self) -> dict:
        return {"pass": self.pass_key, "position": self.position,
                "computation": self.computation, "instruction": self.instruction,
                "reason": self.reason, "witness": self.witness, "notes": list(self.notes)}


Judge = Callable[[HloPass, HloModule, Topology], list[Site]]


@dataclass(frozen=True)
class Hazard:
    """What a pass relies on without checking it, and how to judge its sites."""

    relies_on: str
    judge: Judge
    confirmable: bool = True            # the differential verifier can show a witness


def _site(hlo_pass: HloPass, inst: HloInstruction, reason: str | None) -> Site:
    computation = inst.parent.name if inst.parent is not None else "?"
    return Site(hlo_pass.name, computation, inst.name,
                Verdict.SAFE if reason is None else Verdict.UNSAFE, reason or "")


def matched_instructions(hlo_pass: HloPass, module: HloModule) -> list[HloInstruction]:
    """The instructions an OpExpander pass would expand on ``module`` (its bound context)."""
    if not isinstance(hlo_pass, OpExpanderPass):
        return []
    return hlo_pass.candidates(module)


def _degenerate(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
    return [_site(hlo_pass, inst, identity_violation(inst, topology))
            for inst in matched_instructions(hlo_pass, module)]


def _fold(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
    sites = []
    for inst in matched_instructions(hlo_pass, module):
        pair = pair_of(inst)
        if pair is None:
            sites.append(_site(hlo_pass, inst, "the fold fires but no all-reduce + "
                                               "dynamic-slice pair is recognised to prove"))
            continue
        try:
            proof = prove_pair(pair, topology)
        except ValueError as exc:
            sites.append(_site(hlo_pass, inst, str(exc)))
            continue
        reason = None if proof.proven else f"fold {proof.status}: {proof.reason}" + (
            f"; {proof.witness.describe()}" if proof.witness is not None else "")
        sites.append(_site(hlo_pass, inst, reason))
    return sites


def _unpinned_rng(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
    seed = hlo_pass.option("seed") if any(o.name == "seed" for o in hlo_pass.options) else None
    reason = None if seed is not None else (
        "seed not pinned: the planted constants come from std::random_device, so two "
        "compiles of this module differ (pin it with --pass-option seed=N)")
    return [_site(hlo_pass, inst, reason) for comp in module.computations
            for inst in comp.instructions if inst.opcode is Opcode.RNG]


COLLECTIVES = frozenset({
    Opcode.ALL_REDUCE, Opcode.ALL_GATHER, Opcode.REDUCE_SCATTER, Opcode.ALL_TO_ALL,
    Opcode.COLLECTIVE_PERMUTE})


def groups_are_physical(inst: HloInstruction) -> bool:
    """True if the collective's groups were legalized to physical device ids."""
    try:
        from passes.neuron.device_assignment_legalization import groups_are_physical as test
    except ImportError:
        return False
    return test(inst)


def _physical_collectives(module: HloModule) -> list[HloInstruction]:
    return [inst for comp in module.computations for inst in comp.instructions
            if inst.opcode in COLLECTIVES and groups_are_physical(inst)]


def _identity_assignment(topology: Topology) -> bool:
    return topology.device_assignment is None


def _legalization(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
    if _identity_assignment(topology):
        return []
    return [_site(hlo_pass, inst, "its groups are already physical device ids: legalizing "
                                  "again maps them through the device assignment a second time")
            for inst in _physical_collectives(module)]


def _logical_reader(inner: Judge | None) -> Judge:
    """A pass that reads groups as logical ids: unsafe on every legalized collective (unless
    the assignment is the identity), then judged by ``inner`` (if any) on the rest."""

    def judge(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
        physical = [] if _identity_assignment(topology) else _physical_collectives(module)
        sites = [_site(hlo_pass, inst, "it reads replica groups as logical ids, but these were "
                                       "legalized to physical device ids and the device "
                                       "assignment is not the identity")
                 for inst in physical]
        if inner is not None:
            taken = {inst.name for inst in physical}
            sites += [s for s in inner(hlo_pass, module, topology) if s.instruction not in taken]
        return sites

    return judge


DEGENERATE = "every deleted collective is the identity on the topology (XLA's degenerate rules)"
FOLD = "the offset computation selects each device's reduce-scatter block on the topology"
LOGICAL = "replica groups are logical ids (not yet legalized to physical device ids)"

HAZARDS: dict[str, Hazard] = {
    "aws_neuron_delete_permute": Hazard(DEGENERATE, _logical_reader(_degenerate)),
    "delete_permute_guarded": Hazard(DEGENERATE, _logical_reader(_degenerate)),
    "aws_neuron_strip_trivial_collectives": Hazard(DEGENERATE, _logical_reader(_degenerate)),
    "aws_neuron_rewrite_all_reduce_dynamic_slice": Hazard(FOLD, _logical_reader(_fold)),
    "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups":
        Hazard(FOLD, _logical_reader(_fold)),
    "rewrite_all_reduce_dynamic_slice_proven": Hazard(LOGICAL, _logical_reader(None)),
    "xla_reduce_scatter_creator": Hazard(LOGICAL, _logical_reader(None)),
    "xla_all_reduce_simplifier": Hazard(LOGICAL, _logical_reader(None)),
    "aws_neuron_replace_rng": Hazard("a pinned seed (deterministic compiles)", _unpinned_rng,
                                     confirmable=False),
    "aws_neuron_device_assignment_legalization": Hazard(
        "it runs once, on logical groups", _legalization),
}


def hazard_of(hlo_pass: HloPass) -> Hazard | None:
    """The hazard of a pass (by registry key), or None for a context-free pass."""
    return HAZARDS.get(hlo_pass.name)
