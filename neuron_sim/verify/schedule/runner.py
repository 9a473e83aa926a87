"""Run a pipeline pass by pass and judge every context-dependent rewrite on its way.

``check_schedule(module, passes, topology)`` hands each pass the module as the pipeline would
(each pass with its ``PassContext``), and before a pass with a hazard (the one its class
declares, ``hazards.hazard_of``) it lists the instructions the pass would rewrite and judges each
statically. Every unsafe site is then confirmed dynamically: the differential verifier compares
the module as the pipeline hands it to the pass with the same module after rewriting *that one
site* (an OpExpander pass restricted to the instruction; other passes run whole), on the
topology, and reports the witness device and values. A site the rules call unsafe whose rewrite
changes no output on any input tried (a value-identity: a max over equal values) keeps its
verdict with a note — the rules decide, the witness illustrates.

``suggest_positions`` answers where in the pipeline a pass (DeletePermute) could run with every
site safe.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

from neuron_sim.check_command import describe_collectives
from neuron_sim.hlo.checker import check_module
from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.passes.base import HloPass, OpExpanderPass
from neuron_sim.passes.context import PassContext
from neuron_sim.verify.api import check_modules
from neuron_sim.verify.options import VerifyOptions
from neuron_sim.verify.report import device_text
from neuron_sim.verify.result import Status
from neuron_sim.verify.schedule.hazards import Site, hazard_of

CONFIRM_TRIALS = 4


@dataclass
class ScheduleReport:
    """Every judged site of one pipeline on one topology, in pipeline order, and the keys of the
    passes judged (those that declare a hazard), in pipeline order."""

    topology: Topology
    pipeline: list[str]
    sites: list[Site] = field(default_factory=list)
    context_dependent: list[str] = field(default_factory=list)

    @property
    def unsafe(self) -> list[Site]:
        return [site for site in self.sites if site.unsafe]

    @property
    def safe(self) -> int:
        return sum(not site.unsafe for site in self.sites)


def require_fit(module: HloModule, topology: Topology) -> None:
    """Raise (HloCheckError, a ValueError) unless ``module`` passes the checker on ``topology``
    and every collective names its participants there."""
    check_module(module, topology)
    describe_collectives(module, topology)


def check_schedule(module: HloModule, passes: Sequence[HloPass], topology: Topology, *,
                   options: dict[str, str] | None = None, confirm: bool = True,
                   trials: int = CONFIRM_TRIALS, seed: int = 0,
                   timeout: float | None = 30.0) -> ScheduleReport:
    """Judge every site of every context-dependent pass of ``passes`` on ``topology``.

    ``module`` is not modified. ``confirm`` False skips the differential confirmation.
    """
    context = PassContext(topology, dict(options or {}))
    report = ScheduleReport(topology, [p.name for p in passes])
    state = module.clone()
    for position, hlo_pass in enumerate(passes):
        hazard = hazard_of(hlo_pass)
        if hazard is not None:
            report.context_dependent.append(hlo_pass.name)
            hlo_pass.bind(context)
            sites = hazard.judge(hlo_pass, state, topology)
            for site in sites:
                site.position = position
            if confirm:
                _confirm(hlo_pass, state, topology, context, [s for s in sites if s.unsafe],
                         confirmable=hazard.confirmable, trials=trials, seed=seed,
                         timeout=timeout)
            report.sites.extend(sites)
        hlo_pass.run(state, context)
    return report


def _only_at(hlo_pass: OpExpanderPass, computation: str, name: str) -> OpExpanderPass:
    """A copy of ``hlo_pass`` whose matcher accepts only instruction ``name``."""
    restricted = copy.copy(hlo_pass)
    matches = hlo_pass.matches
    restricted.matches = lambda inst: (inst.name == name and inst.parent is not None  # type: ignore[method-assign]
                                       and inst.parent.name == computation and matches(inst))
    return restricted


def _confirm(hlo_pass: HloPass, state: HloModule, topology: Topology, context: PassContext,
             sites: list[Site], *, confirmable: bool, trials: int, seed: int,
             timeout: float | None) -> None:
    if not sites:
        return
    if not confirmable:
        _confirm_nondeterminism(hlo_pass, state, context, sites)
        return
    whole: str | None = None
    for site in sites:
        if isinstance(hlo_pass, OpExpanderPass):
            rewriter: HloPass = _only_at(hlo_pass, site.computation, site.instruction)
        elif whole is not None:
            _attach(site, whole, whole_pass=True)
            continue
        else:
            rewriter = hlo_pass
        after = state.clone()
        try:
            changed = rewriter.run(after, context)
        except ValueError as exc:
            site.notes.append(f"the pass fails here and leaves the module unchanged: {exc}")
            continue
        if not changed:
            site.notes.append("the pass changes nothing here")
            continue
        result = check_modules(state, after, [topology], VerifyOptions(
            trials=trials, seed=seed, contract=hlo_pass.contract, minimize=False,
            timeout=timeout, name=state.name))
        text = _witness_text(result)
        if not isinstance(hlo_pass, OpExpanderPass):
            whole = text
        _attach(site, text, whole_pass=not isinstance(hlo_pass, OpExpanderPass))


VALUE_IDENTITY_NOTE = ("unsafe by rule, but no input tried changes an output (a value-identity, "
                       "e.g. a max over equal values, or a permute undone later): the rules "
                       "decide, a witness would only illustrate")


def _attach(site: Site, text: str | None, *, whole_pass: bool) -> None:
    if text is None:
        site.notes.append(VALUE_IDENTITY_NOTE)
    elif text.startswith("!"):
        site.notes.append(text[1:])
    else:
        site.witness = text + (" (the whole pass; it is not an OpExpander)" if whole_pass else "")


def _witness_text(result) -> str | None:
    """``device 1 (replica 0, partition 1): out0[2] = 3.5 before, 1.25 after``; None when no
    input tried tells the modules apart; ``!...`` for a verdict that is neither."""
    if result.status is Status.CORRECT:
        return None
    cex = result.counterexample
    if result.status is Status.UNSOUND and cex is not None and cex.device is not None:
        index = "".join(f"[{i}]" for i in cex.index)
        return (f"{device_text(cex.topology, cex.device)}: out{cex.leaf}{index} = "
                f"{cex.source_value} before, {cex.target_value} after "
                f"({cex.mismatch_count} element(s) differ on {len(cex.mismatch_devices)} "
                f"device(s))")
    if result.status is Status.UNSOUND:
        return cex.check if cex is not None else (result.error_line or "UNSOUND")
    return f"!the dynamic confirmation ended {result.status}: {result.error_line or result.detail}"


def _confirm_nondeterminism(hlo_pass: HloPass, state: HloModule, context: PassContext,
                            sites: list[Site]) -> None:
    """Run the pass twice: different modules are the witness of an unpinned seed."""
    first, second = state.clone(), state.clone()
    hlo_pass.run(first, context)
    hlo_pass.run(second, context)
    if first.to_text() != second.to_text():
        witness = "two runs of the pass on this module planted different constants"
        for site in sites:
            site.witness = witness
    else:
        for site in sites:
            site.notes.append("two runs planted the same constants this time")


@dataclass
class Suggestion:
    """Where ``pass_key`` could run in the pipeline (positions 0..len: before pass i) on a
    topology, and the first unsafe site at each position where it could not."""

    pass_key: str
    topology: Topology
    pipeline: list[str]
    safe_positions: list[int]
    blockers: dict[int, Site]
    valid: bool = True
    problem: str = ""

    def describe(self) -> str:
        where = f"on {self.topology}"
        if not self.valid:
            return f"{self.pass_key} cannot be judged {where}: {self.problem}"
        if not self.safe_positions:
            first = self.blockers[min(self.blockers)]
            return (f"{self.pass_key} is unsafe at every position of the pipeline {where}: "
                    f"e.g. %{first.instruction} in %{first.computation}: {first.reason}")
        if len(self.safe_positions) == len(self.pipeline) + 1:
            return f"{self.pass_key} is safe at every position of the pipeline {where}"
        return f"{self.pass_key} can run safely {where} " + ", ".join(
            _position_text(self.pipeline, k) for k in self.safe_positions)


def _position_text(pipeline: list[str], k: int) -> str:
    if not pipeline:
        return "(the pipeline is empty)"
    if k == 0:
        return f"first (before {pipeline[0]})"
    if k == len(pipeline):
        return f"last (after {pipeline[-1]})"
    return f"between {pipeline[k - 1]} and {pipeline[k]}"


def suggest_positions(module: HloModule, passes: Sequence[HloPass], candidate: HloPass,
                      topology: Topology, *, options: dict[str, str] | None = None) -> Suggestion:
    """Where ``candidate`` could be placed in ``passes`` (its own occurrences removed) with
    every site it would rewrite safe on ``topology``."""
    rest = [p for p in passes if p.name != candidate.name]
    keys = [p.name for p in rest]
    hazard = hazard_of(candidate)
    try:
        require_fit(module, topology)
    except ValueError as exc:
        return Suggestion(candidate.name, topology, keys, [], {}, valid=False,
                          problem=f"the module does not fit it ({exc})")
    context = PassContext(topology, dict(options or {}))
    state = module.clone()
    safe_positions: list[int] = []
    blockers: dict[int, Site] = {}
    for k in range(len(rest) + 1):
        candidate.bind(context)
        sites = hazard.judge(candidate, state, topology) if hazard is not None else []
        unsafe = [s for s in sites if s.unsafe]
        if unsafe:
            blockers[k] = unsafe[0]
        else:
            safe_positions.append(k)
        if k < len(rest):
            rest[k].run(state, context)
    return Suggestion(candidate.name, topology, keys, safe_positions, blockers)
