"""Judging the sweep's cases: is the fold sound on each, and what does each fold pass do?

For a case (one all-reduce + dynamic-slice module on one topology) the *reference* verdict is
decided twice, independently of every pass: by z3 (``fold_proof.prove_pair``: does every device
read, after the clamp, the block its reduce-scatter delivers?) and by the differential verifier
(``check_modules`` of the module against ``SweepIdiom.reduce_scatter_module()``, the fold done
right, on every device). The two must agree; a disagreement is a bug of ours and is reported as
such.

Each fold pass then runs on a copy with the case's topology in its context. If it changed the
module, its rewrite is judged twice again: by the differential verifier (the module against the
pass's output) and symbolically — the z3 fold proof holds for the rewrite only if the emitted
reduce-scatter keeps the all-reduce's participants (in order) and scatters the sliced dimension;
a reduce-scatter over other devices (the seed emitter's added channel_id turns a CrossReplica
all-reduce into a CrossReplicaAndPartition reduce-scatter) is refuted at the first device whose
group differs. Outcomes: ``fired_sound``, ``fired_unsound``, ``missed`` (declined a sound fold),
``declined_unsound`` (rightly declined), ``error`` (the pass raised).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from neuron_sim.hlo import HloInstruction, HloModule, Opcode
from neuron_sim.hlo.checks.core import HloCheckError
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.topology import Topology, group_mode, participant_groups
from neuron_sim.passes import PassContext, get_pass
from neuron_sim.proofs.index.ar_ds_pairs import ArDsPair, find_ar_ds_pairs
from neuron_sim.proofs.all_inputs import sharing_source_runs
from neuron_sim.proofs.index.fold_proof import FoldProof, FoldStatus, pair_groups, prove_pair
from neuron_sim.passes.registry import pass_keys
from neuron_sim.verify.api import check_modules
from neuron_sim.verify.options import VerifyOptions
from neuron_sim.verify.checks import TARGET_MALFORMED
from neuron_sim.verify.result import Status
from neuron_sim.verify.sweep.generator import Case

FOLD_PASSES = ("aws_neuron_rewrite_all_reduce_dynamic_slice",
               "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups",
               "xla_reduce_scatter_creator",
               "rewrite_all_reduce_dynamic_slice_proven")
OUTCOMES = ("fired_sound", "fired_unsound", "missed", "declined_unsound", "error")
SOUND, UNSOUND, UNKNOWN = "sound", "unsound", "unknown"


def default_passes() -> list[str]:
    """The fold passes the sweep compares: the two seed matchers, XLA's ReduceScatterCreator
    (when registered) and the proven fold."""
    registered = set(pass_keys())
    return [key for key in FOLD_PASSES if key in registered]


@dataclass
class Judgement:
    """A fold's verdict from z3 and from the differential verifier, and the witness."""

    z3: str                       # sound / unsound / unknown (z3 failed to prove)
    differential: str             # sound / unsound / unknown (no verdict: an ERROR)
    detail: str = ""
    witness: dict[str, Any] | None = None
    proof: str | None = None      # a sound differential verdict: "all-inputs" or "sampled"

    @property
    def sound(self) -> bool | None:
        """The verdict (the differential one where z3 gave none); None if neither gave one."""
        verdict = self.differential if self.differential != UNKNOWN else self.z3
        return None if verdict == UNKNOWN else verdict == SOUND

    @property
    def disagree(self) -> bool:
        """Both gave a verdict and they differ: a bug of ours."""
        return UNKNOWN not in (self.z3, self.differential) and self.z3 != self.differential

    def to_json(self) -> dict[str, Any]:
        return {"z3": self.z3, "differential": self.differential, "sound": self.sound,
                "agree": not self.disagree, "detail": self.detail, "witness": self.witness,
                "proof": self.proof}


@dataclass
class PassOutcome:
    key: str
    fired: bool
    outcome: str
    judgement: Judgement | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"fired": self.fired, "outcome": self.outcome}
        if self.judgement is not None:
            data.update(self.judgement.to_json())
        if self.error:
            data["error"] = self.error
        return data


@dataclass
class CaseResult:
    case: Case
    reference: Judgement
    passes: dict[str, PassOutcome] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def sound(self) -> bool | None:
        return self.reference.sound

    @property
    def disagreements(self) -> list[str]:
        """Where z3 and the differential verifier disagree: "reference" or pass keys."""
        found = ["reference"] if self.reference.disagree else []
        return found + [key for key, o in self.passes.items()
                        if o.judgement is not None and o.judgement.disagree]

    def to_json(self) -> dict[str, Any]:
        return {**self.case.to_json(), "reference": self.reference.to_json(),
                "passes": {key: o.to_json() for key, o in self.passes.items()},
                "seconds": round(self.seconds, 4)}


def _z3_word(status: FoldStatus) -> str:
    return {FoldStatus.PROVEN: SOUND, FoldStatus.REFUTED: UNSOUND}.get(status, UNKNOWN)


def _differential(before: HloModule, after: HloModule, topology: Topology,
                  seed: int) -> tuple[str, dict[str, Any] | None, str, str | None]:
    """The differential verifier's word on ``after`` replacing ``before``, its witness device,
    its error line and, for a sound verdict, its kind of proof (``"all-inputs"`` when the
    symbolic run equated every output element of every device, else ``"sampled"``)."""
    result = check_modules(before, after, [topology],
                           VerifyOptions(trials=1, seed=seed, minimize=False))
    word = {Status.CORRECT: SOUND, Status.UNSOUND: UNSOUND}.get(result.status, UNKNOWN)
    witness = None
    cex = result.counterexample
    if cex is not None and cex.device is not None:
        r, p = topology.replica_partition(cex.device)
        witness = {"device": cex.device, "replica": r, "partition": p,
                   "mismatching_devices": len(cex.mismatch_devices) or cex.mismatch_count}
    return word, witness, result.error_line or "", result.proof if word == SOUND else None


def _witness(proof: FoldProof, differential: dict[str, Any] | None) -> dict[str, Any] | None:
    if proof.witness is None and differential is None:
        return None
    data: dict[str, Any] = {}
    if proof.witness is not None:
        data["z3"] = proof.witness.to_json()
    if differential is not None:
        data["differential"] = differential
    return data


Differential = Callable[[HloModule], "tuple[str, dict[str, Any] | None, str, str | None]"]


class _Differentials:
    """``_differential`` of one case's module against each candidate, computed once per
    distinct candidate text: the passes that fire mostly emit the same reduce-scatter, and
    the verdict (with its witness and proof kind, for a fixed seed) is a function of the
    two modules' text."""

    def __init__(self, module: HloModule, topology: Topology, seed: int) -> None:
        self.module, self.topology, self.seed = module, topology, seed
        self.known: dict[str, tuple[str, dict[str, Any] | None, str, str | None]] = {}

    def __call__(self, after: HloModule) -> tuple[str, dict[str, Any] | None, str, str | None]:
        text = after.to_text()
        found = self.known.get(text)
        if found is None:
            found = self.known[text] = _differential(self.module, after, self.topology,
                                                     self.seed)
        word, witness, line, kind = found
        return word, dict(witness) if witness is not None else None, line, kind


def reference_judgement(case: Case, module: HloModule, pair: ArDsPair, seed: int, *,
                        proof: FoldProof | None = None,
                        differential: Differential | None = None
                        ) -> tuple[Judgement, FoldProof]:
    """Is the fold of the case sound: z3's proof and the differential check of the module
    against its reduce-scatter. ``proof``: the pair's fold proof when it is already known
    (the proven fold's own ``prove_pair`` of the same pair on the same topology)."""
    topology = case.topology
    if proof is None:
        proof = prove_pair(pair, topology)
    if differential is None:
        differential = _Differentials(module, topology, seed)
    try:
        target = case.idiom().reduce_scatter_module()
    except HloCheckError as exc:
        # No reduce-scatter over these groups has the slice's shape: the fold's target is
        # malformed, which the verifier reports as UNSOUND (its first check).
        word, witness, line, kind = UNSOUND, None, f"{TARGET_MALFORMED}: {exc}", None
    else:
        word, witness, line, kind = differential(target)
    detail = proof.reason + (f"; differential: {line}" if line else "")
    return Judgement(_z3_word(proof.status), word, detail, _witness(proof, witness),
                     kind), proof


def _reduce_scatters(module: HloModule) -> list[HloInstruction]:
    return [inst for inst in module.instructions() if inst.opcode is Opcode.REDUCE_SCATTER]


def _participants(inst: HloInstruction, topology: Topology) -> tuple[tuple[int, ...], ...]:
    mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                      inst.use_global_device_ids)
    return participant_groups(mode, inst.replica_groups or ReplicaGroups(), topology)


def _group_of(groups: Iterable[tuple[int, ...]], devices: int) -> list[tuple[int, ...]]:
    of: list[tuple[int, ...]] = [()] * devices
    for group in groups:
        for member in group:
            of[member] = group
    return of


def symbolic_rewrite_verdict(pair: ArDsPair, proof: FoldProof, after: HloModule,
                             topology: Topology) -> tuple[str, str, dict[str, Any] | None]:
    """The z3 verdict on a pass's rewrite: the pair's fold proof, if the emitted reduce-scatter
    reduces over the all-reduce's ordered groups along the sliced dimension."""
    emitted = _reduce_scatters(after)
    if len(emitted) != 1:
        return UNKNOWN, f"the rewrite holds {len(emitted)} reduce-scatters, not one", None
    rs = emitted[0]
    if tuple(rs.get("dimensions", ())) != (pair.slice_dim,):
        return UNSOUND, (f"the reduce-scatter scatters dimension {rs.get('dimensions')}, the "
                         f"slice cuts dimension {pair.slice_dim}"), None
    try:
        emitted_groups = _participants(rs, topology)
    except ValueError as exc:
        return UNSOUND, f"the reduce-scatter's groups are invalid on {topology}: {exc}", None
    devices = topology.num_devices
    want = _group_of(pair_groups(pair, topology), devices)
    have = _group_of(emitted_groups, devices)
    for device in range(devices):
        if want[device] != have[device]:
            r, p = topology.replica_partition(device)
            return UNSOUND, ("the reduce-scatter reduces over other devices than the "
                             "all-reduce"), {
                "device": device, "replica": r, "partition": p,
                "all_reduce_group": list(want[device]),
                "reduce_scatter_group": list(have[device])}
    witness = proof.witness.to_json() if proof.witness is not None else None
    return _z3_word(proof.status), proof.reason, witness


@dataclass
class PassRun:
    """One pass run on a copy of a case's module: the pass object, the copy after it, and
    whether it changed it (``error``: what it raised instead)."""

    instance: Any
    after: HloModule
    fired: bool = False
    error: str = ""


def run_pass(key: str, module: HloModule, topology: Topology) -> PassRun:
    """Run the pass ``key`` on a copy of ``module`` compiled for ``topology``."""
    instance = get_pass(key)
    after = module.clone()
    try:
        fired = instance.run(after, PassContext(topology=topology))
    except Exception as exc:  # noqa: BLE001 - a pass that raises is an outcome, not a crash
        return PassRun(instance, after, error=f"{type(exc).__name__}: {exc}")
    return PassRun(instance, after, bool(fired))


def judge_pass(key: str, case: Case, module: HloModule, pair: ArDsPair, proof: FoldProof,
               sound: bool | None, seed: int, *, ran: PassRun | None = None,
               differential: Differential | None = None) -> PassOutcome:
    """Run the pass on a copy of the case's module (unless ``ran`` is its run) and judge
    what it did."""
    topology = case.topology
    if ran is None:
        ran = run_pass(key, module, topology)
    if ran.error:
        return PassOutcome(key, False, "error", error=ran.error)
    if not ran.fired:
        return PassOutcome(key, False, "missed" if sound else "declined_unsound")
    after = ran.after
    if differential is None:
        differential = _Differentials(module, topology, seed)
    word, witness, line, kind = differential(after)
    z3_word, reason, z3_witness = symbolic_rewrite_verdict(pair, proof, after, topology)
    detail = reason + (f"; differential: {line}" if line else "")
    both = {k: v for k, v in (("z3", z3_witness), ("differential", witness)) if v}
    judgement = Judgement(z3_word, word, detail, both or None, kind)
    fired_sound = judgement.sound
    return PassOutcome(key, True, "fired_sound" if fired_sound else "fired_unsound", judgement)


class CaseError(RuntimeError):
    """A case the generator built that holds no all-reduce + dynamic-slice pair: our bug."""


PROVEN_FOLD = "rewrite_all_reduce_dynamic_slice_proven"


def _proof_from(ran: PassRun) -> FoldProof | None:
    """The fold proof the proven fold made of the case's one pair, if it made exactly one."""
    proofs = getattr(ran.instance, "proofs", None)
    if ran.error or not isinstance(proofs, list) or len(proofs) != 1:
        return None
    return proofs[0]


def run_case(case: Case, passes: list[str], *, seed: int = 0) -> CaseResult:
    """The reference verdict and every pass's outcome on one case.

    The proven fold runs first when it is judged: its ``prove_pair`` of the case's pair (on a
    copy of the module, on the case's topology) is the reference's z3 proof, so the pair is
    proved once, not twice; each distinct rewritten module is verified once, and the
    all-inputs proofs of the case's verifications share the module's symbolic run
    (``sharing_source_runs``)."""
    with sharing_source_runs():
        return _run_case(case, passes, seed)


def _run_case(case: Case, passes: list[str], seed: int) -> CaseResult:
    started = time.perf_counter()
    module = case.idiom().module()
    pairs = find_ar_ds_pairs(module)
    if len(pairs) != 1:
        raise CaseError(f"case {case.id} holds {len(pairs)} all-reduce + dynamic-slice pairs")
    topology = case.topology
    differential = _Differentials(module, topology, seed)
    ran: dict[str, PassRun] = {}
    known: FoldProof | None = None
    if PROVEN_FOLD in passes:
        ran[PROVEN_FOLD] = run_pass(PROVEN_FOLD, module, topology)
        known = _proof_from(ran[PROVEN_FOLD])
    reference, proof = reference_judgement(case, module, pairs[0], seed, proof=known,
                                           differential=differential)
    result = CaseResult(case, reference)
    for key in passes:
        result.passes[key] = judge_pass(key, case, module, pairs[0], proof, reference.sound,
                                        seed, ran=ran.get(key), differential=differential)
    result.seconds = time.perf_counter() - started
    return result


Progress = Callable[[int, Case], None]


def usable_cores() -> int:
    """The cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def run_cases(cases: list[Case], passes: list[str], *, seed: int = 0,
              progress: Progress | None = None, jobs: int = 1) -> list[CaseResult]:
    """``run_case`` on every case, results in the cases' order; ``progress(i, case)`` before
    each (with ``jobs`` > 1: as the results come back).

    ``jobs`` > 1 runs the cases in that many forked worker processes (where the OS forks;
    otherwise in this one). Every case is decided from its own inputs and ``seed`` alone, so
    the results do not depend on ``jobs``.
    """
    if jobs > 1 and len(cases) > 1 and "fork" in multiprocessing.get_all_start_methods():
        return _run_forked(cases, passes, seed, progress, min(jobs, len(cases)))
    results = []
    for i, case in enumerate(cases):
        if progress is not None:
            progress(i, case)
        results.append(run_case(case, passes, seed=seed))
    return results


# What a forked worker reads: set by the parent before the fork (a case's offset builder is a
# closure, which cannot be pickled, so workers receive indices into this list).
_WORK: tuple[list[Case], list[str], int] | None = None
_CHUNK = 8


def _run_chunk(bounds: tuple[int, int]) -> list[tuple[Judgement, dict[str, PassOutcome], float]]:
    assert _WORK is not None
    cases, passes, seed = _WORK
    done = []
    for case in cases[bounds[0]:bounds[1]]:
        result = run_case(case, passes, seed=seed)
        done.append((result.reference, result.passes, result.seconds))
    return done


def _run_forked(cases: list[Case], passes: list[str], seed: int, progress: Progress | None,
                jobs: int) -> list[CaseResult]:
    global _WORK
    chunks = [(start, min(start + _CHUNK, len(cases))) for start in range(0, len(cases), _CHUNK)]
    results: list[CaseResult] = []
    _WORK = (cases, passes, seed)
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for (start, _), done in zip(chunks, pool.imap(_run_chunk, chunks)):
                for offset, (reference, outcomes, seconds) in enumerate(done):
                    case = cases[start + offset]
                    if progress is not None:
                        progress(start + offset, case)
                    results.append(CaseResult(case, reference, outcomes, seconds))
    finally:
        _WORK = None
    return results
