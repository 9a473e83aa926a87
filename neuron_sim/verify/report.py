"""Alive2-style reports: text for people, JSON for tools, and a counterexample directory.

A text report is a block per verified pair: what was checked, the ``ERROR:`` line of the first
failed check, the counterexample (topology, device as flattened id and (replica, partition),
output leaf and index, source and target values, the inputs, the instructions that lead
there), and the verdict. ``summary_line`` gives the one Summary line for several results.

``write_counterexample(result, out_dir)`` writes what a user needs to reproduce a verdict
without us: ``before.hlo``, ``after.hlo`` (the minimized pair when there is one),
``inputs.npz`` (``arg{i}`` stacked ``[D, *shape]``), ``report.json`` and ``reproduce.sh``
(the exact ``neuron-sim verify`` command).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.hlo.ir import HloModule
from neuron_sim.io import write_npz
from neuron_sim.outputs import atomic_write_text, make_output_directory
from neuron_sim.sizes import format_bytes
from neuron_sim.topology import Topology
from neuron_sim.verify.compare import format_array
from neuron_sim.verify.checks import VALUE_MISMATCH
from neuron_sim.verify.result import Counterexample, Status, TopologyVerdict, VerificationResult
from neuron_sim.verify.inputs import describe_style, distinct_rows, input_arrays

RULE = "-" * 40


def summary_counts(results: Iterable[VerificationResult]) -> dict[str, int]:
    counts = {status.value: 0 for status in Status}
    for result in results:
        counts[result.status.value] += 1
    return counts


def summary_line(results: Sequence[VerificationResult]) -> str:
    """``Summary: 1 correct, 1 unsound, 0 failed to prove, 0 errors``."""
    c = summary_counts(results)
    return (f"Summary: {c['CORRECT']} correct, {c['UNSOUND']} unsound, "
            f"{c['FAILED_TO_PROVE']} failed to prove, {c['ERROR']} errors")


def exit_code(results: Sequence[VerificationResult]) -> int:
    """0 all correct, 1 any unsound, 2 otherwise (an error, or nothing could be proved)."""
    statuses = {r.status for r in results}
    if Status.UNSOUND in statuses:
        return 1
    if statuses <= {Status.CORRECT}:
        return 0
    return 2


def topology_text(topology: Topology) -> str:
    return f"{topology} ({topology.num_devices} device{'s' if topology.num_devices != 1 else ''})"


def device_text(topology: Topology, device: int) -> str:
    r, p = topology.replica_partition(device)
    return f"device {device} (replica {r}, partition {p})"


def what_was_checked(result: VerificationResult) -> str:
    what = ", ".join(result.passes) if result.passes else "before vs after"
    topologies = ", ".join(str(t) for t in result.topologies)
    trials = "given inputs" if result.trials == 1 and result.counterexample is not None and \
        result.counterexample.style == "given" else f"{result.trials} input sets per topology"
    return f"{result.name}: {what} on topology {topologies} ({trials}, contract {result.contract})"


def format_inputs(module: HloModule, inputs: Sequence[Any], *, limit_devices: int = 8,
                  indent: str = "  ") -> list[str]:
    lines = []
    for param, value in zip(module.entry.parameters, inputs):
        lines.append(f"{indent}%{param.name} = {param.shape} parameter({param.parameter_number})")
        leaves = list(value) if isinstance(value, tuple) else [value]
        for j, leaf in enumerate(leaves):
            leaf = np.asarray(leaf)
            tag = f" leaf {j}" if len(leaves) > 1 else ""
            rows = leaf.shape[0] if leaf.ndim else 0
            if rows and (leaf[0].size == 0 or distinct_rows(leaf) == 1):
                lines.append(f"{indent}  every device{tag}: {format_array(leaf[0])}")
                continue
            for f in range(min(rows, limit_devices)):
                lines.append(f"{indent}  device {f}{tag}: {format_array(leaf[f])}")
            if rows > limit_devices:
                lines.append(f"{indent}  ... ({rows - limit_devices} more devices)")
    return lines


def format_counterexample(cex: Counterexample, before: HloModule, after: HloModule, *,
                          inputs: bool = True, paths: bool = True) -> list[str]:
    """The counterexample block (without the ERROR line)."""
    lines: list[str] = []
    kind = "exactly representable inputs" if cex.exact else \
        ("the given inputs" if cex.style == "given" else f"inputs {describe_style(cex.style)}")
    if cex.check != VALUE_MISMATCH:
        lines.append(f"{cex.message}")
        lines.append(f"on topology {topology_text(cex.topology)}"
                     + (f", with {kind}" if cex.inputs else ""))
    else:
        lines.append(f"Example ({kind}):")
        lines.append(f"  topology {topology_text(cex.topology)}, "
                     f"{device_text(cex.topology, cex.device)}")
        lines.append(f"  output {cex.leaf} ({cex.leaf_shape}), index {list(cex.index)}")
        lines.append(f"    source: {cex.source_value}")
        lines.append(f"    target: {cex.target_value}")
        if cex.source_device_values is not None and cex.source_device_values.size > 1:
            lines.append(f"  output {cex.leaf} on device {cex.device}:")
            lines.append(f"    source: {format_array(cex.source_device_values)}")
            lines.append(f"    target: {format_array(cex.target_device_values)}")
        if cex.same_as_source_device is not None:
            lines.append(f"  the target gives device {cex.device} what the source computes on "
                         f"{device_text(cex.topology, cex.same_as_source_device)}")
        devices = ", ".join(map(str, cex.mismatch_devices))
        lines.append(f"  wrong on device(s) {devices} ({cex.mismatch_count} element(s))")
        if not cex.exact:
            lines.append("  (the difference does not show on exactly representable inputs: it "
                         "needs these values)")
    if inputs and cex.inputs:
        lines.append("Inputs:")
        lines.extend(format_inputs(before, cex.inputs))
    if paths and (cex.source_path or cex.target_path):
        lines.append(f"Source instructions that lead to output {cex.leaf if cex.leaf is not None else 0}:")
        lines.extend("  " + text for text in cex.source_path)
        lines.append("Target instructions:")
        lines.extend("  " + text for text in cex.target_path)
    return lines


def format_result(result: VerificationResult, *, show_modules: bool = False) -> str:
    """The text block for one result."""
    lines = [RULE, what_was_checked(result)]
    per_topology = [(v.topology, v.rewrites) for v in result.topology_results if v.rewrites]
    if len({tuple(rewrites) for _, rewrites in per_topology}) > 1:  # they differ: say each
        lines.extend(f"  rewrite on {topology}: {line}"
                     for topology, rewrites in per_topology for line in rewrites)
    else:
        lines.extend(f"  rewrite: {line}" for line in result.rewrites)
    if result.changed is False:
        lines.append("  (no change)")
    for warning in result.warnings:
        lines.append(f"WARNING: {warning}")
    for note in result.notes:
        lines.append(f"NOTE: {note}")
    if result.error_line:
        lines.append("")
        lines.append(result.error_line)
    before, after, cex = result.reported
    if cex is not None:
        lines.extend(format_counterexample(cex, before, after))
    elif result.detail:
        lines.append(result.detail)
    if result.minimized is not None:
        m = result.minimized
        lines.append(f"Minimized: {m.original_size} -> {m.size} entry instructions in "
                     f"{m.steps} simplification step(s), inputs included; the example above "
                     "and the modules below are the minimized ones")
    if show_modules or (result.minimized is not None and result.status is Status.UNSOUND):
        lines.append("Before:")
        lines.extend("  " + line for line in before.to_text().rstrip().splitlines())
        lines.append("After:")
        lines.extend("  " + line for line in after.to_text().rstrip().splitlines())
    if len(result.topology_results) > 1:
        lines.append("")
        lines.extend(topology_line(verdict) for verdict in result.topology_results)
    proofs = [line for verdict in result.topology_results for line in proof_lines(verdict)]
    if proofs and result.status is Status.CORRECT and result.changed is not False:
        lines.append("")
        lines.extend(proofs)
    lines.append("")
    lines.append(verdict_sentence(result))
    return "\n".join(lines)


_METHODS = {"positions": "on symbolic positions (one term per output, memory independent of "
                         "the tensors' size)",
            "elements": "on symbolic elements (a term per element)"}


def proof_lines(verdict: TopologyVerdict) -> list[str]:
    """What the proof established on one topology, per output, with its time and memory."""
    if verdict.proof is None or verdict.proof_method is None:
        return []
    what = proof_kind(verdict.proof, verdict.proof_iterations)
    if verdict.proof_held:
        held = ", ".join(str(n) for n in verdict.proof_held)
        what += (f" (parameter(s) {held} of the compared source held at the values the rewrite "
                 "folded into the target, checked against what the source allows)")
    memory = f", peak memory {format_bytes(verdict.proof_bytes)}" if verdict.proof_bytes else ""
    lines = [f"Proof on {verdict.topology}: {what}, "
             f"{_METHODS.get(verdict.proof_method, verdict.proof_method)} "
             f"({verdict.proof_seconds:.2f} s{memory})"]
    for output in verdict.proof_outputs:
        kind = proof_kind(output["proof"], output.get("iterations"))
        took = f" ({output['seconds']:.2f} s, {output['z3_queries']} z3 queries)" \
            if "seconds" in output else ""
        why = f": {output['reason']}" if output.get("reason") else ""
        lines.append(f"  output {output['output']} ({output['shape']}): {kind}{took}{why}")
    return lines


def proof_kind(proof: str | None, iterations: int | None = None) -> str:
    """What a proof covers, in words: "all inputs", "all inputs up to N loop iterations"
    (every input on which each loop whose condition depends on the inputs ends within N
    iterations), or the kind as it is ("sampled")."""
    if proof == "all-inputs":
        return "all inputs"
    if proof == "bounded":
        return f"all inputs up to {iterations} loop iterations"
    return str(proof)


def topology_line(verdict: TopologyVerdict) -> str:
    """``topology 2x2 (4 devices): UNSOUND, ERROR: Value mismatch`` — one topology's verdict."""
    if verdict.status is Status.CORRECT:
        outcome = f"CORRECT, {verdict.compared} executions compared" if verdict.compared else \
            "CORRECT" + (", no change" if verdict.changed is False else "")
        if verdict.proof in ("all-inputs", "bounded") and verdict.changed is not False:
            outcome += ", proved for " + proof_kind(verdict.proof, verdict.proof_iterations)
    else:
        outcome = ", ".join(filter(None, (verdict.status.value, verdict.error_line)))
    return f"topology {topology_text(verdict.topology)}: {outcome}"


def verdict_sentence(result: VerificationResult) -> str:
    if result.status is Status.CORRECT and result.proof in ("all-inputs", "bounded") \
            and result.changed is not False:
        sampled = verdict_sentence_sampled(result)
        proved = (f"proved for {proof_kind(result.proof, result.proof_iterations)} on every "
                  "topology, up to the reassociation of reductions")
        return sampled[:-1] + f"; {proved})" if sampled.endswith(")") else f"{sampled} ({proved})"
    return verdict_sentence_sampled(result)


def verdict_sentence_sampled(result: VerificationResult) -> str:
    """The result sentence without the proof for all inputs."""
    if result.status is Status.CORRECT:
        if result.classification == "reassociation":
            return "Result: CORRECT (up to reassociation of a reduction)"
        return f"Result: CORRECT ({result.compared} executions compared, no difference)" \
            if result.compared else "Result: CORRECT"
    return f"Result: {result.status.value}"


# --------------------------------------------------------------------------------------------
# JSON.


def counterexample_json(cex: Counterexample | None) -> dict | None:
    if cex is None:
        return None
    rp = cex.replica_partition
    return {
        "check": cex.check, "topology": str(cex.topology),
        "replica_count": cex.topology.replica_count,
        "num_partitions": cex.topology.num_partitions,
        "device": cex.device, "replica": rp[0] if rp else None,
        "partition": rp[1] if rp else None, "output": cex.leaf, "index": list(cex.index),
        "output_shape": cex.leaf_shape, "source": cex.source_value, "target": cex.target_value,
        "wrong_devices": cex.mismatch_devices, "wrong_elements": cex.mismatch_count,
        "same_as_source_device": cex.same_as_source_device,
        "inputs": cex.style, "exactly_representable": cex.exact, "message": cex.message,
        "source_instructions": cex.source_path, "target_instructions": cex.target_path,
    }


def topology_json(verdict: TopologyVerdict) -> dict:
    """One topology's verdict (its counterexample as found, before any minimization)."""
    return {
        "topology": str(verdict.topology), "status": verdict.status.value,
        "error": verdict.error_line, "detail": verdict.detail, "compared": verdict.compared,
        "classification": verdict.classification, "warnings": verdict.warnings,
        "notes": verdict.notes, "changed": verdict.changed, "rewrites": verdict.rewrites,
        "counterexample": counterexample_json(verdict.counterexample),
        "proof": verdict.proof, "proof_terms": verdict.proof_terms,
        "proof_method": verdict.proof_method, "proof_seconds": round(verdict.proof_seconds, 4),
        "proof_bytes": verdict.proof_bytes, "proof_outputs": verdict.proof_outputs,
        "proof_iterations": verdict.proof_iterations, "proof_held": list(verdict.proof_held),
        "devices_executed": verdict.devices_executed,
    }


def result_json(result: VerificationResult, *, include_modules: bool = False) -> dict:
    before, after, cex = result.reported
    detail = cex.summary() if result.minimized is not None and cex is not None else result.detail
    data: dict[str, Any] = {
        "name": result.name, "status": result.status.value, "error": result.error_line,
        "detail": detail, "passes": result.passes, "rewrites": result.rewrites,
        "changed": result.changed, "topologies": [str(t) for t in result.topologies],
        "contract": str(result.contract), "trials": result.trials, "seed": result.seed,
        "compared": result.compared, "classification": result.classification,
        "proof": result.proof, "proof_iterations": result.proof_iterations,
        "warnings": result.warnings, "notes": result.notes,
        "counterexample": counterexample_json(cex),
        "topology_results": [topology_json(v) for v in result.topology_results],
    }
    if result.minimized is not None:
        data["minimized"] = {"original_size": result.minimized.original_size,
                             "size": result.minimized.size, "steps": result.minimized.steps}
    if include_modules or result.minimized is not None:
        data["before"] = before.to_text()
        data["after"] = after.to_text()
    return data


# --------------------------------------------------------------------------------------------
# The counterexample directory.


def topology_arguments(topology: Topology) -> list[str]:
    args = ["--replicas", str(topology.replica_count), "--partitions", str(topology.num_partitions)]
    if topology.device_assignment is not None:
        args += ["--device-assignment",
                 "{" + ",".join("{" + ",".join(map(str, row)) + "}"
                                for row in topology.device_assignment) + "}"]
    return args


def reproduce_command(before_path: str, after_path: str, topology: Topology,
                      inputs_path: str | None, contract: Any) -> str:
    """The ``neuron-sim verify`` command line for the pair on ``topology`` (``contract``: a
    ``neuron_sim.passes.contracts`` object or its name)."""
    args = ["neuron-sim", "verify", before_path, after_path, *topology_arguments(topology)]
    if inputs_path is not None:
        args += ["--inputs", inputs_path]
    if str(contract) != "exact":
        args += ["--contract", str(contract)]
    return " ".join(shlex.quote(a) for a in args)


def write_counterexample(result: VerificationResult, out_dir: str | Path) -> dict[str, str]:
    """Write before.hlo, after.hlo, inputs.npz (if inputs), report.json and reproduce.sh into
    ``out_dir``, which must be new or empty (created if needed): every file is created, none
    replaced (``neuron_sim.outputs``; OutputError otherwise). Returns {file role: path}."""
    out = make_output_directory(out_dir)
    before, after, cex = result.reported
    written: dict[str, str] = {}
    atomic_write_text(out / "before.hlo", before.to_text(), exclusive=True)
    atomic_write_text(out / "after.hlo", after.to_text(), exclusive=True)
    written["before"] = str(out / "before.hlo")
    written["after"] = str(out / "after.hlo")
    inputs_name = None
    if cex is not None and cex.inputs:
        write_npz(out / "inputs.npz", input_arrays(cex.inputs), exclusive=True)
        written["inputs"] = str(out / "inputs.npz")
        inputs_name = "inputs.npz"
    topology = cex.topology if cex is not None else result.topologies[0]
    local = reproduce_command("before.hlo", "after.hlo", topology, inputs_name, result.contract)
    command = reproduce_command(str(out / "before.hlo"), str(out / "after.hlo"), topology,
                                str(out / "inputs.npz") if inputs_name else None,
                                result.contract)
    script = ("#!/bin/sh\n# Reproduces the verdict: " + (result.error_line or result.status.value)
              + "\ncd \"$(dirname \"$0\")\" && exec " + local + "\n")
    atomic_write_text(out / "reproduce.sh", script, mode=0o777, exclusive=True)
    written["reproduce"] = str(out / "reproduce.sh")
    data = result_json(result, include_modules=False)
    data["reproduce"] = command
    data["files"] = {k: Path(v).name for k, v in written.items()}
    atomic_write_text(out / "report.json", json.dumps(data, indent=2) + "\n", exclusive=True)
    written["report"] = str(out / "report.json")
    return written


# --------------------------------------------------------------------------------------------
# Pair files: two modules in one file, with the expected verdict in a comment header.


def read_pair_file(path: str | Path) -> tuple[HloModule, HloModule, dict[str, str]]:
    """Parse a before/after pair file: ``// key: value`` header lines, then two ``HloModule``
    texts (before, then after). Returns (before, after, header); keys are lower case
    (``status``, ``error``, ``classification``, ``contract``, ``topologies``...)."""
    from neuron_sim.hlo.parser import parse_module

    text = Path(path).read_text()
    header: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("HloModule"):
            break
        if stripped.startswith("//") and ":" in stripped:
            key, _, value = stripped[2:].partition(":")
            key = key.strip().lower()
            if key and " " not in key:
                header[key] = value.strip()
    starts = [i for i, line in enumerate(text.splitlines(keepends=True))
              if line.startswith("HloModule")]
    if len(starts) != 2:
        raise UserError(f"{path}: a pair file holds exactly two modules, found {len(starts)}")
    lines = text.splitlines(keepends=True)
    before_text = "".join(lines[starts[0]:starts[1]])
    after_text = "".join(lines[starts[1]:])
    # Keep line numbers in parse errors right by padding with the lines before each module.
    before = parse_module("\n" * starts[0] + before_text, str(path))
    after = parse_module("\n" * starts[1] + after_text, str(path))
    return before, after, header
