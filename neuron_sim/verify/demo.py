"""``neuron-sim demo``: a short tour of the verifier on the six bundled examples.

Each stop says what the module does, which pass rewrites it, and what the verifier concludes:
CORRECT, or UNSOUND with the device that receives a wrong value, the output element, and the
source and target values. The UNSOUND verdicts are the point of the tour — the seed passes
really are unsafe there — so the demo succeeds (exit 0) when every verdict matches the one
documented here, and fails (exit 1) only if one does not. A component that is missing (a pass,
the examples directory) is reported in one sentence, with exit code 2.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from neuron_sim.hlo import HloModule, parse_module_file
from neuron_sim.passes import UnknownPassError, get_pass
from neuron_sim.verify.api import check_pass
from neuron_sim.verify.execution import Runner
from neuron_sim.verify.inputs import DEFAULT_TRIALS
from neuron_sim.verify.options import VerifyOptions
from neuron_sim.verify.report import device_text, summary_line
from neuron_sim.verify.result import Status, VerificationResult

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"

SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"
MULTIPLE = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"
DELETE = "aws_neuron_delete_permute"


@dataclass(frozen=True)
class DemoCase:
    example: str          # file stem in examples/
    title: str
    what: str             # what the module computes
    pass_key: str
    expected: Status
    why: str              # why the verdict is what it is


CASES = (
    DemoCase("ar_ds_single_group_sorted", "single-group fold, sorted group",
             "all-reduce over partitions {0,1,2,3}, then partition p keeps rows [2p, 2p+2) of "
             "the sum",
             SINGLE, Status.CORRECT,
             "in group {0,1,2,3} partition p sits at position p, so reduce-scatter hands it "
             "exactly block p"),
    DemoCase("ar_ds_single_group_unsorted", "single-group fold, unsorted group",
             "the same program over the group {1,0,2,3}",
             SINGLE, Status.UNSOUND,
             "the matcher never checks the group's order: reduce-scatter gives the device at "
             "position i block i, but partition 0 sits at position 1 and partition 1 at "
             "position 0, so they swap shards"),
    DemoCase("ar_ds_multi_group_contiguous", "multiple-groups fold, contiguous groups",
             "all-reduce within {0,1,2,3} and {4,5,6,7}; each partition slices by its rank "
             "from the offset table {0,1,2,3,0,1,2,3}",
             MULTIPLE, Status.CORRECT,
             "the table's entry for each partition is its position in its group"),
    DemoCase("ar_ds_multi_group_strided", "multiple-groups fold, strided groups",
             "the same program over the groups {0,2,4,6} and {1,3,5,7}",
             MULTIPLE, Status.UNSOUND,
             "nothing relates the offset table to the groups' members: partition 2 is at "
             "position 1 of {0,2,4,6} but the table says 2"),
    DemoCase("delete_permute_singleton_groups", "DeletePermute, singleton groups",
             "all-reduce over groups {0},{1},{2},{3} (each device alone), then negate",
             DELETE, Status.CORRECT,
             "an all-reduce over a group of one returns its operand: deleting it is safe"),
    DemoCase("delete_permute_real_all_reduce", "DeletePermute, a real all-reduce",
             "all-reduce over groups {0,1},{2,3}, then negate",
             DELETE, Status.UNSOUND,
             "DeletePermute deletes every all-reduce, including this one that sums over two "
             "devices"),
)


class DemoUnavailable(RuntimeError):
    """Something the demo needs is missing; the message says what."""


def _load(case: DemoCase, examples_dir: Path) -> tuple[Path, HloModule]:
    path = examples_dir / f"{case.example}.hlo"
    if not path.is_file():
        raise DemoUnavailable(f"example {path} is missing (run the demo from a source checkout)")
    return path, parse_module_file(str(path))


def _check(case: DemoCase, module: HloModule, runner: Runner | None, trials: int,
           seed: int) -> VerificationResult:
    try:
        hlo_pass = get_pass(case.pass_key)
    except UnknownPassError as exc:
        raise DemoUnavailable(f"pass {case.pass_key} is not available ({exc})") from exc
    return check_pass(module, [hlo_pass], options=VerifyOptions(trials=trials, seed=seed,
                                                                runner=runner))


def _verdict_lines(case: DemoCase, result: VerificationResult) -> list[str]:
    lines: list[str] = []
    expected = "as expected" if result.status is case.expected else \
        f"EXPECTED {case.expected.value}"
    if result.status is Status.CORRECT:
        lines.append(f"   verdict: CORRECT ({expected}) — {result.compared} input sets on "
                     f"topology {', '.join(map(str, result.topologies))}; every device agrees "
                     "bit for bit")
    elif result.status is Status.UNSOUND:
        cex = result.counterexample
        lines.append(f"   verdict: UNSOUND ({expected}) — {result.error_line}")
        if cex is not None and cex.device is not None:
            lines.append(f"     {device_text(cex.topology, cex.device)} on topology "
                         f"{cex.topology}, output index {list(cex.index)}: source "
                         f"{cex.source_value}, target {cex.target_value}")
            if cex.same_as_source_device is not None:
                lines.append(f"     device {cex.device}'s whole output is what the source "
                             f"computes for device {cex.same_as_source_device}")
            others = [d for d in cex.mismatch_devices if d != cex.device]
            if others:
                lines.append(f"     also wrong on device(s) {', '.join(map(str, others))}")
        elif cex is not None:
            lines.append(f"     {cex.message}")
        if result.minimized is not None:
            lines.append(f"     minimized counterexample: {result.minimized.size} instructions "
                         f"(from {result.minimized.original_size})")
    else:
        lines.append(f"   verdict: {result.status.value} ({expected}) — "
                     f"{result.error_line or ''} {result.detail}".rstrip())
    lines.append(f"   why: {case.why}")
    return lines


def run_demo(out: TextIO = sys.stdout, *, runner: Runner | None = None,
             examples_dir: Path | None = None, trials: int | None = None, seed: int = 0) -> int:
    """Print the tour; 0 if every verdict is the documented one, 1 if not, 2 if something is
    missing."""
    trials = trials or DEFAULT_TRIALS
    examples_dir = examples_dir or EXAMPLES_DIR
    print("neuron-sim demo: does a compiler pass preserve what every device computes?", file=out)
    print("Each example runs before and after the pass on every simulated device, with inputs "
          "that differ per device, and compares the outputs bit for bit.\n", file=out)
    results: list[VerificationResult] = []
    unexpected = 0
    started = time.perf_counter()
    for number, case in enumerate(CASES, start=1):
        try:
            path, module = _load(case, examples_dir)
            print(f"{number}. {case.title}  ({path.relative_to(examples_dir.parent)})", file=out)
            print(f"   program: {case.what}", file=out)
            print(f"   pass:    {case.pass_key}", file=out)
            result = _check(case, module, runner, trials, seed)
        except DemoUnavailable as exc:
            print(f"\nneuron-sim demo: cannot run: {exc}", file=out)
            return 2
        for line in result.rewrites:
            print(f"   rewrite: {line.split(': ', 1)[-1]}", file=out)
        for line in _verdict_lines(case, result):
            print(line, file=out)
        print(file=out)
        results.append(result)
        if result.status is not case.expected:
            unexpected += 1
    elapsed = time.perf_counter() - started
    print(summary_line(results) + f"  ({elapsed:.1f} s)", file=out)
    if unexpected:
        print(f"{unexpected} verdict(s) differ from the documented expectation.", file=out)
        return 1
    print("Every verdict is the expected one. Next: `neuron-sim verify MODULE.hlo --passes "
          "KEY --out DIR` writes a counterexample you can rerun; see docs/verify.md.", file=out)
    return 0
