"""The verifier's entry points: ``check_modules(before, after)`` and ``check_pass(module, passes)``.

They answer the question a compiler engineer asks of a rewrite — did it preserve the program's
meaning on every device of every topology? — with one verdict per topology (checks.py runs the
ordered checks on each) and a summary (result.py). ``check_pass`` runs the passes once per
topology, each time with that topology in its ``PassContext``: a pass whose rewrite depends on
the topology is checked on the rewrite it really makes there. An UNSOUND summary is minimized
(minimize.py), starting from the first failing topology.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from neuron_sim.interpreter.memory import require_memory
from neuron_sim.errors import UserError
from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.passes import (Contract, HloPass, PassContext, PassPipeline, UnknownPassOptionError,
                    contract_of, get_pass, resolve_pass_options, weakest)
from neuron_sim.passes.registry import parse_pass_list
from neuron_sim.verify.checks import (CHECKS, PASS_FAILED, TARGET_MALFORMED, UNSUPPORTED, VALUE_MISMATCH,
                           Check, path_to, verify_topology)
from neuron_sim.verify.execution import DEFAULT_TIMEOUT, Runner, default_runner
from neuron_sim.verify.inputs import DEFAULT_TRIALS
from neuron_sim.verify.minimize import PairVerifier, minimize_case
from neuron_sim.verify.proving import with_proof
from neuron_sim.verify.result import Status, TopologyVerdict, VerificationResult, worst

Topologies = Topology | str | Iterable[Topology | str] | None

CHANGES_EXPECTED = ("the pass declares that it changes results (a positive control): this "
                    "difference is expected")


def normalize_topologies(topologies: Topologies, module: HloModule) -> list[Topology]:
    """None -> the module header's; "RxP" strings parsed; duplicates dropped, order kept."""
    if topologies is None:
        return [Topology(module.replica_count, module.num_partitions)]
    if isinstance(topologies, (Topology, str)):
        topologies = [topologies]
    result: list[Topology] = []
    for item in topologies:
        topology = Topology.parse(item) if isinstance(item, str) else item
        if topology not in result:
            result.append(topology)
    if not result:
        raise UserError("no topology to verify on")
    return result


def check_modules(before: HloModule, after: HloModule, topologies: Topologies = None, *,
                  trials: int = DEFAULT_TRIALS, seed: int = 0,
                  inputs: Sequence[Any] | None = None, contract: Contract | str = "exact",
                  backend: str = "local", runner: Runner | None = None,
                  minimize: bool = True, name: str | None = None,
                  timeout: float | None = DEFAULT_TIMEOUT, max_memory: int | None = None,
                  checks: Sequence[Check] = CHECKS, proof: str = "auto") -> VerificationResult:
    """Is ``after`` a correct replacement for ``before`` on every device of ``topologies``?

    ``topologies``: a Topology, an ``"RxP"`` string or a list of them (default: ``before``'s
    header); each gets its verdict in ``topology_results``. ``trials`` input sets per topology
    (styles cycle, see inputs.py), drawn from ``seed``; ``inputs`` (one value per parameter,
    ``shape`` or ``[D, *shape]``) replaces them. ``contract`` (a ``neuron_sim.passes.contracts`` object or
    its name) decides which differences are allowed. An UNSOUND result is minimized unless
    ``minimize`` is False. ``timeout`` bounds one execution of the source, in seconds (None: no
    bound; the target gets ``execution.target_limit``). ``max_memory`` (bytes): a source whose
    estimated memory on a topology exceeds it raises ``MemoryLimitExceeded`` before inputs are
    drawn; with the default runner, a target over it is an ERROR verdict. ``checks`` are run in
    order (default: ``checks.CHECKS``). ``proof``: "auto" also proves a CORRECT verdict of an
    exact contract for all inputs where symbolic execution can (verify/proof.py), "symbolic"
    requires that proof, "sampled" skips it (as given ``inputs`` do: they ask about those).
    """
    contract = contract_of(contract)
    topologies = normalize_topologies(topologies, before)
    _require_memory(before, topologies, max_memory, name)
    runner = runner or default_runner(backend, max_memory)
    verdicts = [_proved(before, after, verify_topology(
        before, after, topology, trials=trials, seed=seed, inputs=inputs, contract=contract,
        runner=runner, timeout=timeout, checks=checks), contract=contract, runner=runner,
        timeout=timeout, checks=checks, seed=seed, max_memory=max_memory,
        proof=proof if inputs is None else "sampled") for topology in topologies]
    result = _summary(name or before.name, before, after, topologies, verdicts, contract,
                      trials=trials if inputs is None else 1, seed=seed, timeout=timeout)
    if result.status is Status.UNSOUND and minimize and inputs is None:
        result.minimized = minimize_case(result, _pair_verifier(result, runner, checks))
    return result


def check_pass(module: HloModule, passes: Any, topologies: Topologies = None, *,
               trials: int = DEFAULT_TRIALS, seed: int = 0, inputs: Sequence[Any] | None = None,
               backend: str = "local", runner: Runner | None = None, minimize: bool = True,
               name: str | None = None, timeout: float | None = DEFAULT_TIMEOUT,
               max_memory: int | None = None, pass_options: Mapping[str, str] | None = None,
               checks: Sequence[Check] = CHECKS,
               name_breaking_pass: bool = False, proof: str = "auto") -> VerificationResult:
    """Run ``passes`` on a copy of ``module`` for each topology and check each rewrite.

    ``passes``: ``"a,b"``, a list of registry keys / class names / HloPass objects, or a
    PassPipeline; ``pass_options`` (``NAME`` or ``key.NAME`` -> text) go into every run's
    ``PassContext`` (an option no pass declares raises ``UnknownPassOptionError`` before anything
    runs). The comparison follows the passes' weakest contract. An UNSOUND result is minimized by
    shrinking the *source* and re-running the passes on it, so the reported pair is one the
    passes really produce. ``timeout`` and ``max_memory`` mean what they mean for
    ``check_modules``. A pass that folded values into the module (``HloPass.source_binding``:
    InlineWeights' weights, ReplaceRng's draws) is compared with the source fed those values, and
    such a result is not minimized. With ``name_breaking_pass``, an UNSOUND result of several
    passes also names the first pass whose prefix of the list breaks that prefix's composed contract
    (``breaking_pass``; a note and ``result.breaking_pass``). ``proof`` as for
    ``check_modules``.
    """
    hlo_passes = pass_list(passes)
    options = dict(pass_options or {})
    resolve_pass_options(hlo_passes, options)
    contract = weakest(p.contract for p in hlo_passes)
    topologies = normalize_topologies(topologies, module)
    _require_memory(module, topologies, max_memory, name)
    runner = runner or default_runner(backend, max_memory)
    verdicts: list[TopologyVerdict] = []
    bound = False  # some pass held source values fixed (SourceBinding): no minimizing
    for topology in topologies:
        context = PassContext(topology=topology, options=options)
        try:
            target, changed, rewrites = apply_passes(module, hlo_passes, context)
        except Exception as exc:  # noqa: BLE001 - PassError and anything a pass lets escape
            verdicts.append(TopologyVerdict(topology, target=module, changed=False).fail(
                Status.ERROR, PASS_FAILED, str(exc)))
            continue
        if not changed:
            verdict = TopologyVerdict(topology, target=target, changed=False,
                                      proof="all-inputs")
            where = "" if len(topologies) == 1 else f" on topology {topology}"
            verdict.notes.append(f"the passes made no change{where}: the target is the source")
        else:
            verdict = _verify_bound(module, target, hlo_passes, topology, trials=trials,
                                    seed=seed, inputs=inputs, contract=contract, runner=runner,
                                    timeout=timeout, checks=checks, max_memory=max_memory,
                                    proof=proof if inputs is None else "sampled")
            verdict.changed, verdict.rewrites = True, rewrites
            bound = bound or verdict.target is not target
            verdict.target = target
        verdicts.append(verdict)
    result = _summary(name or module.name, module, module, topologies, verdicts, contract,
                      trials=trials if inputs is None or not any(v.changed for v in verdicts)
                      else 1, seed=seed, timeout=timeout)
    result.passes = [p.name for p in hlo_passes]
    if name_breaking_pass and result.status is Status.UNSOUND and len(hlo_passes) > 1:
        topology = next(v.topology for v in verdicts if v.status is Status.UNSOUND)
        index = breaking_pass(module, hlo_passes, topology, options, trials=trials, seed=seed,
                              inputs=inputs, runner=runner, timeout=timeout, checks=checks)
        result.breaking_pass = hlo_passes[index].name if index is not None else None
        if index is not None:
            result.notes.append(
                f"the first pass that breaks the composed contract is {hlo_passes[index].name} "
                f"(pass {index + 1} of {len(hlo_passes)}: the passes before it verify under "
                f"their contract on topology {topology}, with it they do not)")
    if result.status is Status.UNSOUND and minimize and inputs is None and not bound:
        def rewrite(source: HloModule, topology: Topology) -> HloModule | None:
            try:
                target, changed, _ = apply_passes(source, hlo_passes,
                                                  PassContext(topology=topology, options=options))
            except Exception:  # noqa: BLE001 - a variant the passes cannot handle is not kept
                return None
            return target if changed else None

        result.minimized = minimize_case(result, _pair_verifier(result, runner, checks),
                                         rewrite=rewrite)
    return result


def _verify_bound(source: HloModule, target: HloModule, hlo_passes: Sequence[HloPass],
                  topology: Topology, *, runner: Runner, proof: str = "auto",
                  max_memory: int | None = None, **settings: Any) -> TopologyVerdict:
    """``verify_topology`` of the rewrite, through the ``SourceBinding`` of the one pass that
    declares one (the compared pair, and the parameters held fixed on every device), if any.
    The verdict's target is the compared one (``check_pass`` puts the rewrite back)."""
    try:
        bindings = [b for b in (p.source_binding(source, target) for leaf in hlo_passes
                                for p in leaf.leaf_passes()) if b is not None]
        if len(bindings) > 1:
            raise ValueError("more than one pass holds source values fixed; verify them one "
                             "at a time")
    except ValueError as exc:
        return TopologyVerdict(topology, target=target).fail(
            Status.ERROR, UNSUPPORTED, f"the rewrite cannot be compared on topology {topology}: "
                                       f"{exc}")
    if not bindings:
        return _proved(source, target, verify_topology(source, target, topology, runner=runner,
                                                       **settings),
                       runner=runner, proof=proof, contract=settings["contract"],
                       timeout=settings["timeout"], checks=settings["checks"],
                       seed=settings["seed"], max_memory=max_memory)
    binding = bindings[0]
    if binding.problem is not None:
        return TopologyVerdict(topology, target=binding.target).fail(
            Status.UNSOUND, VALUE_MISMATCH, f"on topology {topology}: {binding.problem}")

    def fixed_runner(module: HloModule, values: list, where: Topology, seed: int) -> list:
        values = list(values)
        for number, value in binding.fixed.items():
            values[number] = value
        return runner(module, values, where, seed)

    return verify_topology(binding.source, binding.target, topology, runner=fixed_runner,
                           **settings)


def _proved(source: HloModule, target: HloModule, verdict: TopologyVerdict, *,
            contract: Contract, runner: Runner, timeout: float | None,
            checks: Sequence[Check], seed: int, proof: str,
            max_memory: int | None = None) -> TopologyVerdict:
    """``verdict`` with its proof for all inputs (``neuron_sim.verify.proving.with_proof``)."""
    def verify(inputs: Sequence[Any]) -> TopologyVerdict:
        return verify_topology(source, target, verdict.topology, trials=1, seed=seed,
                               inputs=inputs, contract=contract, runner=runner,
                               timeout=timeout, checks=checks)

    return with_proof(source, target, verdict, verify=verify, contract=contract,
                      mode=proof, seed=seed, timeout=timeout, max_memory=max_memory)


def breaking_pass(module: HloModule, hlo_passes: Sequence[HloPass], topology: Topology,
                  options: Mapping[str, str], **settings: Any) -> int | None:
    """The index of the first pass such that the passes up to it, verified on ``topology``
    under their composed contract, are UNSOUND (None if no prefix is). Only prefixes ending at
    a pass that changed the module are verified (the others repeat the previous verdict).
    ``settings``: ``check_pass``'s trials, seed, inputs, runner, timeout, checks."""
    pipeline = PassPipeline(list(hlo_passes), name="prefixes")
    pipeline.run(module.clone(), PassContext(topology=topology, options=options))
    for index, (_, changed) in enumerate(pipeline.results):
        if not changed:
            continue
        prefix = [type(p)(**p.given_options) for p in hlo_passes[:index + 1]]
        verdict = check_pass(module, prefix, [topology], minimize=False,
                             pass_options=options_taken(prefix, options), **settings)
        if verdict.status is Status.UNSOUND:
            return index
    return None


def options_taken(hlo_passes: Sequence[HloPass], options: Mapping[str, str]) -> dict[str, str]:
    """The options of ``options`` that some pass of ``hlo_passes`` takes: a prefix of a pass
    list is run with the options meant for the whole list, less those of the passes after it
    (which ``resolve_pass_options`` would refuse for the prefix)."""
    taken = {}
    for name, value in options.items():
        try:
            resolve_pass_options(hlo_passes, {name: value})
        except UnknownPassOptionError:
            continue
        taken[name] = value
    return taken


def _require_memory(source: HloModule, topologies: list[Topology], max_memory: int | None,
                    name: str | None) -> None:
    """Refuse, before its inputs are drawn, a source that would not fit in ``max_memory``."""
    if max_memory is not None:
        for topology in topologies:
            require_memory(source, topology, max_memory, what=name)


def _summary(name: str, source: HloModule, default_target: HloModule, topologies: list[Topology],
             verdicts: list[TopologyVerdict], contract: Contract, *, trials: int, seed: int,
             timeout: float | None) -> VerificationResult:
    """The result over ``verdicts``: the worst status, and the first topology with it (else the
    first that changed anything) for the error line, detail, counterexample and target."""
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
    result = VerificationResult(
        status=status, name=name, source=source,
        target=reported.target or default_target, topologies=topologies,
        error_line=reported.error_line if status is not Status.CORRECT else None,
        detail=reported.detail if status is not Status.CORRECT else "",
        counterexample=reported.counterexample if status is not Status.CORRECT else None,
        contract=contract, trials=trials, seed=seed, timeout=timeout,
        compared=sum(v.compared for v in verdicts),
        classification="reassociation" if "reassociation" in classifications else
        next(iter(classifications), None),
        warnings=[w for v in verdicts for w in v.warnings],
        notes=[n for v in verdicts for n in v.notes],
        rewrites=list(reported.rewrites),
        changed=None if all(v.changed is None for v in verdicts) else
        any(v.changed for v in verdicts),
        topology_results=verdicts)
    if status is Status.UNSOUND and contract.expects_change:
        result.notes.append(CHANGES_EXPECTED)
    return result


def _pair_verifier(result: VerificationResult, runner: Runner,
                   checks: Sequence[Check]) -> PairVerifier:
    """``verify(before, after, topology, inputs)``: ``check_modules`` with ``result``'s settings,
    unminimized — what the minimizer asks of each smaller candidate."""
    def verify(before: HloModule, after: HloModule, topology: Topology,
               inputs: Sequence[Any] | None) -> VerificationResult:
        return check_modules(before, after, [topology], trials=result.trials, seed=result.seed,
                             inputs=inputs, contract=result.contract, runner=runner,
                             minimize=False, name=result.name, timeout=result.timeout,
                             checks=checks, proof="sampled")

    return verify


# --------------------------------------------------------------------------------------------
# Passes.


def pass_list(passes: Any) -> list[HloPass]:
    """``"a,b"``, a name, a list of names or HloPass objects, or a PassPipeline -> HloPass list."""
    if isinstance(passes, PassPipeline):
        return list(passes.passes)
    if isinstance(passes, HloPass):
        return [passes]
    if isinstance(passes, str):
        return parse_pass_list(passes)
    return [get_pass(p) if isinstance(p, str) else p for p in passes]


def apply_passes(module: HloModule, hlo_passes: Sequence[HloPass],
                 context: PassContext | None = None) -> tuple[HloModule, bool, list[str]]:
    """A rewritten clone of ``module``: (target, changed, rewrite log). Raises PassError."""
    target = module.clone()
    pipeline = PassPipeline(list(hlo_passes), name="verify")
    changed = pipeline.run(target, context)
    return target, changed, list(pipeline.rewrites)
