"""A sampled CORRECT verdict upgraded with the proof for all inputs, or overturned by it.

``with_proof`` upgrades a sampled CORRECT verdict: equal -> ``proof`` is
``"all-inputs"``; unsupported -> ``"sampled"`` with a note naming the construct (under
``mode="symbolic"``: FAILED_TO_PROVE); differ -> the distinct differing term pairs go to z3
(``neuron_sim.proofs.smt``) under the contract's predicate: proved -> ``"all-inputs"`` with a note;
otherwise z3's model (when it found one) and inputs that separate the terms (distinct random
values per variable) are run through the ordinary checks: UNSOUND with the first witness; else
FAILED_TO_PROVE naming the difference and why z3 could not decide — except under a contract z3
is not asked about (a tolerance) in ``mode="auto"``, where the sampled CORRECT stands with a
note.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from neuron_sim.hlo.ir import HloModule
from neuron_sim.passes.contracts import Contract
from neuron_sim.proofs.all_inputs import (Proof, decide_differences, prove, separating_inputs,
                                          symbolic_memory)
from neuron_sim.proofs.smt import place
from neuron_sim.sizes import default_memory_limit, format_bytes
from neuron_sim.verify.result import Status, TopologyVerdict

__all__ = ["PROOF_FAILED", "with_proof"]

PROOF_FAILED = "ERROR: Could not prove the target correct for all inputs"
WITNESS_TRIES = 3


def with_proof(source: HloModule, target: HloModule, verdict: TopologyVerdict, *,
               verify: Callable[[Sequence[Any]], TopologyVerdict], contract: Contract,
               mode: str = "auto", seed: int = 0, timeout: float | None = None,
               max_memory: int | None = None) -> TopologyVerdict:
    """``verdict`` (a sampled one) with its proof: see the module docstring. ``verify(inputs)``
    runs the ordinary checks on given inputs under ``contract``. ``max_memory`` (bytes; None:
    half of the memory available) bounds the symbolic run: a pair whose ``symbolic_memory``
    exceeds it is not run symbolically (the proof stops with that reason)."""
    if mode == "sampled" or verdict.status is not Status.CORRECT:
        if verdict.status is Status.CORRECT:
            verdict.proof = "sampled"
        return verdict
    topology = verdict.topology
    limit = max_memory if max_memory is not None else default_memory_limit()
    need = symbolic_memory(source, topology) + symbolic_memory(target, topology)
    if limit is not None and need > limit:
        proof = Proof("unsupported", f"the symbolic run would need about {format_bytes(need)} "
                                     "(a term handle and a table row per element), more than "
                                     f"the memory limit of {format_bytes(limit)}")
    else:
        proof = prove(source, target, topology, timeout=timeout)
    verdict.proof_terms = proof.terms
    if proof.outcome == "equal":  # equal everywhere satisfies every contract
        verdict.proof = "all-inputs"
        return verdict
    if proof.outcome == "unsupported":
        if mode == "symbolic":
            verdict.proof = None
            return verdict.fail(Status.FAILED_TO_PROVE, PROOF_FAILED,
                                f"on topology {topology}, no symbolic proof: {proof.reason}")
        verdict.proof = "sampled"
        verdict.notes.append(f"no proof for all inputs on topology {topology}: {proof.reason}")
        return verdict
    decision = decide_differences(proof, contract)
    if decision.outcome == "proved":
        verdict.proof = "all-inputs"
        verdict.notes.append(f"on topology {topology} the terms differ at {proof.reason}; "
                             f"{decision.reason}")
        return verdict
    candidates = [separating_inputs(source, topology, seed + attempt)
                  for attempt in range(WITNESS_TRIES)]
    if decision.outcome == "refuted":
        candidates.insert(0, place(candidates[0], decision.assignment))
    for inputs in candidates:
        found = verify(inputs)
        if found.status is Status.UNSOUND:
            how = "z3's model of the differing terms" if decision.outcome == "refuted" \
                and inputs is candidates[0] else "these inputs, which separate them"
            found.notes.append(f"the symbolic terms differ on topology {topology} "
                               f"({proof.reason}); witness from {how}")
            return found
    why = decision.reason if decision.outcome == "unknown" else \
        "z3 found a violation under IEEE arithmetic that the interpreter does not reproduce"
    if mode == "symbolic" or contract.name == "exact":
        verdict.proof = None
        return verdict.fail(Status.FAILED_TO_PROVE, PROOF_FAILED,
                            f"on topology {topology}, the terms differ at {proof.reason}; no "
                            f"input tried separates them, and z3 could not decide ({why})")
    # auto, under a contract that allows differences z3 cannot judge (a tolerance): the
    # sampled verdict stands, with a note.
    verdict.proof = "sampled"
    verdict.notes.append(f"no proof for all inputs on topology {topology}: the terms differ at "
                         f"{proof.reason}, the {contract.name} contract allows some differences, "
                         f"and z3 could not decide ({why}); --proof symbolic makes this "
                         "FAILED_TO_PROVE")
    return verdict
