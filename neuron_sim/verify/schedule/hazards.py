"""Passes whose soundness depends on context they do not check, and the rules that decide, per
instruction the pass would rewrite, whether the rewrite is safe on a topology.

A pass declares what it relies on (``HloPass.hazard``, a ``neuron_sim.passes.context_hazards``
declaration: one or more ``Reliance`` values); ``hazard_of`` turns the declaration of a pass's
class into a ``Hazard`` whose ``judge`` lists the pass's sites on a module. A pass that declares
nothing is taken to be context-free (its own contract holds everywhere, which the verifier checks
separately). The rule of each reliance:

* IDENTITY_COLLECTIVES — DeletePermute (``aws_neuron_delete_permute``) deletes every all-reduce
  and collective-permute; the seed says it is correct only where they are the identity. Each one
  is judged with XLA's degenerate rules (docs/semantics.md §2) by the pass's declared
  ``identity_rule`` (``neuron_sim.passes.neuron.delete_permute.deletion_violation``). The guarded
  variants are judged by the same rule, which cross-checks their guards.
* FOLD_OFFSETS — the all-reduce + dynamic-slice folds read the offset computation and the groups
  under the topology: each pair a fold would rewrite is judged by the z3 fold proof on the
  topology.
* PINNED_SEED — ReplaceRng without a pinned ``seed`` plants constants drawn from
  ``std::random_device``: two compiles of one module differ. Every rng is a site, unsafe unless
  the seed is pinned; the differential verifier cannot show it (two runs can).
* SINGLE_RUN — DeviceAssignmentLegalization must run once: a collective whose groups are already
  physical is legalized a second time.
* LOGICAL_GROUPS — after DeviceAssignmentLegalization, a pass that reads groups as logical ids
  (the folds, the guarded deletions, XLA's simplifiers) misreads them — unless the assignment is
  the identity, where physical and logical ids coincide. It adds to the rule of the pass's other
  reliance, if any.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.physical_groups import groups_are_physical
from neuron_sim.semantics.collectives.identity import legalized_kind, physical_violation
from neuron_sim.topology import Topology
from neuron_sim.proofs.index.ar_ds_pairs import pair_of
from neuron_sim.proofs.index.fold_proof import prove_pair
from neuron_sim.passes.base import HloPass, OpExpanderPass
from neuron_sim.passes.context_hazards import ContextHazard, IdentityRule, Reliance
from neuron_sim.passes.registry import BUILTIN_PASSES


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


def _degenerate(violation: IdentityRule) -> Judge:
    """Judge every instruction the pass deletes by ``violation`` (None: the identity); a
    legalized collective by its physical groups."""

    def judge(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
        return [_site(hlo_pass, inst, physical_violation(inst, topology)
                      if groups_are_physical(inst) else violation(inst, topology))
                for inst in matched_instructions(hlo_pass, module)]

    return judge


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


def _physical_collectives(module: HloModule) -> list[HloInstruction]:
    return [inst for comp in module.computations for inst in comp.instructions
            if legalized_kind(inst) and groups_are_physical(inst)]


def identity_assignment(topology: Topology) -> bool:
    """True if every device's physical id is its flattened id ``r * P + p`` — there physical and
    logical groups name the same devices. (XLA's default assignment ``p * R + r`` is the
    identity only when R == 1 or P == 1.)"""
    return bool(np.array_equal(topology.device_ids.ravel(), np.arange(topology.num_devices)))


def _legalization(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
    identity = identity_assignment(topology)
    return [_site(hlo_pass, inst, None if identity or not groups_are_physical(inst) else
                  "its groups are already physical device ids: legalizing again maps them "
                  "through the device assignment a second time")
            for comp in module.computations for inst in comp.instructions
            if legalized_kind(inst)]


def _collective_read(inst: HloInstruction) -> HloInstruction | None:
    """The collective whose groups a rewrite of ``inst`` relies on: ``inst`` itself, or the
    all-reduce of a fold's all-reduce + dynamic-slice pair."""
    if legalized_kind(inst):
        return inst
    pair = pair_of(inst)
    return pair.all_reduce if pair is not None else None


LOGICAL_READ = ("it reads replica groups as logical ids, but these were legalized to physical "
                "device ids and the device assignment is not the identity")


def _logical_reader(inner: Judge | None) -> Judge:
    """A pass that reads groups as logical ids: unsafe wherever it would rewrite on a legalized
    collective (unless the assignment is the identity); the other sites judged by ``inner``.
    A pass that is not an OpExpander cannot say which instructions it rewrites: if it changes
    the module at all, every legalized collective is one of its sites."""

    def judge(hlo_pass: HloPass, module: HloModule, topology: Topology) -> list[Site]:
        sites = inner(hlo_pass, module, topology) if inner is not None else []
        if identity_assignment(topology):
            return sites
        if not isinstance(hlo_pass, OpExpanderPass):
            physical = _physical_collectives(module)
            if physical and hlo_pass.run(module.clone(), hlo_pass.context):
                return [_site(hlo_pass, inst, LOGICAL_READ) for inst in physical]
            return sites
        by_name = {site.instruction: site for site in sites}
        for inst in matched_instructions(hlo_pass, module):
            read = _collective_read(inst)
            if read is not None and groups_are_physical(read):
                site = by_name.get(inst.name)
                if site is None:
                    site = by_name[inst.name] = _site(hlo_pass, inst, LOGICAL_READ)
                    sites.append(site)
                site.verdict, site.reason = Verdict.UNSAFE, LOGICAL_READ + (
                    f" (%{read.name})" if read is not inst else "")
        return sites

    return judge


def _primary_judge(hazard: ContextHazard) -> Judge | None:
    """The rule of the reliance other than LOGICAL_GROUPS (at most one), or None."""
    primary = [r for r in Reliance if hazard.relies(r) and r is not Reliance.LOGICAL_GROUPS]
    if len(primary) > 1:
        raise ValueError("a pass relies on at most one of "
                         + ", ".join(r.name for r in primary) + " (besides LOGICAL_GROUPS)")
    if not primary:
        return None
    if primary[0] is Reliance.IDENTITY_COLLECTIVES:
        assert hazard.identity_rule is not None  # ContextHazard insists on it
        return _degenerate(hazard.identity_rule)
    return {Reliance.FOLD_OFFSETS: _fold, Reliance.PINNED_SEED: _unpinned_rng,
            Reliance.SINGLE_RUN: _legalization}[primary[0]]


def hazard_from(declared: ContextHazard) -> Hazard:
    """The Hazard that judges a pass declaring ``declared``: its reliance's rule, wrapped by
    the logical-reader rule when it relies on LOGICAL_GROUPS."""
    judge = _primary_judge(declared)
    if declared.relies(Reliance.LOGICAL_GROUPS):
        judge = _logical_reader(judge)
    assert judge is not None  # a declaration relies on something
    return Hazard(declared.describe(), judge,
                  confirmable=not declared.relies(Reliance.PINNED_SEED))


def hazard_of(hlo_pass: HloPass) -> Hazard | None:
    """The hazard its class declares for ``hlo_pass``, or None for a context-free pass. Raises
    ValueError naming the pass for a declaration no rule judges."""
    declared = type(hlo_pass).hazard
    if declared is None:
        return None
    try:
        return hazard_from(declared)
    except ValueError as exc:
        raise ValueError(f"pass {hlo_pass.label}: {exc}") from exc


def context_dependent_keys() -> list[str]:
    """The registry keys of the built-in passes that declare a hazard, sorted."""
    return sorted(cls.name for cls in BUILTIN_PASSES if cls.hazard is not None)
