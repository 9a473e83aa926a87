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

Each failure (crashed, malformed, unsound) gets a *signature*: (pass, class, ERROR line, the
topology's class — partitions only, replicas only, both — and the minimized module's shape — the set of its entry opcodes with each collective's group mode and layout:
one sorted / one unsorted group, contiguous, strided, permuted, singletons, empty; a permute's
pairs: self, shift, partial). Failures with the same signature are counted once. An UNSOUND
failure is minimized (``verify.minimize``, through ``check_pass``) before its signature is
taken; a crash is saved as drawn. Minimizing costs a few dozen verifications, so a failure is
minimized only while fewer than ``MINIMIZE_PER_KIND`` (one) failures of its *kind* (pass, class,
ERROR line, topology class and the drawn module's collective shapes) have been; the others are counted in their
class and not minimized again.

A new distinct failure is saved to the corpus directory (if any) as ``KEY-HASH/``:
``before.hlo``, ``after.hlo``, ``inputs.npz``, ``report.json``, ``reproduce.sh``
(``verify.report.write_counterexample``: the ``neuron-sim verify BEFORE AFTER`` command) and
``fuzz.json`` (the signature, the class, and the ``neuron-sim verify BEFORE --passes KEY``
command that re-runs the pass). A case directory that already exists is a known failure: it is
counted, not written again.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from neuron_sim.hlo.ir import HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.outputs import atomic_write_text
from neuron_sim.topology import Topology, group_mode
from passes import HloPass
from verify.api import check_pass, pass_list
from verify.checks import PASS_FAILED, TARGET_MALFORMED
from verify.fuzz.generator import StopDrawing, draw_modules, fuzz_modules
from verify.report import topology_arguments, write_counterexample
from verify.result import Status, VerificationResult

CLASSES = ("crashed", "malformed", "unsound", "correct", "unchanged", "inconclusive")
FAILURE_CLASSES = ("crashed", "malformed", "unsound")
TRIALS = 2
MINIMIZE_PER_KIND = 1


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
        return f"{inst.opcode.spelling}[{mode}, {pairs_layout(inst.get('source_target_pairs').pairs)}]"
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
        return (self.pass_name, self.klass, self.check, topology_class(self.topology),
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
    counts: dict[str, Counter] = field(default_factory=dict)
    pass_seconds: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    repeats: int = 0

    def distinct(self, pass_name: str) -> int:
        return sum(1 for f in self.failures if f.pass_name == pass_name)


Progress = Callable[[int, Campaign], None]


class _Run:
    def __init__(self, hlo_passes: list[HloPass], campaign: Campaign, corpus: Path | None,
                 trials: int) -> None:
        self.passes = hlo_passes
        self.campaign = campaign
        self.corpus = corpus
        self.trials = trials
        self.by_signature: dict[tuple, Failure] = {}
        self.minimized_kinds: Counter = Counter()

    def module(self, module: HloModule, index: int) -> None:
        campaign = self.campaign
        for hlo_pass in self.passes:
            started = time.perf_counter()
            result = check_pass(module, [hlo_pass], trials=self.trials,
                                seed=campaign.seed + index, minimize=False)
            klass = classify(result)
            campaign.counts[hlo_pass.name][klass] += 1
            if klass in FAILURE_CLASSES:
                self.failure(module, index, hlo_pass, klass, result)
            campaign.pass_seconds[hlo_pass.name] += time.perf_counter() - started
        campaign.modules += 1

    def failure(self, module: HloModule, index: int, hlo_pass: HloPass, klass: str,
                result: VerificationResult) -> None:
        check = next((v.error_line for v in result.topology_results if v.error_line), "")
        kind = (hlo_pass.name, klass, check,
                topology_class(Topology(module.replica_count, module.num_partitions)),
                collective_shapes(module))
        if self.minimized_kinds[kind] >= MINIMIZE_PER_KIND:
            self.campaign.repeats += 1
            return
        self.minimized_kinds[kind] += 1
        if klass != "crashed":
            minimized = check_pass(module, [hlo_pass], trials=self.trials,
                                   seed=self.campaign.seed + index, minimize=True)
            if minimized.status is Status.UNSOUND:
                result = minimized
        before, after, cex = result.reported
        failure = Failure(hlo_pass.name, klass, check, module_shape(before), index,
                          cex.topology if cex is not None else result.topologies[0],
                          size=len(before.entry.instructions),
                          original_size=len(module.entry.instructions),
                          minimized=result.minimized is not None,
                          detail=result.detail.splitlines()[0] if result.detail else "")
        known = self.by_signature.get(failure.signature)
        if known is not None:
            known.count += 1
            return
        self.by_signature[failure.signature] = failure
        self.campaign.failures.append(failure)
        if self.corpus is not None:
            save_failure(failure, result, self.corpus)


def reproduce_pass_command(before_path: str, pass_name: str, topology: Topology) -> str:
    """``neuron-sim verify BEFORE --passes KEY --replicas R --partitions P``."""
    args = ["neuron-sim", "verify", before_path, "--passes", pass_name,
            *topology_arguments(topology)]
    return " ".join(shlex.quote(a) for a in args)


def save_failure(failure: Failure, result: VerificationResult, corpus: Path) -> None:
    """Write the failure's case directory, unless it exists already (a known failure)."""
    directory = corpus / failure.key
    failure.directory = str(directory)
    if directory.exists():
        return
    if failure.klass == "crashed":
        directory.mkdir(parents=True)
        atomic_write_text(directory / "before.hlo", result.source.to_text(), exclusive=True)
    else:
        write_counterexample(result, directory)
    failure.reproduce = reproduce_pass_command("before.hlo", failure.pass_name, failure.topology)
    data = dict(failure.to_json(), directory=failure.key)
    atomic_write_text(directory / "fuzz.json", json.dumps(data, indent=2) + "\n",
                      exclusive=True)


def run_campaign(passes: object, *, examples: int | None = None,
                 seconds: float | None = None, seed: int = 0, corpus: str | Path | None = None,
                 devices: int = 8, trials: int = TRIALS,
                 progress: Progress | None = None) -> Campaign:
    """Draw modules of ``devices`` devices from ``seed`` (generator.fuzz_modules) until
    ``examples`` modules or ``seconds`` have been run (whichever comes first; one of them must
    be given), run each of ``passes`` on each, and return what was found. Failures are saved
    under ``corpus`` when given."""
    if examples is None and seconds is None:
        raise ValueError("a campaign needs --examples or --time")
    hlo_passes = pass_list(passes)
    campaign = Campaign([p.name for p in hlo_passes], seed,
                        counts={p.name: Counter({k: 0 for k in CLASSES}) for p in hlo_passes})
    run = _Run(hlo_passes, campaign, Path(corpus) if corpus is not None else None, trials)
    started = time.perf_counter()

    def visit(module: HloModule, index: int) -> None:
        if (examples is not None and index >= examples) or \
                (seconds is not None and time.perf_counter() - started >= seconds):
            raise StopDrawing
        run.module(module, index)
        if progress is not None:
            progress(index + 1, campaign)

    draw_modules(fuzz_modules(devices=devices), seed, visit)
    campaign.seconds = time.perf_counter() - started
    return campaign
