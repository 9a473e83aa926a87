"""A fuzz campaign: draw modules, run each pass on each, verify, classify, minimize, save.

Every module is run through every pass on its own (the passes are judged one by one, not as a
pipeline) and verified on its topology (``check_pass``, a few input sets). The class of a
(module, pass) run, in this order of precedence:

``crashed``       the pass raised (the module is left as it was)
``malformed``     the pass produced a module the checker rejects (``ERROR: Target is malformed``)
``unsound``       the rewrite changed results on some device (any other UNSOUND verdict)
``correct``       the pass changed the module and the verdict is CORRECT
``unchanged``     the pass changed nothing
``inconclusive``  our own limit (an ERROR or FAILED_TO_PROVE verdict that is not a crash)

Each failure (crashed, malformed, unsound) gets a *signature*: (pass, class, ERROR line, a
crash's exception line, the topology's class — partitions only, replicas only, both — and the minimized module's shape —
the set of its entry opcodes with each collective's group mode and layout: one sorted / one
unsorted group, contiguous, strided, permuted, singletons, empty; a permute's pairs: self,
shift, partial). Failures with the same signature are counted once. A failure is minimized
before its signature is taken: an UNSOUND or malformed one by ``neuron_sim.verify.minimize`` on the found
verdict (only the source is edited and the pass re-run, with the campaign's trials), a crash by
the same edits while the pass still raises the same exception type with the same message
prefix (``minimize_crash``). Minimizing costs a few dozen verifications, so a failure is
minimized only while fewer than ``MINIMIZE_PER_KIND`` (one) failures of its *kind* (pass,
class, ERROR line, topology class, and the shapes of the instructions the pass rewrote with
their collective operands — ``rewritten_shapes``) have been; the others are counted in their
class and not minimized again. A timed campaign also bounds how many failures it minimizes
(``MINIMIZE_FIRST`` plus one per ``MODULES_PER_MINIMIZE`` modules); a new kind met over that
budget is counted as deferred and stays new.

A new distinct failure is saved to the corpus directory (if any) as ``KEY-HASH/``:
``before.hlo``, ``after.hlo``, ``inputs.npz``, ``report.json``, ``reproduce.sh``
(``neuron_sim.verify.report.write_counterexample``: the ``neuron-sim verify BEFORE AFTER`` command) and
``fuzz.json`` (the signature, the class, and the ``neuron-sim verify BEFORE --passes KEY``
command that re-runs the pass); a crash's directory holds its minimized ``before.hlo``,
``fuzz.json`` and a ``reproduce.sh`` running that command. A case directory that already
exists is a known failure: it is counted, not written again.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

import neuron_sim.interpreter as interpreter

from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.outputs import atomic_write_text
from neuron_sim.topology import Topology, group_mode
from neuron_sim.passes import HloPass, PassContext
from neuron_sim.verify.api import apply_passes, pass_list
from neuron_sim.verify.checks import PASS_FAILED, TARGET_MALFORMED, malformed
from neuron_sim.verify.execution import default_runner
from neuron_sim.verify.fuzz.collector import objects_before_frozen
from neuron_sim.verify.fuzz.generator import StopDrawing, draw_modules, fuzz_modules
from neuron_sim.verify.fuzz.source_runs import SourceRuns
from neuron_sim.verify.minimize import minimize_case
from neuron_sim.verify.options import VerifyOptions
from neuron_sim.verify.report import topology_arguments, write_counterexample
from neuron_sim.verify.result import Counterexample, Status, VerificationResult
from neuron_sim.verify.verifier import Verifier

CLASSES = ("crashed", "malformed", "unsound", "correct", "unchanged", "inconclusive")
FAILURE_CLASSES = ("crashed", "malformed", "unsound")
TRIALS = 1
MINIMIZE_PER_KIND = 1
# A timed campaign minimizes at most MINIMIZE_FIRST failures plus one per MODULES_PER_MINIMIZE
# modules drawn: about a sixth of its CPU time at 8 devices, and counted in modules rather than
# seconds, so the same seed minimizes the same failures on every run and machine.
MINIMIZE_FIRST = 8
MODULES_PER_MINIMIZE = 12
CRASH_PREFIX = 40  # characters of a crash's message that must stay the same while minimizing
CRASH_RUN_SECONDS = 5.0  # a candidate crash's source must run within this


def classify(result: VerificationResult) -> str:
    """The class of one pass on one module (see the module docstring)."""
    lines = [v.error_line for v in result.topology_results]
    if PASS_FAILED in lines:
        return "crashed"
    if TARGET_MALFORMED in lines:
        return "malformed"
    if result.status is Status.UNSOUND:
        return "unsound"
    if result.status is Status.CORRECT:
        return "correct" if result.changed else "unchanged"
    return "inconclusive"


# --------------------------------------------------------------------------------------------
# Signatures.


def group_layout(groups: Sequence[Sequence[int]]) -> str:
    """``empty``, ``singletons``, ``one sorted``, ``one unsorted``, ``contiguous``, ``strided``
    or ``permuted``: how a collective's groups are laid out."""
    if not groups:
        return "empty"
    if all(len(g) == 1 for g in groups):
        return "singletons"
    if len(groups) == 1:
        return "one sorted" if list(groups[0]) == sorted(groups[0]) else "one unsorted"
    if len({len(g) for g in groups}) == 1:
        n, width = sum(len(g) for g in groups), len(groups[0])
        ids = np.asarray(groups)
        if np.array_equal(ids, np.arange(n).reshape(-1, width)):
            return "contiguous"
        if np.array_equal(ids, np.arange(n).reshape(width, -1).T):
            return "strided"
    return "permuted"


def pairs_layout(pairs: Sequence[Sequence[int]]) -> str:
    if all(s == t for s, t in pairs):
        return "self"
    sources = {s for s, _ in pairs}
    targets = {t for _, t in pairs}
    return "shift" if sources == targets else "partial"


def instruction_shape(inst: HloInstruction) -> str:
    """``all-reduce[FlattenedID, one unsorted]``, ``collective-permute[CrossReplica, shift]``,
    or the opcode."""
    if inst.has("source_target_pairs"):
        mode = group_mode(inst.opcode.spelling, inst.channel_id is not None)
        pairs = pairs_layout(inst.get("source_target_pairs").pairs)
        return f"{inst.opcode.spelling}[{mode}, {pairs}]"
    if inst.has("replica_groups"):
        mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                          inst.use_global_device_ids)
        return f"{inst.opcode.spelling}[{mode}, {group_layout(inst.replica_groups.groups)}]"
    return inst.opcode.spelling


def module_shape(module: HloModule) -> tuple[str, ...]:
    """The entry's distinct instruction shapes, sorted: what a minimized failure looks like."""
    return tuple(sorted({instruction_shape(inst) for inst in module.entry.instructions}))


def topology_class(topology: Topology) -> str:
    """``partitions``, ``replicas`` or ``replicas x partitions``: which ids a device has more
    than one of (what decides whether partition-id alone can name a device)."""
    if topology.replica_count == 1:
        return "partitions"
    return "replicas" if topology.num_partitions == 1 else "replicas x partitions"


def collective_shapes(module: HloModule) -> tuple[str, ...]:
    """The shapes of every collective in the module, sorted and without repeats."""
    return tuple(sorted({instruction_shape(inst) for inst in module.instructions()
                         if inst.has("replica_groups") or inst.has("source_target_pairs")}))


# --------------------------------------------------------------------------------------------
# The campaign.


@dataclass
class Failure:
    """One distinct failure: its signature, how often it was seen, what was saved."""

    pass_name: str
    klass: str
    check: str
    shape: tuple[str, ...]
    module_index: int
    topology: Topology
    size: int
    original_size: int
    minimized: bool
    count: int = 1
    directory: str | None = None
    reproduce: str | None = None
    detail: str = ""

    @property
    def signature(self) -> tuple:
        crash = self.detail if self.klass == "crashed" else ""
        return (self.pass_name, self.klass, self.check, crash, topology_class(self.topology),
                self.shape)

    @property
    def key(self) -> str:
        digest = hashlib.sha1(repr(self.signature).encode()).hexdigest()[:10]
        return f"{self.pass_name}-{digest}"

    def to_json(self) -> dict:
        return {"pass": self.pass_name, "class": self.klass, "check": self.check,
                "shape": list(self.shape), "module_index": self.module_index,
                "topology": str(self.topology), "size": self.size,
                "original_size": self.original_size, "minimized": self.minimized,
                "count": self.count, "directory": self.directory, "reproduce": self.reproduce,
                "detail": self.detail}


@dataclass
class Campaign:
    """What a campaign found: per pass the count of each class, the distinct failures."""

    passes: list[str]
    seed: int
    modules: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    counts: dict[str, Counter] = field(default_factory=dict)
    pass_seconds: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    repeats: int = 0
    minimize_seconds: float = 0.0
    minimizations: int = 0
    deferred: int = 0

    def distinct(self, pass_name: str) -> int:
        return sum(1 for f in self.failures if f.pass_name == pass_name)


Progress = Callable[[int, Campaign], None]


_REWRITTEN = re.compile(r"^%([^\s,()]+)")


def rewritten_shapes(module: HloModule, rewrites: Sequence[str]) -> tuple[str, ...]:
    """The shapes of the instructions a pass rewrote (named first in each line of its rewrite
    log) and of their collective operands, sorted and without repeats: the part of a failing
    module that decides what its minimized form will look like. The module's collective
    shapes where the log names no instruction of the entry."""
    by_name = {inst.name: inst for inst in module.entry.instructions}
    shapes: set[str] = set()
    for line in rewrites:
        match = _REWRITTEN.match(line)
        inst = by_name.get(match.group(1)) if match else None
        if inst is None:
            continue
        shapes.add(instruction_shape(inst))
        shapes.update(instruction_shape(op) for op in inst.operands
                      if op.has("replica_groups") or op.has("source_target_pairs"))
    return tuple(sorted(shapes)) or collective_shapes(module)


def crash_line(exc: BaseException) -> str:
    """``TypeName: the first CRASH_PREFIX characters of the message's first line``: what a
    minimized crash must still raise. A PassError is read through to the exception that caused
    it (its own text names the module, not the crash)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:CRASH_PREFIX]}"


def pass_crash(module: HloModule, hlo_pass: HloPass, topology: Topology) -> str | None:
    """The crash line of ``hlo_pass`` on ``module`` for ``topology``, None if it does not
    raise."""
    try:
        apply_passes(module, [hlo_pass], PassContext(topology=topology))
    except Exception as exc:  # noqa: BLE001 - any exception a pass lets escape is a crash
        return crash_line(exc)
    return None


def _crash_result(module: HloModule, topology: Topology, line: str) -> VerificationResult:
    """A crash as a failing verdict on ``topology`` with ``line`` as its ERROR line: the form
    ``neuron_sim.verify.minimize`` shrinks (the crash is its own counterexample; there are no inputs)."""
    cex = Counterexample(check=line, topology=topology, inputs=[], style="none", exact=True,
                         message=line)
    return VerificationResult(Status.UNSOUND, module.name, module, module, [topology],
                              error_line=line, detail=line, counterexample=cex, trials=0)


@dataclass(frozen=True)
class _SameCrash:
    """Judges a crash's candidates for the minimizer: each one that ``still_crashes`` let
    through is the crash on its topology (its source is the candidate)."""

    line: str

    def check_case(self, before: HloModule, after: HloModule, topology: Topology,
                   inputs: Sequence | None) -> VerificationResult:
        return _crash_result(before, topology, self.line)


def runs(module: HloModule, topology: Topology) -> bool:
    """Whether ``module`` is well formed and executes on ``topology`` (a crash on a module
    that is not a program there, such as groups naming devices it lacks, is not the pass's)."""
    if malformed(module, topology) is not None:
        return False
    try:
        interpreter.run(module, None, topology, seed=0, time_limit=CRASH_RUN_SECONDS)
    except Exception:  # noqa: BLE001 - any failure to run makes the candidate no program
        return False
    return True


def minimize_crash(module: HloModule, hlo_pass: HloPass, topology: Topology
                   ) -> tuple[HloModule, Topology, str] | None:
    """The smallest well-formed module (and topology) found by ``neuron_sim.verify.minimize``'s edits on
    which ``hlo_pass`` still raises the same exception type with the same message prefix
    (``crash_line``) and that still runs there (``runs``), with that line; None if ``module``
    does not crash there."""
    line = pass_crash(module, hlo_pass, topology)
    if line is None:
        return None

    def still_crashes(source: HloModule, where: Topology) -> HloModule | None:
        if pass_crash(source, hlo_pass, where) != line or not runs(source, where):
            return None
        return source

    minimized = minimize_case(_crash_result(module, topology, line), _SameCrash(line),
                              rewrite=still_crashes)
    if minimized is None:
        return module, topology, line
    return minimized.before, minimized.counterexample.topology, line


class _Run:
    def __init__(self, hlo_passes: list[HloPass], campaign: Campaign, corpus: Path | None,
                 trials: int, minimize_budget: bool) -> None:
        self.passes = hlo_passes
        self.campaign = campaign
        self.corpus = corpus
        self.trials = trials
        self.minimize_budget = minimize_budget
        self.by_signature: dict[tuple, Failure] = {}
        self.minimized_kinds: Counter = Counter()
        self.source_runs = SourceRuns(default_runner())

    def module(self, module: HloModule, index: int) -> None:
        campaign = self.campaign
        self.source_runs.drawn(module)
        for hlo_pass in self.passes:
            started = time.process_time()
            verifier = Verifier(VerifyOptions(trials=self.trials, seed=campaign.seed + index,
                                              minimize=False, runner=self.source_runs))
            result = verifier.check_pass(module, [hlo_pass])
            klass = classify(result)
            campaign.counts[hlo_pass.name][klass] += 1
            if klass in FAILURE_CLASSES:
                self.failure(module, index, hlo_pass, klass, result)
            campaign.pass_seconds[hlo_pass.name] += time.process_time() - started
        campaign.modules += 1

    def failure(self, module: HloModule, index: int, hlo_pass: HloPass, klass: str,
                result: VerificationResult) -> None:
        check = next((v.error_line for v in result.topology_results if v.error_line), "")
        topology = Topology(module.replica_count, module.num_partitions)
        rewrites = [line for v in result.topology_results for line in v.rewrites]
        kind = (hlo_pass.name, klass, check, topology_class(topology),
                rewritten_shapes(module, rewrites) if klass != "crashed"
                else collective_shapes(module))
        if self.minimized_kinds[kind] >= MINIMIZE_PER_KIND:
            self.campaign.repeats += 1
            return
        if not self.may_minimize():
            self.campaign.deferred += 1
            return
        self.minimized_kinds[kind] += 1
        self.campaign.minimizations += 1
        started = time.process_time()
        try:
            self.minimized(module, index, hlo_pass, klass, check, topology, result)
        finally:
            self.campaign.minimize_seconds += time.process_time() - started

    def may_minimize(self) -> bool:
        """Whether one more minimization stays within the budget (MINIMIZE_FIRST plus one per
        MODULES_PER_MINIMIZE modules drawn), if the campaign has one."""
        return not self.minimize_budget or self.campaign.minimizations < \
            MINIMIZE_FIRST + self.campaign.modules // MODULES_PER_MINIMIZE

    def minimized(self, module: HloModule, index: int, hlo_pass: HloPass, klass: str,
                  check: str, topology: Topology, result: VerificationResult) -> None:
        """Minimize a failure of a new kind, count it under its signature, save it if new."""
        crash = None
        if klass == "crashed":
            crash = minimize_crash(module, hlo_pass, topology)
            if crash is None:  # raised only under check_pass' own settings: saved as drawn
                crash = (module, topology, check)
            before, where = crash[0], crash[1]
        else:
            result.minimized = self.case_verifier(result).minimize(
                result, rewrite=self.rewriter(hlo_pass))
            before, _, cex = result.reported
            where = cex.topology if cex is not None else result.topologies[0]
        failure = Failure(hlo_pass.name, klass, check, module_shape(before), index, where,
                          size=len(before.entry.instructions),
                          original_size=len(module.entry.instructions),
                          minimized=(crash[0] is not module) if crash else
                          result.minimized is not None,
                          detail=crash[2] if crash else _first_line(result))
        known = self.by_signature.get(failure.signature)
        if known is not None:
            known.count += 1
            return
        self.by_signature[failure.signature] = failure
        self.campaign.failures.append(failure)
        if self.corpus is not None:
            save_failure(failure, before if crash else result, self.corpus)

    def case_verifier(self, result: VerificationResult) -> Verifier:
        """What judges each smaller candidate of ``result``: a verifier with the campaign's
        trials, the result's seed and contract (``Verifier.check_case``: unminimized,
        sampled)."""
        return Verifier(VerifyOptions(trials=self.trials, seed=result.seed,
                                      contract=result.contract))

    @staticmethod
    def rewriter(hlo_pass: HloPass) -> Callable:
        """The pass's rewrite of a candidate source, None where it raises or changes nothing:
        only the source is edited, so the minimized pair is one the pass really makes. (The
        pass's own ``rewritten``: one copy of the source, which is the target.)"""
        def rewrite(source: HloModule, topology: Topology) -> HloModule | None:
            try:
                return hlo_pass.rewritten(source, PassContext(topology=topology))
            except Exception:  # noqa: BLE001 - a variant the pass cannot handle is not kept
                return None
        return rewrite


def _first_line(result: VerificationResult) -> str:
    """The reported (minimized, if it was) counterexample's summary, else the detail's first
    line."""
    _, _, cex = result.reported
    if cex is not None:
        return cex.summary()
    return result.detail.splitlines()[0] if result.detail else ""


def reproduce_pass_command(before_path: str, pass_name: str, topology: Topology) -> str:
    """``neuron-sim verify BEFORE --passes KEY --replicas R --partitions P``."""
    args = ["neuron-sim", "verify", before_path, "--passes", pass_name,
            *topology_arguments(topology)]
    return " ".join(shlex.quote(a) for a in args)


def save_failure(failure: Failure, found: VerificationResult | HloModule, corpus: Path) -> None:
    """Write the failure's case directory, unless it exists already (a known failure): a
    crash's minimized ``before.hlo`` (``found`` is that module), an UNSOUND or malformed
    verdict's counterexample (``found`` is the verdict); both with ``fuzz.json`` and a
    ``reproduce.sh`` (a crash's runs the pass: ``neuron-sim verify BEFORE --passes KEY``)."""
    directory = corpus / failure.key
    failure.directory = str(directory)
    if directory.exists():
        return
    failure.reproduce = reproduce_pass_command("before.hlo", failure.pass_name, failure.topology)
    if isinstance(found, HloModule):
        directory.mkdir(parents=True)
        atomic_write_text(directory / "before.hlo", found.to_text(), exclusive=True)
        script = (f"#!/bin/sh\n# Reproduces the crash: {failure.detail}\n"
                  f"cd \"$(dirname \"$0\")\" && exec {failure.reproduce}\n")
        atomic_write_text(directory / "reproduce.sh", script, mode=0o777, exclusive=True)
    else:
        write_counterexample(found, directory)
        # The report's command names the files by their absolute paths; the case directory is
        # meant to be moved (into a test corpus), so it names them as reproduce.sh does.
        report = directory / "report.json"
        atomic_write_text(report, report.read_text().replace(f"{directory}/", ""))
    data = dict(failure.to_json(), directory=failure.key)
    atomic_write_text(directory / "fuzz.json", json.dumps(data, indent=2) + "\n",
                      exclusive=True)


def run_campaign(passes: object, *, examples: int | None = None,
                 seconds: float | None = None, seed: int = 0, corpus: str | Path | None = None,
                 devices: int = 8, trials: int = TRIALS,
                 progress: Progress | None = None,
                 minimize_budget: bool | None = None) -> Campaign:
    """Draw modules of ``devices`` devices from ``seed`` (generator.fuzz_modules) until
    ``examples`` modules or ``seconds`` have been run (whichever comes first; one of them must
    be given), run each of ``passes`` on each, and return what was found. Failures are saved
    under ``corpus`` when given. ``minimize_budget``: at most ``MINIMIZE_FIRST`` failures plus
    one per ``MODULES_PER_MINIMIZE`` modules are minimized; a failure of a new kind met over
    the budget is counted as deferred and its kind stays new. None: a budget for a timed
    campaign, none with ``examples`` only (every new kind minimized)."""
    if examples is None and seconds is None:
        raise ValueError("a campaign needs --examples or --time")
    hlo_passes = pass_list(passes)
    campaign = Campaign([p.name for p in hlo_passes], seed,
                        counts={p.name: Counter({k: 0 for k in CLASSES}) for p in hlo_passes})
    if minimize_budget is None:
        minimize_budget = seconds is not None
    run = _Run(hlo_passes, campaign, Path(corpus) if corpus is not None else None, trials,
               minimize_budget)
    started = time.perf_counter()
    cpu_started = time.process_time()

    def visit(module: HloModule, index: int) -> None:
        if (examples is not None and index >= examples) or \
                (seconds is not None and time.perf_counter() - started >= seconds):
            raise StopDrawing
        run.module(module, index)
        if progress is not None:
            progress(index + 1, campaign)

    with objects_before_frozen():
        draw_modules(fuzz_modules(devices=devices), seed, visit)
    campaign.seconds = time.perf_counter() - started
    campaign.cpu_seconds = time.process_time() - cpu_started
    return campaign
