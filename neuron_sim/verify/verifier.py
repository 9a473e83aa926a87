"""The verifier: did a rewrite preserve the program's meaning on every device of every topology?

``Verifier(options)`` answers it for two given modules (``check_modules``) or for passes run on
a module (``check_pass``), with one verdict per topology and a summary (result.py). Each
topology's verdict is decided here, once: the ordered checks (checks.py ``CHECKS``) on sampled
inputs; then, for a CORRECT verdict, the facts of the proof for all inputs (proving.py) —
equal terms upgrade it, an unsupported construct or an undecided difference leaves it sampled
or makes it FAILED_TO_PROVE, and the witness inputs the proof suggests are run through the
same checks here, where an UNSOUND one overturns it. ``check_pass`` runs the passes once per
topology, each time with that topology in its ``PassContext``, and follows the passes' weakest
contract. The topologies of one check share z3's answers (``remembering_answers``: each asks
the same formulas up to renaming). An UNSOUND summary is minimized (minimize.py) by a derived
verifier, and the breaking pass of a pass list is found by verifiers derived for each prefix:
every variant is this verifier with some options replaced, never the settings spelled out
again.
"""

from __future__ import annotations

import resource
from typing import Any, Mapping, Sequence

import numpy as np

from neuron_sim.hlo.ir import HloModule
from neuron_sim.interpreter.memory import MemoryLimitExceeded, require_memory
from neuron_sim.passes import (HloPass, PassContext, PassPipeline, resolve_pass_options,
                               weakest)
from neuron_sim.topology import Topology
from neuron_sim.verify.checks import (PASS_FAILED, TARGET_MALFORMED, UNSUPPORTED, VALUE_MISMATCH,
                                      path_to, verify_topology)
from neuron_sim.verify.execution import Runner, default_runner, subset_runner
from neuron_sim.verify.minimize import Rewriter, minimize_case
from neuron_sim.verify.options import VerifyOptions
from neuron_sim.verify.pass_runs import apply_passes, options_taken, pass_list
from neuron_sim.proofs.answers import remembering_answers
from neuron_sim.proofs.uniform.cost import (EXECUTION_MULTIPLY_ADDS, multiply_adds,
                                            positions_timeout)
from neuron_sim.verify.device_subsets import executable_subset
from neuron_sim.verify.proving import (PROOF_FAILED, TooLarge, positions_facts, proof_facts,
                                       proved_on_positions)
from neuron_sim.verify.result import Counterexample
from neuron_sim.proofs.uniform import PositionsProof
from neuron_sim.verify.result import (Minimized, Status, TopologyVerdict, VerificationResult,
                                      worst)

__all__ = ["CHANGES_EXPECTED", "Verifier"]

CHANGES_EXPECTED = ("the pass declares that it changes results (a positive control): this "
                    "difference is expected")


def _positions_topology_verdict(proof: PositionsProof, topology: Topology, target: HloModule,
                                error: Exception) -> TopologyVerdict:
    """The verdict of a decided proof on symbolic positions for a pair not executed."""
    verdict = TopologyVerdict(topology, target=target)
    proved_on_positions(verdict, proof)
    if proof.outcome == "equal":
        verdict.notes.append(f"not executed on topology {topology} ({error}); proved for all "
                             f"inputs on symbolic positions instead, up to the reassociation "
                             f"of reductions ({proof.seconds:.2f} s)")
        return verdict
    witness = proof.witness
    shape = proof.outputs[-1].shape if proof.outputs else ""
    cex = Counterexample(VALUE_MISMATCH, topology, inputs=[], style="replayed", exact=True,
                         device=witness.device, leaf=witness.leaf, index=witness.index,
                         leaf_shape=shape, source_value=witness.source_value,
                         target_value=witness.target_value,
                         mismatch_devices=[witness.device], mismatch_count=1,
                         message="found on symbolic positions and replayed on that element")
    verdict.proof = None
    return verdict.fail(Status.UNSOUND, VALUE_MISMATCH,
                        f"on topology {topology} (not executed: {error}), the proof on "
                        f"symbolic positions finds {proof.reason} on the replayed inputs "
                        "(each input element a small integer hashed from its parameter, "
                        "device and position)", cex)


def _describe_outputs(verdict: TopologyVerdict, source: HloModule) -> None:
    """Per output, what the element-wise proof (or sampling) established, when the proof on
    symbolic positions did not already say it: the proof covers every output at once, so
    each output gets the topology's kind, and a sampled one the construct that stopped it."""
    if verdict.proof_outputs or verdict.status is not Status.CORRECT or verdict.proof is None:
        return
    stopped = next((n.split(": ", 1)[1] for n in verdict.notes
                    if n.startswith("no proof for all inputs")), "")
    shapes = list(source.entry.root.shape.leaves())
    verdict.proof_outputs = [
        {"output": number, "shape": str(shape), "proof": verdict.proof,
         **({"iterations": verdict.proof_iterations} if verdict.proof == "bounded" else {}),
         **({"reason": stopped} if stopped and verdict.proof == "sampled" else {})}
        for number, shape in enumerate(shapes)]
    if verdict.proof_bytes == 0 and verdict.proof_method is not None:
        verdict.proof_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _unexecuted(verdicts: Sequence[TopologyVerdict]) -> bool:
    """Was some verdict decided without executing the pair on every device (too large:
    nothing to minimize by running candidates)?"""
    return any(v.proof_method == "positions" or v.devices_executed is not None
               for v in verdicts)


def _id_ranges(ids: Sequence[int]) -> str:
    """Sorted ids as ranges: "devices 0-7, 248-255"."""
    ranges: list[list[int]] = []
    for i in sorted(int(d) for d in ids):
        if ranges and i == ranges[-1][1] + 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return "device" + "s" * (len(ids) != 1) + " " + ", ".join(
        str(a) if a == b else f"{a}-{b}" for a, b in ranges)


class Verifier:
    """Verifies rewrites under one ``VerifyOptions``; ``derived`` makes its variants."""

    def __init__(self, options: VerifyOptions | None = None) -> None:
        self.options = options if options is not None else VerifyOptions()
        self.runner: Runner = self.options.runner or default_runner(self.options.backend,
                                                                    self.options.max_memory)

    def derived(self, **changes: Any) -> Verifier:
        """This verifier with some options replaced (``VerifyOptions`` field names)."""
        return Verifier(self.options.replace(**changes))

    # ----------------------------------------------------------------------------------------
    # Entry points.

    def check_modules(self, before: HloModule, after: HloModule) -> VerificationResult:
        """Is ``after`` a correct replacement for ``before`` on every device of every topology,
        under the options' contract?"""
        options = self.options
        topologies = options.topologies_for(before)
        with remembering_answers():
            verdicts = [self.verdict(before, after, topology) for topology in topologies]
        result = self._summary(before, after, topologies, verdicts,
                               trials=options.trials if options.inputs is None else 1)
        if result.status is Status.UNSOUND and options.minimize and options.inputs is None \
                and not _unexecuted(verdicts):
            result.minimized = self.minimize(result)
        return result

    def check_pass(self, module: HloModule, passes: Any) -> VerificationResult:
        """Run ``passes`` on a copy of ``module`` for each topology and check each rewrite.

        ``passes``: ``"a,b"``, a list of registry keys / class names / HloPass objects, or a
        PassPipeline. The options' ``pass_options`` go into every run's ``PassContext`` (an
        option no pass declares raises ``UnknownPassOptionError`` before anything runs). The
        comparison follows the passes' weakest contract. A pass that folded values into the
        module (``HloPass.source_binding``: InlineWeights' weights, ReplaceRng's draws) is
        compared with the source fed those values, and such a result is not minimized. An
        UNSOUND result is minimized by shrinking the *source* and re-running the passes on it,
        so the reported pair is one the passes really produce. With ``name_breaking_pass``, an
        UNSOUND result of several passes also names the first pass whose prefix of the list
        breaks that prefix's composed contract (a note and ``result.breaking_pass``).
        """
        options = self.options
        hlo_passes = pass_list(passes)
        pass_options = dict(options.pass_options)
        resolve_pass_options(hlo_passes, pass_options)
        rewrites = self.derived(contract=weakest(p.contract for p in hlo_passes))
        topologies = options.topologies_for(module)
        with remembering_answers():
            runs = [rewrites._pass_verdict(module, hlo_passes, pass_options, topology,
                                           len(topologies) > 1) for topology in topologies]
        verdicts = [verdict for verdict, _ in runs]
        bound = any(held for _, held in runs)  # a pass held source values fixed: no minimizing
        result = rewrites._summary(
            module, module, topologies, verdicts,
            trials=options.trials if options.inputs is None or not any(v.changed for v in verdicts)
            else 1)
        result.passes = [p.name for p in hlo_passes]
        if options.name_breaking_pass and result.status is Status.UNSOUND and len(hlo_passes) > 1:
            topology = next(v.topology for v in verdicts if v.status is Status.UNSOUND)
            index = self.breaking_pass(module, hlo_passes, topology)
            result.breaking_pass = hlo_passes[index].name if index is not None else None
            if index is not None:
                result.notes.append(
                    f"the first pass that breaks the composed contract is "
                    f"{hlo_passes[index].name} (pass {index + 1} of {len(hlo_passes)}: the passes "
                    f"before it verify under their contract on topology {topology}, with it they "
                    "do not)")
        if result.status is Status.UNSOUND and options.minimize and options.inputs is None \
                and not bound and not _unexecuted(verdicts):
            def rewrite(source: HloModule, topology: Topology) -> HloModule | None:
                try:
                    target, changed, _ = apply_passes(
                        source, hlo_passes, PassContext(topology=topology, options=pass_options))
                except Exception:  # noqa: BLE001 - a variant the passes cannot handle is not kept
                    return None
                return target if changed else None

            result.minimized = rewrites.minimize(result, rewrite)
        return result

    def _pass_verdict(self, module: HloModule, hlo_passes: Sequence[HloPass],
                      pass_options: dict[str, Any], topology: Topology,
                      several: bool) -> tuple[TopologyVerdict, bool]:
        """``check_pass`` on one topology: the passes run on a copy of ``module`` with that
        topology in their ``PassContext``, and the verdict on their rewrite (``several``: the
        check has other topologies, which a note names); and whether a pass held source values
        fixed (``SourceBinding``)."""
        context = PassContext(topology=topology, options=pass_options)
        try:
            target, changed, log = apply_passes(module, hlo_passes, context)
        except Exception as exc:  # noqa: BLE001 - PassError and anything a pass lets escape
            return TopologyVerdict(topology, target=module, changed=False).fail(
                Status.ERROR, PASS_FAILED, str(exc)), False
        if not changed:
            verdict = TopologyVerdict(topology, target=target, changed=False,
                                      proof="all-inputs")
            where = f" on topology {topology}" if several else ""
            verdict.notes.append(f"the passes made no change{where}: the target is the "
                                 "source")
            return verdict, False
        verdict = self._rewrite_verdict(module, target, hlo_passes, topology)
        verdict.changed, verdict.rewrites = True, log
        held = verdict.target is not target
        verdict.target = target
        return verdict, held

    # ----------------------------------------------------------------------------------------
    # The verdict on one topology.

    def verdict(self, source: HloModule, target: HloModule,
                topology: Topology) -> TopologyVerdict:
        """The verdict on ``topology``: the ordered checks on the sampled (or given) inputs,
        then, for a CORRECT verdict, the proof for all inputs (unless the options' proof mode
        is "sampled"). A pair too large to execute within ``max_memory`` on ``topology`` is
        proved on symbolic positions instead (``positions_verdict``); where that proof does
        not apply, its sampled checks run on the devices that fit among those closed under
        its collectives (``device_subsets``), or it is refused as before; one whose dots need more arithmetic than
        ``EXECUTION_MULTIPLY_ADDS`` is proved there first and executed when it does not
        decide."""
        too_large = self._too_large(source, target, topology) or \
            self._too_slow(source, target, topology)
        if too_large is not None:
            verdict = self._positions_verdict(source, target, topology, too_large)
            if verdict is not None:
                return verdict
        verdict = self._proved(source, target, self._checked(source, target, topology))
        _describe_outputs(verdict, source)
        return verdict

    def _checked(self, source: HloModule, target: HloModule, topology: Topology,
                 witness: Sequence[Any] | None = None) -> TopologyVerdict:
        """The ordered checks on the options' trials or given inputs, or on one ``witness``."""
        options = self.options
        return verify_topology(source, target, topology,
                               trials=1 if witness is not None else options.trials,
                               seed=options.seed,
                               inputs=witness if witness is not None else options.inputs,
                               contract=options.contract, runner=self.runner,
                               timeout=options.timeout, checks=options.checks)

    def _proved(self, source: HloModule, target: HloModule, verdict: TopologyVerdict,
                fixed: Mapping[int, Any] | None = None) -> TopologyVerdict:
        """A sampled ``verdict`` with its proof for all inputs, or overturned by it.

        Equal terms -> ``proof`` is "all-inputs"; unsupported -> "sampled" with a note naming
        the construct (under proof mode "symbolic": FAILED_TO_PROVE); differing terms that z3
        proves allowed by the contract -> "all-inputs" with a note; otherwise the witness
        inputs go through the checks: UNSOUND with the first that fails; else FAILED_TO_PROVE
        naming the difference and why z3 could not decide — except under a contract z3 is not
        asked about (a tolerance) in mode "auto", where the sampled CORRECT stands with a note.
        """
        options = self.options
        mode = options.proof_mode
        if mode == "sampled" or verdict.status is not Status.CORRECT:
            if verdict.status is Status.CORRECT:
                verdict.proof = "sampled"
            return verdict
        topology, contract = verdict.topology, options.contract
        facts = proof_facts(source, target, topology, contract=contract, seed=options.seed,
                            timeout=options.timeout, max_memory=options.max_memory,
                            fixed=fixed)
        proof = facts.proof
        verdict.proof_terms = proof.terms
        verdict.proof_method, verdict.proof_seconds = "elements", proof.seconds
        if facts.positions is not None:
            proved_on_positions(verdict, facts.positions)
        if proof.outcome == "equal":  # equal everywhere satisfies every contract
            verdict.proof = "all-inputs"
            return verdict
        if proof.outcome == "unsupported":
            if mode == "symbolic":
                verdict.proof = None
                return verdict.fail(Status.FAILED_TO_PROVE, PROOF_FAILED,
                                    f"on topology {topology}, no symbolic proof: {proof.reason}")
            verdict.proof = "sampled"
            verdict.notes.append(f"no proof for all inputs on topology {topology}: "
                                 f"{proof.reason}")
            return verdict
        decision = facts.decision
        if decision.outcome == "proved":
            verdict.proof = "all-inputs" if decision.iterations is None else "bounded"
            verdict.proof_iterations = decision.iterations
            verdict.notes.append(f"on topology {topology} the terms differ at {proof.reason}; "
                                 f"{decision.reason}")
            return verdict
        for number, witness in enumerate(facts.witnesses):
            found = self._checked(source, target, topology, witness)
            if found.status is Status.UNSOUND:
                how = "the replayed inputs of the proof on symbolic positions" \
                    if facts.positions is not None else "z3's model of the differing terms" \
                    if facts.model_first and number == 0 else "these inputs, which separate them"
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
        verdict.notes.append(f"no proof for all inputs on topology {topology}: the terms differ "
                             f"at {proof.reason}, the {contract.name} contract allows some "
                             f"differences, and z3 could not decide ({why}); --proof symbolic "
                             "makes this FAILED_TO_PROVE")
        return verdict

    def _positions_verdict(self, source: HloModule, target: HloModule, topology: Topology,
                           too_large: TooLarge) -> TopologyVerdict | None:
        """The verdict of the proof on symbolic positions for a pair too large to execute
        (``too_large``): CORRECT proved for all inputs, or UNSOUND with the replayed witness.
        When that proof does not apply (the options ask for sampling, given inputs, a
        construct that is not index-uniform, terms that differ under a contract other than
        exact, which may allow the difference): a pair too large for memory runs its sampled
        checks on a closed subset of the devices when one fits (``_subset_verdict``); else a
        source too large is refused as before (``MemoryLimitExceeded``, naming what stopped
        the proof), a target too large or a pair only too slow gets None (the ordinary checks
        run it)."""
        options = self.options
        why = None
        if options.proof_mode == "sampled" or options.inputs is not None:
            why = "the options ask for sampled inputs"
        else:
            facts = positions_facts(source, target, topology, seed=options.seed,
                                    timeout=positions_timeout(options.timeout))
            # Equal everywhere satisfies every contract; a difference decides only an exact
            # one (another contract may allow it, which only execution judges).
            if facts.outcome == "equal" or (facts.outcome == "differ" and
                                            options.contract.name == "exact"):
                return _positions_topology_verdict(facts, topology, target, too_large.error)
            why = facts.reason if facts.outcome == "unsupported" else \
                f"the terms differ and the {options.contract.name} contract is not decided on " \
                "positions"
        if too_large.slow:
            return None
        subset = self._executable_subset(source, target, topology)
        if subset is not None:
            return self._subset_verdict(source, target, topology, subset, too_large, why)
        if not too_large.source:
            return None
        subsets = "; and no set of devices smaller than all of them is closed under the " \
            "pair's collectives and fits" if topology.num_devices > 1 else ""
        raise MemoryLimitExceeded(f"{too_large.error}; the proof on symbolic positions, which "
                                  f"executes nothing, does not apply: {why}{subsets}")

    def _executable_subset(self, source: HloModule, target: HloModule,
                           topology: Topology) -> np.ndarray | None:
        """Devices closed under the pair's collectives whose run fits in ``max_memory``
        (``device_subsets``), when this verifier's runner can execute a subset
        (``takes_devices``)."""
        options = self.options
        if not getattr(self.runner, "takes_devices", False) or options.max_memory is None:
            return None
        return executable_subset([source, target], topology, options.max_memory)

    def _subset_verdict(self, source: HloModule, target: HloModule, topology: Topology,
                        devices: np.ndarray, too_large: TooLarge, why: str
                        ) -> TopologyVerdict:
        """The sampled checks executed on ``devices`` only (``subset_runner``): their outputs
        are what they are in the whole run, the other devices' are not computed."""
        subset = self.derived(runner=subset_runner(self.runner, devices), proof="sampled")
        verdict = subset._checked(source, target, topology)
        verdict.devices_executed = [int(d) for d in devices]
        if verdict.status is Status.CORRECT:
            verdict.proof = "sampled"
        count = topology.num_devices
        verdict.notes.append(
            f"executed on {len(devices)} of the {count} devices of topology {topology} "
            f"({_id_ranges(devices)}): no collective of the source or the target groups them "
            f"with the others, so their outputs are those of the whole run; the other "
            f"devices' outputs were not computed ({too_large.error}; the proof on symbolic "
            f"positions does not apply: {why})")
        return verdict

    def _rewrite_verdict(self, source: HloModule, target: HloModule,
                         hlo_passes: Sequence[HloPass], topology: Topology) -> TopologyVerdict:
        """The verdict on a rewrite, through the ``SourceBinding`` of the one pass that declares
        one (the compared pair, and the parameters held fixed on every device; sampled only),
        if any. The verdict's target is the compared one (``check_pass`` puts the rewrite
        back)."""
        try:
            bindings = [b for b in (p.source_binding(source, target) for leaf in hlo_passes
                                    for p in leaf.leaf_passes()) if b is not None]
            if len(bindings) > 1:
                raise ValueError("more than one pass holds source values fixed; verify them one "
                                 "at a time")
        except ValueError as exc:
            return TopologyVerdict(topology, target=target).fail(
                Status.ERROR, UNSUPPORTED, f"the rewrite cannot be compared on topology "
                                           f"{topology}: {exc}")
        if not bindings:
            return self.verdict(source, target, topology)
        binding = bindings[0]
        if binding.problem is not None:
            return TopologyVerdict(topology, target=binding.target).fail(
                Status.UNSOUND, VALUE_MISMATCH, f"on topology {topology}: {binding.problem}")
        runner = self.runner

        def fixed_runner(module: HloModule, values: list, where: Topology, seed: int) -> list:
            values = list(values)
            for number, value in binding.fixed.items():
                values[number] = value
            return runner(module, values, where, seed)

        held = self.derived(runner=fixed_runner)
        verdict = held._proved(binding.source, binding.target,
                               held._checked(binding.source, binding.target, topology),
                               fixed=binding.fixed)
        if verdict.proof in ("all-inputs", "bounded"):
            verdict.proof_held = tuple(sorted(binding.fixed))
        _describe_outputs(verdict, binding.source)
        return verdict

    # ----------------------------------------------------------------------------------------
    # Minimizing, and the breaking pass.

    def minimize(self, result: VerificationResult,
                 rewrite: Rewriter | None = None) -> Minimized | None:
        """``result`` (UNSOUND) shrunk by the minimizer, each candidate checked by this
        verifier (``check_case``); with ``rewrite`` (the passes), only the source is edited."""
        return minimize_case(result, self, rewrite=rewrite)

    def check_case(self, before: HloModule, after: HloModule, topology: Topology,
                   inputs: Sequence[Any] | None = None) -> VerificationResult:
        """What the minimizer asks of each smaller candidate: ``check_modules`` on ``topology``
        (on ``inputs`` if given), unminimized and sampled, with this verifier's runner. The
        candidate is not refused for memory: the original source already passed that test."""
        candidates = self.derived(topologies=(topology,), inputs=inputs, minimize=False,
                                  proof="sampled", max_memory=None, runner=self.runner)
        return candidates.check_modules(before, after)

    def breaking_pass(self, module: HloModule, hlo_passes: Sequence[HloPass],
                      topology: Topology) -> int | None:
        """The index of the first pass such that the passes up to it, verified on ``topology``
        under their composed contract, are UNSOUND (None if no prefix is). Only prefixes ending
        at a pass that changed the module are verified (the others repeat the previous
        verdict); each by this verifier, unminimized, with the options its prefix takes."""
        options = dict(self.options.pass_options)
        pipeline = PassPipeline(list(hlo_passes), name="prefixes")
        pipeline.run(module.clone(), PassContext(topology=topology, options=options))
        for index, (_, changed) in enumerate(pipeline.results):
            if not changed:
                continue
            prefix = [type(p)(**p.given_options) for p in hlo_passes[:index + 1]]
            prefixes = self.derived(topologies=(topology,), minimize=False,
                                    name_breaking_pass=False,
                                    pass_options=options_taken(prefix, options))
            if prefixes.check_pass(module, prefix).status is Status.UNSOUND:
                return index
        return None

    # ----------------------------------------------------------------------------------------
    # Helpers.

    def _too_slow(self, source: HloModule, target: HloModule,
                  topology: Topology) -> TooLarge | None:
        """A pair whose dots need more multiply-adds than ``EXECUTION_MULTIPLY_ADDS`` to
        execute: proved on symbolic positions first, executed when that does not decide."""
        work = max(multiply_adds(source, topology), multiply_adds(target, topology))
        if work <= EXECUTION_MULTIPLY_ADDS:
            return None
        return TooLarge(ValueError(f"its dots need about {work:.2g} multiply-adds on "
                                   f"{topology.num_devices} devices"), source=True, slow=True)

    def _too_large(self, source: HloModule, target: HloModule,
                   topology: Topology) -> TooLarge | None:
        """Which of the pair does not fit in ``max_memory`` on ``topology`` (None: both do)."""
        limit = self.options.max_memory
        if limit is None:
            return None
        try:
            require_memory(source, topology, limit, what=self.options.name)
        except MemoryLimitExceeded as exc:
            return TooLarge(exc, source=True)
        try:
            require_memory(target, topology, limit, what="the target")
        except MemoryLimitExceeded as exc:
            return TooLarge(exc, source=False)
        return None

    def _summary(self, source: HloModule, default_target: HloModule,
                 topologies: list[Topology], verdicts: list[TopologyVerdict], *,
                 trials: int) -> VerificationResult:
        """The result over ``verdicts``: the worst status, and the first topology with it (else
        the first that changed anything) for the error line, detail, counterexample and
        target."""
        options = self.options
        status = worst([v.status for v in verdicts])
        reported = next((v for v in verdicts if v.status is status), verdicts[0]) \
            if status is not Status.CORRECT else \
            next((v for v in verdicts if v.changed), verdicts[0])
        for verdict in verdicts:
            cex = verdict.counterexample
            if cex is not None and cex.check != TARGET_MALFORMED:
                cex.source_path = path_to(source, cex.leaf)
                cex.target_path = path_to(verdict.target or default_target, cex.leaf)
        classifications = [v.classification for v in verdicts if v.classification]
        failed = status is not Status.CORRECT
        result = VerificationResult(
            status=status, name=options.name or source.name, source=source,
            target=reported.target or default_target, topologies=topologies,
            error_line=reported.error_line if failed else None,
            detail=reported.detail if failed else "",
            counterexample=reported.counterexample if failed else None,
            contract=options.contract, trials=trials, seed=options.seed,
            timeout=options.timeout, compared=sum(v.compared for v in verdicts),
            classification="reassociation" if "reassociation" in classifications else
            next(iter(classifications), None),
            warnings=[w for v in verdicts for w in v.warnings],
            notes=[n for v in verdicts for n in v.notes],
            rewrites=list(reported.rewrites),
            changed=None if all(v.changed is None for v in verdicts) else
            any(v.changed for v in verdicts),
            topology_results=verdicts)
        if status is Status.UNSOUND and options.contract.expects_change:
            result.notes.append(CHANGES_EXPECTED)
        return result
