"""``fuzz --oracle xla``: random modules run on XLA:CPU and on the interpreter, compared.

Module ``i`` of seed ``S`` is the ``fuzz`` campaign's module ``i`` (``generator.fuzz_modules``:
collective idioms and random programs, every collective kind and group form, replicas and
partitions, control flow, the element types) on its own topology, with inputs drawn by the
interpreter's ``draw_inputs`` from ``S + i``. Both executors get those inputs; the outputs are
compared per device and per output by ``oracle_compare`` (exact, or within the stated
tolerance where XLA chooses an order or an algorithm). A module compares as

``exact`` / ``tolerance``  agreement
``explained``              a difference ``xla_differences`` recognizes as a documented XLA:CPU
                           runtime difference (docs/semantics.md), counted under its class
``unexplained``            anything else: minimized (``neuron_sim.verify.minimize``'s edits,
                           kept while the module still disagrees unexplained) and, with
                           ``corpus``, saved with its inputs and both outputs

Not compared, and counted apart: modules XLA refuses (``xla refused``), modules with random
number ops (``random``: XLA's generator is not the interpreter's), and modules the interpreter
cannot run (``ours refused``; the interpreter's own limits, such as its time limit).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo.ir import HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.io import output_arrays, write_npz
from neuron_sim.outputs import atomic_write_text
from neuron_sim.topology import Topology
from neuron_sim.interpreter.arguments import draw_inputs
from neuron_sim.verify.fuzz.generator import StopDrawing, draw_modules, fuzz_modules
from neuron_sim.verify.fuzz.oracle_compare import Comparison, compare_outputs
from neuron_sim.verify.fuzz.runner import module_shape, topology_class
from neuron_sim.xla_cpu.batch import meshes
from neuron_sim.verify.fuzz.xla_differences import explain
from neuron_sim.verify.minimize import minimize_case
from neuron_sim.verify.result import Counterexample, Status, VerificationResult

RANDOM_OPCODES = frozenset({Opcode.RNG, Opcode.RNG_BIT_GENERATOR, Opcode.RNG_GET_AND_UPDATE_STATE})
RUN_SECONDS = 20.0
BATCH = 24  # modules drawn before XLA compiles them (those of one topology together)
MINIMIZE_LIMIT = 20  # unexplained disagreements minimized per campaign (the rest are counted)
UNEXPLAINED = "unexplained"
AGREE = ("exact", "tolerance")


@dataclass
class OracleOutcome:
    """One module's comparison: its class and, when it differs, the comparison."""

    klass: str
    comparison: Comparison | None = None
    detail: str = ""


@dataclass
class Disagreement:
    """An unexplained disagreement as found and as minimized."""

    module_index: int
    topology: str
    size: int
    original_size: int
    summary: str
    shape: tuple[str, ...]
    directory: str | None = None
    count: int = 1

    def to_json(self) -> dict:
        return {"module_index": self.module_index, "topology": self.topology,
                "size": self.size, "original_size": self.original_size,
                "summary": self.summary, "shape": list(self.shape),
                "directory": self.directory, "count": self.count}


@dataclass
class OracleCampaign:
    seed: int
    modules: int = 0
    seconds: float = 0.0
    by_class: Counter = field(default_factory=Counter)
    disagreements: list[Disagreement] = field(default_factory=list)
    xla_seconds: float = 0.0
    ours_seconds: float = 0.0
    minimize_seconds: float = 0.0
    batch_only: int = 0

    @property
    def failures(self) -> list[Disagreement]:
        """The unexplained disagreements (what the progress line counts)."""
        return self.disagreements

    @property
    def compared(self) -> int:
        return self.agree + self.explained + self.unexplained

    @property
    def agree(self) -> int:
        return self.by_class["exact"] + self.by_class["tolerance"]

    @property
    def unexplained(self) -> int:
        return self.by_class[UNEXPLAINED]

    @property
    def explained(self) -> int:
        return sum(n for k, n in self.by_class.items() if k.startswith(("xla:", "xla bug:")))

    def to_json(self) -> dict:
        """``{"compared", "agree", "explained", "unexplained", "by_class", ...}``."""
        return {"compared": self.compared, "agree": self.agree, "explained": self.explained,
                "unexplained": self.unexplained, "by_class": dict(sorted(self.by_class.items())),
                "modules": self.modules, "seconds": round(self.seconds, 3),
                "modules_per_second": round(self.modules / self.seconds, 2)
                if self.seconds else None,
                "xla_seconds": round(self.xla_seconds, 3),
                "interpreter_seconds": round(self.ours_seconds, 3),
                "minimize_seconds": round(self.minimize_seconds, 3),
                "batch_only_differences": self.batch_only,
                "disagreements": [d.to_json() for d in self.disagreements]}


class OracleRun:
    """Runs modules on both executors and classifies them."""

    def __init__(self, xla) -> None:
        self.xla = xla  # a neuron_sim.xla_cpu.XlaCpu (or anything with its run method)
        self.xla_seconds = 0.0
        self.ours_seconds = 0.0
        self.batch_only = 0  # differences that went away when the module was compiled alone

    def ours(self, module: HloModule, topology: Topology, inputs: list
             ) -> list[np.ndarray] | OracleOutcome:
        """The interpreter's outputs, or the OracleOutcome that ends the comparison first."""
        if any(inst.opcode in RANDOM_OPCODES for inst in module.instructions()):
            return OracleOutcome("random")
        started = time.perf_counter()
        try:
            return interpreter.execute(module, inputs, topology, seed=0,
                                       time_limit=RUN_SECONDS).outputs
        except Exception as error:  # noqa: BLE001 - any failure to run is recorded, not raised
            return OracleOutcome("ours refused", detail=f"{type(error).__name__}: {error}")
        finally:
            self.ours_seconds += time.perf_counter() - started

    @staticmethod
    def judge(module: HloModule, topology: Topology, ours: list[np.ndarray],
              theirs: list[np.ndarray]) -> OracleOutcome:
        """Compare, and classify a difference (``xla_differences.explain``)."""
        comparison = compare_outputs(module, ours, theirs)
        if comparison.verdict != "differ":
            return OracleOutcome(comparison.verdict, comparison)
        klass = explain(module, topology, comparison, ours, theirs)
        return OracleOutcome(klass or UNEXPLAINED, comparison,
                       detail="; ".join(m.summary() for m in comparison.mismatches))

    def outcome(self, module: HloModule, topology: Topology, inputs: list) -> OracleOutcome:
        """One module compiled alone by XLA and compared."""
        from neuron_sim.xla_cpu import XlaRefused
        from neuron_sim.xla_cpu.client import per_device_arguments

        ours = self.ours(module, topology, inputs)
        if isinstance(ours, OracleOutcome):
            return ours
        started = time.perf_counter()
        try:
            arguments = per_device_arguments(module, inputs, topology.num_devices)
            theirs = self.xla.run(module, arguments, topology)
        except XlaRefused as error:
            return refused(str(error))
        finally:
            self.xla_seconds += time.perf_counter() - started
        return self.judge(module, topology, ours, theirs)

    def outcomes(self, modules: list[HloModule], inputs: list[list]) -> list[OracleOutcome]:
        """``outcome`` of each module, XLA compiling those of one topology together
        (``XlaCpu.run_batch``)."""
        from neuron_sim.xla_cpu import XlaRefused
        from neuron_sim.xla_cpu.client import per_device_arguments

        results: list[OracleOutcome | None] = [None] * len(modules)
        ours_of: dict[int, list[np.ndarray]] = {}
        groups: dict[tuple, list[int]] = {}
        for i, (module, given) in enumerate(zip(modules, inputs)):
            topology = Topology(module.replica_count, module.num_partitions)
            ours = self.ours(module, topology, given)
            if isinstance(ours, OracleOutcome):
                results[i] = ours
                continue
            ours_of[i] = ours
            groups.setdefault((topology, meshes(module)), []).append(i)
        for (topology, _), indices in groups.items():
            started = time.perf_counter()
            items = [(modules[i], per_device_arguments(modules[i], inputs[i],
                                                       topology.num_devices)) for i in indices]
            theirs = self.xla.run_batch(items, topology)
            self.xla_seconds += time.perf_counter() - started
            for i, result in zip(indices, theirs):
                if isinstance(result, XlaRefused):
                    results[i] = refused(str(result))
                    continue
                outcome = self.judge(modules[i], topology, ours_of[i], result)
                if outcome.klass not in AGREE and len(indices) > 1:
                    # Judged on the module compiled alone: a batch must not make a difference.
                    alone = self.outcome(modules[i], topology, inputs[i])
                    if alone.klass != outcome.klass:
                        self.batch_only += 1
                    outcome = alone
                results[i] = outcome
        return results  # type: ignore[return-value]


def refused(message: str) -> OracleOutcome:
    """XLA's refusal as a class: what stopped it (its parser, its verifier, a check that
    ended the process, ...), the message in the detail."""
    lowered = message.lower()
    if "syntax error" in lowered or "parsing" in lowered:
        kind = "parse"
    elif "hlo verifier" in lowered:
        kind = "verifier"
    elif "ended while" in lowered or "check failed" in lowered:
        kind = "crash"
    elif "unimplemented" in lowered or "not supported" in lowered or "unsupported" in lowered:
        kind = "unsupported"
    elif "did not" in lowered and "within" in lowered:
        kind = "timeout"
    else:
        kind = "other"
    return OracleOutcome(f"xla refused: {kind}", detail=message)


@dataclass(frozen=True)
class _StillDisagrees:
    """The minimizer's judge: a candidate source is kept while it still disagrees
    unexplained on its topology (the inputs are the candidate's, or drawn from ``seed``)."""

    run: OracleRun
    seed: int

    def check_case(self, before: HloModule, after: HloModule, topology: Topology,
                   inputs: Sequence | None) -> VerificationResult:
        if inputs is None:
            inputs = _ordered_inputs(before, draw_inputs(before, topology, self.seed))
        outcome = self.run.outcome(before, topology, list(inputs))
        if outcome.klass == UNEXPLAINED:
            return disagreement_result(before, topology, list(inputs), outcome.detail)
        return VerificationResult(Status.CORRECT, before.name, before, before, [topology])


def _ordered_inputs(module: HloModule, drawn: dict) -> list[np.ndarray]:
    return [drawn[f"arg{i}"] for i in range(len(module.entry.parameters))]


def disagreement_result(module: HloModule, topology: Topology, inputs: list,
                        detail: str) -> VerificationResult:
    """A disagreement in the form ``neuron_sim.verify.minimize`` shrinks: an UNSOUND verdict
    whose ERROR line is the class, with the inputs as its counterexample's."""
    cex = Counterexample(check=UNEXPLAINED, topology=topology, inputs=inputs, style="given",
                         exact=True, message=detail)
    return VerificationResult(Status.UNSOUND, module.name, module, module, [topology],
                              error_line=UNEXPLAINED, detail=detail, counterexample=cex,
                              trials=0)


def minimize_disagreement(run: OracleRun, module: HloModule, topology: Topology,
                          inputs: list, detail: str, seed: int
                          ) -> tuple[HloModule, Topology, list, str]:
    """The smallest module, topology and inputs found that still disagree unexplained."""
    judge = _StillDisagrees(run, seed)
    found = minimize_case(disagreement_result(module, topology, inputs, detail), judge,
                          rewrite=lambda source, where: source)
    if found is None:
        return module, topology, inputs, detail
    cex = found.counterexample
    return found.before, cex.topology, list(cex.inputs), cex.message


def save_disagreement(directory: Path, module: HloModule, topology: Topology, inputs: list,
                      run: OracleRun, record: Disagreement) -> None:
    """``before.hlo``, ``inputs.npz``, ``ours.npz``, ``xla.npz`` and ``case.json``."""
    from neuron_sim.xla_cpu.client import per_device_arguments

    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / "module.hlo", module.to_text())
    write_npz(directory / "inputs.npz", {f"arg{i}": v for i, v in enumerate(inputs)})
    ours = interpreter.execute(module, inputs, topology, seed=0).outputs
    write_npz(directory / "ours.npz", output_arrays(ours))
    try:
        theirs = run.xla.run(module, per_device_arguments(module, inputs, topology.num_devices),
                             topology)
        write_npz(directory / "xla.npz", output_arrays(theirs))
    except Exception:  # noqa: BLE001 - the case is still worth keeping
        pass
    atomic_write_text(directory / "case.json", json.dumps(
        dict(record.to_json(), directory=directory.name,
             reproduce=f"neuron-sim run module.hlo --inputs inputs.npz --backend xla "
                       f"--replicas {topology.replica_count} "
                       f"--partitions {topology.num_partitions}"), indent=1) + "\n")


def run_oracle_campaign(*, examples: int | None = None, seconds: float | None = None,
                        seed: int = 0, devices: int = 8, corpus: str | Path | None = None,
                        progress: Callable[[int, OracleCampaign], None] | None = None,
                        xla=None, batch: int = BATCH) -> OracleCampaign:
    """Draw ``fuzz``'s modules from ``seed`` until ``examples`` modules or ``seconds`` have
    been compared (one must be given) and compare each on XLA:CPU and the interpreter."""
    from neuron_sim.xla_cpu import shared_xla

    if examples is None and seconds is None:
        raise ValueError("a campaign needs --examples or --time")
    run = OracleRun(xla if xla is not None else shared_xla(devices, fast_compile=True))
    run.xla.start()  # loading jaxlib is not the campaign's time
    campaign = OracleCampaign(seed)
    kinds: dict[tuple, Disagreement] = {}
    started = time.perf_counter()

    pending: list[tuple[HloModule, int, list]] = []

    def flush() -> None:
        chunk = list(pending)
        pending.clear()
        outcomes = run.outcomes([m for m, _, _ in chunk], [given for _, _, given in chunk])
        for (module, index, given), outcome in zip(chunk, outcomes):
            campaign.by_class[outcome.klass] += 1
            campaign.modules += 1
            if outcome.klass == UNEXPLAINED:
                disagreement(module, index, Topology(module.replica_count,
                                                     module.num_partitions), given, outcome)
        if progress is not None:
            progress(campaign.modules, campaign)

    def visit(module: HloModule, index: int) -> None:
        if (examples is not None and index >= examples) or \
                (seconds is not None and time.perf_counter() - started >= seconds):
            raise StopDrawing
        topology = Topology(module.replica_count, module.num_partitions)
        pending.append((module, index,
                        _ordered_inputs(module, draw_inputs(module, topology, seed + index))))
        if len(pending) >= batch:
            flush()

    def disagreement(module, index, topology, inputs, outcome) -> None:
        kind = (topology_class(topology), module_shape(module))
        if kind in kinds:
            kinds[kind].count += 1
            return
        minimize_started = time.perf_counter()
        small, where, small_inputs, detail = (module, topology, inputs, outcome.detail)
        if len(campaign.disagreements) < MINIMIZE_LIMIT:
            small, where, small_inputs, detail = minimize_disagreement(
                run, module, topology, inputs, outcome.detail, seed + index)
        record = Disagreement(index, str(where), len(small.entry.instructions),
                              len(module.entry.instructions), detail, module_shape(small))
        kinds[kind] = record
        campaign.disagreements.append(record)
        if corpus is not None:
            name = f"seed{seed}-module{index}"
            record.directory = name
            save_disagreement(Path(corpus) / name, small, where, small_inputs, run, record)
        campaign.minimize_seconds += time.perf_counter() - minimize_started

    draw_modules(fuzz_modules(devices=devices), seed, visit)
    if pending:
        flush()
    campaign.seconds = time.perf_counter() - started
    campaign.xla_seconds = run.xla_seconds
    campaign.ours_seconds = run.ours_seconds
    campaign.batch_only = run.batch_only
    return campaign


def oracle_table(campaign: OracleCampaign) -> str:
    """The text report: the count of each class, the unexplained disagreements, the rate."""
    document = campaign.to_json()
    lines = [f"{'class':<40} {'modules':>8}"]
    lines += [f"{klass:<40} {count:>8}" for klass, count in sorted(campaign.by_class.items())]
    lines.append("")
    lines.append(f"compared {document['compared']}: {document['agree']} agree, "
                 f"{document['explained']} explained (documented XLA:CPU differences), "
                 f"{document['unexplained']} unexplained")
    for d in campaign.disagreements:
        where = f" -> {d.directory}" if d.directory else ""
        lines.append(f"  module {d.module_index}, topology {d.topology}, {d.size} instructions "
                     f"(from {d.original_size}), seen {d.count}x: {d.summary}{where}")
    lines.append(f"{campaign.modules} modules in {campaign.seconds:.1f} s "
                 f"({document['modules_per_second']} modules/s; XLA {campaign.xla_seconds:.1f} s, "
                 f"interpreter {campaign.ours_seconds:.1f} s, minimizing "
                 f"{campaign.minimize_seconds:.1f} s), seed {campaign.seed}")
    return "\n".join(lines)
