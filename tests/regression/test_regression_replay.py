"""Every saved fuzz case under tests/data/regression/ replayed on each run of the suite.

A case directory (written by ``neuron-sim fuzz --corpus``) holds the minimized ``before.hlo``,
the pass's ``after.hlo``, the ``inputs.npz`` that show the failure and ``fuzz.json`` (the pass,
the class, the ERROR line, the topology). The replay asserts that the recorded verdict still
holds: the pass still rewrites ``before`` into ``after``, the pair is still UNSOUND with the
same ERROR line on the recorded inputs, and ``check_pass`` still finds it from scratch. The
cases are the seed passes' documented unsafeties (their docstrings and docs/passes.md), so a
faithful seed pass must keep failing them; a change that "fixes" one must move the case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_sim.hlo import parse_module_file
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology
from passes import PassContext
from verify.api import apply_passes, check_modules, check_pass, pass_list
from verify.result import Status

CASES = Path(__file__).resolve().parents[1] / "data" / "regression"
CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "fuzz.json").exists())


def test_there_are_saved_cases():
    assert len(CASE_DIRS) >= 3


@pytest.mark.parametrize("case", CASE_DIRS, ids=lambda p: p.name)
def test_saved_case_still_reproduces(case: Path):
    record = json.loads((case / "fuzz.json").read_text())
    before = parse_module_file(case / "before.hlo")
    after = parse_module_file(case / "after.hlo")
    topology = Topology.parse(record["topology"])
    arrays = read_npz(case / "inputs.npz")
    inputs = [arrays[f"arg{i}"] for i in range(len(before.entry.parameters))]

    target, changed, _ = apply_passes(before, pass_list(record["pass"]),
                                      PassContext(topology=topology))
    assert changed and target.to_text() == after.to_text()

    replay = check_modules(before, after, [topology], inputs=inputs, minimize=False)
    assert replay.status is Status.UNSOUND and replay.error_line == record["check"]

    fresh = check_pass(before, record["pass"], [topology], trials=2, minimize=False)
    assert fresh.status is Status.UNSOUND and fresh.error_line == record["check"]
    assert len(before.entry.instructions) <= 10
