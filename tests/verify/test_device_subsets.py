"""A sampled run at real size on the devices whose results do not depend on the rest
(``neuron_sim.verify.device_subsets``): which devices are closed under a pair's collectives,
and verify executing only them when the whole topology does not fit in ``max_memory``.
Expected values are derived by hand in each docstring."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from neuron_sim.cli import main
from neuron_sim.hlo import parse_module
from neuron_sim.interpreter.memory import MemoryLimitExceeded
from neuron_sim.topology import Topology
from neuron_sim.verify import Status, VerifyOptions
from neuron_sim.verify.device_subsets import components, executable_subset, needed_bytes
from neuron_sim.verify.report import format_result, result_json
from neuron_sim.verify.verifier import Verifier

MODULE = """HloModule dp_tp, num_partitions=8
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[SIZE] parameter(0)
  b = f32[SIZE,256] broadcast(x), dimensions={0}
  r = f32[SIZE,256] all-reduce(b), channel_id=1, replica_groups=GROUPS, use_global_device_ids=true, to_apply=add
  ROOT n = f32[SIZE,256] negate(r)
}
"""
PAIRS = "{{0,1},{2,3},{4,5},{6,7}}"
TOPOLOGY = Topology(1, 8)


def module(groups: str = PAIRS, size: int = 256):
    """Each device broadcasts its x (f32[size]) to [size, 256], all-reduces it within
    ``groups`` and negates it: the run's values are 256 times its inputs."""
    return parse_module(MODULE.replace("GROUPS", groups).replace("SIZE", str(size)))


def negated_by_multiply():
    """The same values as negate(r) for every input: r * -1 flips the sign bit of every
    finite value, infinity and zero; a NaN stays a NaN (exactly compared: same bits here since
    the all-reduce of drawn inputs yields no NaN)."""
    return parse_module(MODULE.replace("GROUPS", PAIRS).replace("SIZE", "256").replace(
        "ROOT n = f32[256,256] negate(r)",
        "m1 = f32[] constant(-1)\n  m = f32[256,256] broadcast(m1), dimensions={}\n"
        "  ROOT n = f32[256,256] multiply(r, m)"))


def test_components_join_the_members_of_each_group_and_each_permute_pair():
    """Groups {0,1},{2,3},{4,5},{6,7}: four components, each labelled by its smallest id.
    Adding a permute 1->2 and 5->7 joins {0,1,2,3} and {4,5,6,7}."""
    assert components([module()], TOPOLOGY).tolist() == [0, 0, 2, 2, 4, 4, 6, 6]
    permute = parse_module(MODULE.replace("GROUPS", PAIRS).replace("SIZE", "256").replace(
        "ROOT n = f32[256,256] negate(r)",
        "ROOT n = f32[256,256] collective-permute(r), channel_id=2, "
        "source_target_pairs={{1,2},{5,7}}"))
    assert components([permute], TOPOLOGY).tolist() == [0, 0, 0, 0, 4, 4, 4, 4]


def test_a_collective_over_every_device_leaves_no_subset():
    """One group of all eight devices: one component, so nothing smaller can run."""
    whole = module("{{0,1,2,3,4,5,6,7}}")
    assert set(components([whole], TOPOLOGY).tolist()) == {0}
    assert executable_subset([whole], TOPOLOGY, 1 << 40) is None


def test_the_subset_takes_the_first_and_last_components_that_fit():
    """With room for four devices but not six: the component of device 0 ({0,1}), then the
    one of the last device ({6,7}); the next ({2,3}) would make six."""
    pair = [module(), negated_by_multiply()]
    four, six = needed_bytes(pair, TOPOLOGY, 4), needed_bytes(pair, TOPOLOGY, 6)
    assert four < six
    assert executable_subset(pair, TOPOLOGY, four).tolist() == [0, 1, 6, 7]
    assert executable_subset(pair, TOPOLOGY, needed_bytes(pair, TOPOLOGY, 2)).tolist() == [0, 1]
    assert executable_subset(pair, TOPOLOGY, needed_bytes(pair, TOPOLOGY, 2) - 1) is None


def options(limit: int) -> VerifyOptions:
    return VerifyOptions(topologies=["1x8"], max_memory=limit, proof="sampled", trials=3,
                         minimize=False)


def test_verify_runs_a_correct_pair_on_the_devices_that_fit():
    """Too large for 8 devices, room for 4: CORRECT, sampled, executed on devices 0, 1, 6, 7
    (the rule above), said in the note and in the JSON."""
    source, target = module(), negated_by_multiply()
    limit = needed_bytes([source, target], TOPOLOGY, 4)
    result = Verifier(options(limit)).check_modules(source, target)
    assert result.status is Status.CORRECT, result.detail
    (verdict,) = result.topology_results
    assert verdict.proof == "sampled" and verdict.devices_executed == [0, 1, 6, 7]
    assert "executed on 4 of the 8 devices of topology 1x8 (devices 0-1, 6-7)" in \
        format_result(result)
    assert result_json(result)["topology_results"][0]["devices_executed"] == [0, 1, 6, 7]


def test_verify_finds_a_wrong_group_on_the_devices_it_runs():
    """The target sums groups {0,1,2,3},{4,5,6,7} instead of pairs. Over both modules the
    components are {0..3} and {4..7}; with room for four devices, {0,1,2,3} runs. On device 0
    the source gives -(x0 + x1) and the target -(x0 + x1 + x2 + x3): UNSOUND, the
    counterexample on a device that ran, and its inputs for every device (replayable on the
    whole topology)."""
    source, target = module(), module("{{0,1,2,3},{4,5,6,7}}")
    limit = needed_bytes([source, target], TOPOLOGY, 4)
    result = Verifier(options(limit)).check_modules(source, target)
    assert result.status is Status.UNSOUND
    (verdict,) = result.topology_results
    assert verdict.devices_executed == [0, 1, 2, 3]
    cex = verdict.counterexample
    assert cex.device in (0, 1, 2, 3)
    x = np.asarray(cex.inputs[0])
    assert x.shape == (8, 256)
    d, i = cex.device, cex.index[0]
    pair = (d // 2) * 2
    assert float(cex.source_value) == -np.float32(x[pair][i] + x[pair + 1][i])
    assert float(cex.target_value) == -np.float32(
        np.float32(np.float32(x[0][i] + x[1][i]) + x[2][i]) + x[3][i])


def test_without_a_subset_that_fits_the_source_is_refused_as_before():
    """One group of all devices: nothing smaller than the topology is closed, so the source
    is refused with the memory sentence, which says so."""
    source = module("{{0,1,2,3,4,5,6,7}}")
    limit = needed_bytes([source], TOPOLOGY, 4)
    with pytest.raises(MemoryLimitExceeded) as caught:
        Verifier(options(limit)).check_modules(source, source.clone())
    assert "no set of devices smaller than all of them is closed under the pair's collectives" \
        in str(caught.value)


def test_the_command_runs_the_subset(tmp_path, monkeypatch, capsys):
    """``neuron-sim verify`` end to end. Values of f32[4096,256] (4 MiB) on 8 devices: the
    run needs 192 MiB by the estimate; under 100 MiB the pair of identical modules runs on
    devices 0 and 1 (81 MiB with the inputs and outputs of every device; four devices would
    need 129 MiB)."""
    text = MODULE.replace("GROUPS", PAIRS).replace("SIZE", "4096")
    (tmp_path / "m.hlo").write_text(text)
    monkeypatch.chdir(tmp_path)
    code = main(["verify", "m.hlo", "m.hlo", "--max-memory", "100M", "--trials", "1",
                 "--proof", "sampled", "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "CORRECT"
    assert data["topology_results"][0]["devices_executed"] == [0, 1]


def test_the_progress_runner_passes_the_devices_on(monkeypatch):
    """On a terminal the command wraps its runner to show progress; the wrapper still takes
    ``devices`` and hands them to the runner."""
    from neuron_sim.verify import commands

    @contextlib.contextmanager
    def terminal(columns, description):
        yield lambda **changes: None

    monkeypatch.setattr(commands, "terminal_progress", terminal)
    seen = []

    def runner(module, inputs, topology, seed, *, devices=None):
        seen.append(devices)
        return []

    runner.takes_devices = True
    with commands._progress(runner, "m.hlo") as shown:
        assert shown is not runner and shown.takes_devices
        shown(module(), [], TOPOLOGY, 0, devices=np.array([0, 1]))
        shown(module(), [], TOPOLOGY, 0)
    assert [None if d is None else d.tolist() for d in seen] == [[0, 1], None]
