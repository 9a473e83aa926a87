"""Every saved fuzz case under tests/data/regression/ replayed on each run of the suite.

A case directory (written by ``neuron-sim fuzz --corpus``) holds the minimized ``before.hlo``,
the pass's ``after.hlo``, the ``inputs.npz`` that show the failure and ``fuzz.json`` (the pass,
the class, the ERROR line, the topology). The replay asserts that the recorded verdict still
holds: the pass still rewrites ``before`` into ``after``, the pair is still UNSOUND with the
same ERROR line on the recorded inputs, and ``check_pass`` still finds it from scratch; and the
*reason*: each case isolates one documented unsafety of a seed pass (their docstrings and
docs/passes.md), checked by a control that differs from the case only in what the unsafety is
about. A faithful seed pass must keep failing them; a change that "fixes" one must move the
case.

The three cases were found and minimized, unaided, by ``neuron-sim fuzz --passes KEYS --time
60s --seed 0 --corpus DIR`` (8 devices) with KEYS the three seed passes of the REASONS table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import pytest

from neuron_sim.hlo import HloModule, parse_module, parse_module_file
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology
from neuron_sim.passes import PassContext
from neuron_sim.verify.api import VerifyOptions, apply_passes, check_modules, check_pass, pass_list
from neuron_sim.verify.fuzz.runner import run_campaign
from neuron_sim.verify.result import Status

CASES = Path(__file__).resolve().parents[1] / "data" / "regression"
CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "fuzz.json").exists())


def _with_groups(module: HloModule, groups: Sequence[Sequence[int]]) -> HloModule:
    """A copy of ``module`` whose one collective has the explicit ``groups`` instead."""
    copy = module.clone()
    (collective,) = [i for i in copy.entry.instructions if i.has("replica_groups")]
    collective.set_attr("replica_groups", ReplicaGroups.explicit(tuple(map(tuple, groups))))
    return parse_module(copy.to_text())


def _groups_of(module: HloModule) -> tuple[tuple[int, ...], ...]:
    return next(i.replica_groups.groups for i in module.entry.instructions
                if i.has("replica_groups"))


def _unsorted_group_is_the_cause(before: HloModule, topology: Topology, key: str) -> None:
    """The single-group matcher ignores the group's order. On 1 x P (partition-id is the
    flattened id, so nothing but the order can be wrong) the case's one group is unsorted, and
    the same module with the group sorted folds and verifies CORRECT."""
    assert topology.replica_count == 1
    (group,) = _groups_of(before)
    assert list(group) != sorted(group) and sorted(group) == list(range(topology.num_devices))
    control = _with_groups(before, [sorted(group)])
    result = check_pass(control, key, [topology], VerifyOptions(trials=2, minimize=False))
    assert result.changed and result.status is Status.CORRECT, result.detail


def _strided_groups_are_the_cause(before: HloModule, topology: Topology, key: str) -> None:
    """The multiple-groups matcher does not relate the pool to the groups' members: with the
    case's strided groups {{0,2,4,6},{1,3,5,7}} partition 2 sits at position 1 of its group,
    but the repeated pool {0,1,2,3,0,1,2,3} slices block 2 there (the pass's docstring
    example). The same module with the contiguous groups {{0,1,2,3},{4,5,6,7}} (where the
    pool is each partition's position) verifies CORRECT."""
    groups = _groups_of(before)
    width = len(groups[0])
    n = width * len(groups)
    assert groups == tuple(tuple(range(g, n, len(groups))) for g in range(len(groups)))
    assert len(groups) > 1
    contiguous = [range(g * width, (g + 1) * width) for g in range(len(groups))]
    result = check_pass(_with_groups(before, contiguous), key, [topology],
                        VerifyOptions(trials=2, minimize=False))
    assert result.changed and result.status is Status.CORRECT, result.detail


def _deleted_collective_is_real(before: HloModule, topology: Topology, key: str) -> None:
    """DeletePermute deletes every all-reduce and collective-permute. The case's all-reduce,
    on 8 devices (1 x 8), sums over one group of all 8 flattened ids — no singleton groups,
    which is also why the minimizer cannot take devices away — so the guarded variant, which
    deletes only identities, leaves it."""
    assert topology.num_devices == 8
    assert all(len(g) > 1 for g in _groups_of(before))
    _, changed, _ = apply_passes(before, pass_list("delete_permute_guarded"),
                                 PassContext(topology=topology))
    assert not changed


REASONS: dict[str, Callable[[HloModule, Topology, str], None]] = {
    "aws_neuron_rewrite_all_reduce_dynamic_slice": _unsorted_group_is_the_cause,
    "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups": _strided_groups_are_the_cause,
    "aws_neuron_delete_permute": _deleted_collective_is_real,
}


def test_there_is_a_saved_case_for_each_seed_bug():
    assert sorted(json.loads((c / "fuzz.json").read_text())["pass"] for c in CASE_DIRS) == \
        sorted(REASONS)


@pytest.mark.parametrize("case", CASE_DIRS, ids=lambda p: p.name)
def test_saved_case_still_reproduces_for_its_reason(case: Path):
    record = json.loads((case / "fuzz.json").read_text())
    before = parse_module_file(case / "before.hlo")
    after = parse_module_file(case / "after.hlo")
    topology = Topology.parse(record["topology"])
    arrays = read_npz(case / "inputs.npz")
    inputs = [arrays[f"arg{i}"] for i in range(len(before.entry.parameters))]
    assert len(before.entry.instructions) <= 10

    target, changed, _ = apply_passes(before, pass_list(record["pass"]),
                                      PassContext(topology=topology))
    assert changed and target.to_text() == after.to_text()

    replay = check_modules(before, after, [topology], VerifyOptions(inputs=inputs, minimize=False))
    assert replay.status is Status.UNSOUND and replay.error_line == record["check"]

    fresh = check_pass(before, record["pass"], [topology], VerifyOptions(trials=2, minimize=False))
    assert fresh.status is Status.UNSOUND and fresh.error_line == record["check"]

    REASONS[record["pass"]](before, topology, record["pass"])


def test_the_seed_0_campaign_rediscovers_the_first_case(tmp_path):
    """The 60 s campaign's first minimized failure is drawn at module 1; its first 12 modules
    (with the timed campaign's minimizing budget, counted in modules) give the same case byte
    for byte. (The other two appear at modules 174 and 360: about 8 s, left to the command.)"""
    single = "aws_neuron_rewrite_all_reduce_dynamic_slice"
    campaign = run_campaign([single, single + "_multiple_groups", "aws_neuron_delete_permute"],
                            examples=12, seed=0, minimize_budget=True, corpus=tmp_path)
    found = {(Path(f.directory) / "before.hlo").read_text() for f in campaign.failures}
    saved = [c for c in CASE_DIRS if json.loads((c / "fuzz.json").read_text())["pass"] == single]
    assert (saved[0] / "before.hlo").read_text() in found
