"""The verifier's proof step: what the proof for all inputs establishes about one pair.

``proof_facts`` asks ``neuron_sim.proofs.all_inputs`` about a source and target on one
topology and returns facts, not a verdict: the symbolic comparison (``Proof``: equal, differ,
or unsupported and why — including a pair too large for the memory limit to run
symbolically), z3's decision on the differing term pairs under the contract
(``neuron_sim.proofs.smt``: proved, refuted with a model, or unknown), and the inputs that
should separate the differing terms (z3's model placed in distinct random values first, when
it found one). The verifier (verifier.py) runs its own checks on those witness inputs and
decides the verdict; nothing here calls back into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from neuron_sim.hlo.ir import HloModule
from neuron_sim.passes.contracts import Contract
from neuron_sim.proofs.all_inputs import (Proof, constant_inputs, decide_differences, prove,
                                          replication_flags, separating_inputs,
                                          symbolic_memory)
from neuron_sim.proofs.uniform import PositionsProof, prove_positions
from neuron_sim.proofs.smt import Decision, place
from neuron_sim.proofs.uniform.replay import witness_inputs
from neuron_sim.sizes import default_memory_limit, format_bytes
from neuron_sim.topology import Topology

__all__ = ["PROOF_FAILED", "ProofFacts", "TooLarge", "WITNESS_TRIES", "positions_facts",
           "proof_facts", "proved_on_positions"]

PROOF_FAILED = "ERROR: Could not prove the target correct for all inputs"
WITNESS_TRIES = 3


@dataclass(frozen=True)
class TooLarge:
    """A pair one of whose modules does not fit in the memory limit on a topology (or, with
    ``slow``, needs too much arithmetic to execute in practice)."""

    error: Exception                     # the refusal, with the numbers
    source: bool                         # the source (else the target) is too large
    slow: bool = False                   # it fits, but its arithmetic is too much to execute


@dataclass
class ProofFacts:
    """What the proof found on one topology."""

    proof: Proof
    decision: Decision | None = None     # z3 on the differing terms (when they differ)
    witnesses: list[list[Any]] = field(default_factory=list)  # inputs that should separate them
    positions: PositionsProof | None = None  # the proof on symbolic positions, when it was run

    @property
    def model_first(self) -> bool:
        """Is the first witness z3's model of the differing terms?"""
        return self.decision is not None and self.decision.outcome == "refuted"


def positions_facts(source: HloModule, target: HloModule, topology: Topology, *, seed: int,
                    timeout: float | None) -> PositionsProof:
    """The proof on symbolic positions (``neuron_sim.proofs.uniform``): memory independent of
    the tensors' size, for rewrites that move or reduce data the same way at every element."""
    return prove_positions(source, target, topology,
                           replicated=replication_flags(source, topology), seed=seed,
                           timeout=timeout)


def proved_on_positions(verdict: Any, proof: PositionsProof) -> None:
    """Record on ``verdict`` (a TopologyVerdict) what the proof on symbolic positions gave:
    its method, time, memory and per-output outcomes."""
    verdict.proof = "all-inputs" if proof.outcome == "equal" else verdict.proof
    verdict.proof_method = "positions"
    verdict.proof_seconds = proof.seconds
    verdict.proof_bytes = proof.peak_bytes
    verdict.proof_outputs = [
        {"output": o.leaf, "shape": o.shape, "proof": "all-inputs" if o.outcome == "equal"
         else o.outcome, "seconds": round(o.seconds, 4), "z3_queries": o.queries,
         **({"reason": o.reason} if o.reason else {})} for o in proof.outputs]



def proof_facts(source: HloModule, target: HloModule, topology: Topology, *,
                contract: Contract, seed: int, timeout: float | None,
                max_memory: int | None, fixed: Mapping[int, Any] | None = None) -> ProofFacts:
    """The facts of the proof for all inputs of ``target`` replacing ``source`` on
    ``topology`` under ``contract``. ``max_memory`` (bytes; None: half of the memory available)
    bounds the symbolic run: a pair whose ``symbolic_memory`` exceeds it is not run
    symbolically (the proof is unsupported, with that reason); ``timeout`` bounds it in
    seconds. The witnesses are drawn from ``seed``; none are drawn unless the terms differ and
    z3 did not prove the difference allowed. ``fixed``: entry parameters held at those values
    on every device (a rewrite's ``SourceBinding``); the witnesses draw them too, and the
    verifier's runner puts the held values back."""
    limit = max_memory if max_memory is not None else default_memory_limit()
    need = symbolic_memory(source, topology) + symbolic_memory(target, topology)
    if limit is not None and need > limit:
        too_large = (f"the symbolic run would need about {format_bytes(need)} (a term handle "
                     "and a table row per element), more than the memory limit of "
                     f"{format_bytes(limit)}")
        if contract.name == "exact" and not fixed:
            positions = positions_facts(source, target, topology, seed=seed, timeout=timeout)
            if positions.outcome == "equal":
                return ProofFacts(Proof("equal", seconds=positions.seconds),
                                  positions=positions)
            if positions.outcome == "differ":
                witness = witness_inputs(source, topology.num_devices,
                                         replication_flags(source, topology), seed)
                return ProofFacts(Proof("differ", positions.reason, seconds=positions.seconds),
                                  Decision("refuted", "the replayed element values differ"),
                                  [witness], positions=positions)
            too_large += f", and the proof on symbolic positions stopped: {positions.reason}"
        proof = Proof("unsupported", too_large)
    else:
        proof = prove(source, target, topology, timeout=timeout, fixed=fixed)
    if proof.outcome != "differ":
        return ProofFacts(proof)
    decision = decide_differences(proof, contract)
    if decision.outcome == "proved":
        return ProofFacts(proof, decision)
    witnesses = [separating_inputs(source, topology, seed + attempt)
                 for attempt in range(WITNESS_TRIES)]
    witnesses += constant_inputs(source, [target], topology, seed)
    if decision.outcome == "refuted":
        witnesses.insert(0, place(witnesses[0], decision.assignment))
    return ProofFacts(proof, decision, witnesses)
