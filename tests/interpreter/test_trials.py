"""Several input sets in one execute (``neuron_sim.interpreter.trials``) give what separate
executes give, bit for bit: over the front ends' corpora (JAX 0.10 and 0.12, PyTorch/XLA), and
on hand-derived collectives whose groups must not cross trials."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import DATA, runnable_corpus
from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.interpreter.errors import InterpreterError, Unimplemented
from neuron_sim.interpreter.trials import execute_trials
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology

CORPUS = runnable_corpus()


def _rolled(inputs: dict[str, np.ndarray], devices: int) -> dict[str, np.ndarray]:
    """A second input set of the same values: every per-device input's rows rolled by one
    device (an input given once is left as it is)."""
    return {k: np.roll(v, 1, axis=0) if v.ndim and v.shape[0] == devices else v
            for k, v in inputs.items()}


@pytest.mark.parametrize("name,path,data", CORPUS, ids=[c[0] for c in CORPUS])
def test_the_corpora_give_each_trial_its_own_run(name: str, path: Path, data: Path) -> None:
    module = parse_module_file(path)
    devices = module.replica_count * module.num_partitions
    first = {k: v for k, v in read_npz(data).items() if k.startswith("arg")}
    sets = [_rolled(first, devices), first]
    try:
        alone = [interpreter.run(parse_module_file(path), inputs) for inputs in sets]
    except InterpreterError as error:  # rolled rows that do not fit (ragged sizes): twice
        sets = [first, first]
        alone = [interpreter.run(parse_module_file(path), first)] * 2
        assert "ragged" in str(error)
    try:
        together = execute_trials(module, sets)
    except Unimplemented as refused:
        assert "send" in str(refused) or "recv" in str(refused)
        return
    assert len(together) == len(alone)
    for t, (got, want) in enumerate(zip(together, alone)):
        assert len(got) == len(want)
        for j, (a, b) in enumerate(zip(got, want)):
            assert a.shape == b.shape and a.dtype == b.dtype, (t, j)
            assert a.tobytes() == b.tobytes(), (t, j)


SUM = """HloModule m, replica_count=2, num_partitions=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[] parameter(0)
  all = f32[] all-reduce(x), replica_groups={}, to_apply=add
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  ROOT t = (f32[], u32[], u32[]) tuple(all, pid, rid)
}
"""


def test_a_collective_never_groups_rows_of_two_trials() -> None:
    """A cross-replica all-reduce with empty groups on 2 replicas x 2 partitions sums over the
    replicas of each partition: devices {0, 2} and {1, 3}. Trial 0 gives x = [1, 2, 3, 4]:
    sums 1 + 3 = 4 and 2 + 4 = 6; trial 1 gives [10, 20, 30, 40]: 40 and 60 (groups crossing
    trials would add the two). Partition ids are d % 2 = [0, 1, 0, 1] and replica ids
    d // 2 = [0, 0, 1, 1] in every trial."""
    sets = [[np.array([1, 2, 3, 4], np.float32)], [np.array([10, 20, 30, 40], np.float32)]]
    first, second = execute_trials(SUM, sets)
    assert first[0].tolist() == [4, 6, 4, 6] and second[0].tolist() == [40, 60, 40, 60]
    for outputs in (first, second):
        assert outputs[1].tolist() == [0, 1, 0, 1] and outputs[2].tolist() == [0, 0, 1, 1]


PERMUTE = """HloModule m, num_partitions=4

ENTRY main {
  x = s32[] parameter(0)
  ROOT p = s32[] collective-permute(x), channel_id=1, source_target_pairs={{0,1},{1,2},{2,0}}
}
"""


def test_a_permute_sends_within_its_trial_and_zeros_a_device_in_no_pair() -> None:
    """Pairs 0->1, 1->2, 2->0 on 4 partitions: device 1 gets x0, 2 gets x1, 0 gets x2, and
    device 3 (no pair targets it) gets 0. Trial 0: x = [5, 6, 7, 8] -> [7, 5, 6, 0]; trial 1:
    [50, 60, 70, 80] -> [70, 50, 60, 0]."""
    sets = [[np.array([5, 6, 7, 8], np.int32)], [np.array([50, 60, 70, 80], np.int32)]]
    (first,), (second,) = execute_trials(PERMUTE, sets)
    assert first.tolist() == [7, 5, 6, 0] and second.tolist() == [70, 50, 60, 0]


def test_a_topology_is_given_as_for_one_execute() -> None:
    """The same module on 1 replica x 4 partitions: the all-reduce's groups are single
    devices, so every device keeps its x; partition ids 0..3, replica ids 0."""
    sets = [[np.array([1, 2, 3, 4], np.float32)], [np.array([5, 6, 7, 8], np.float32)]]
    first, second = execute_trials(SUM, sets, topology=Topology(1, 4))
    assert first[0].tolist() == [1, 2, 3, 4] and second[0].tolist() == [5, 6, 7, 8]
    assert second[1].tolist() == [0, 1, 2, 3] and second[2].tolist() == [0, 0, 0, 0]


def test_outputs_are_each_trials_own_arrays() -> None:
    """An input given once and returned as it is (held once for both trials) comes out as
    separate arrays the caller may write: writing trial 0's leaves trial 1's as it was."""
    module = "HloModule m, num_partitions=2\nENTRY main {\n  ROOT x = f32[2] parameter(0)\n}\n"
    x = np.array([1, 2], np.float32)
    (a,), (b,) = execute_trials(module, [[x], [x]])
    a[0, 0] = 99
    assert b.tolist() == [[1, 2], [1, 2]] and x.tolist() == [1, 2]


def test_send_and_recv_are_not_run_on_several_input_sets() -> None:
    module = parse_module_file(DATA / "torch_xla" / "send_recv_ring.paired.hlo")
    with pytest.raises(Unimplemented, match="send|recv"):
        execute_trials(module, [{}, {}], seed=0)


def test_the_memory_limit_counts_every_set_s_devices() -> None:
    """A limit that one set of an f32[65536] negate on 2 devices fits (the module's own
    estimate for its topology) is too small for 4 sets at once, which hold 4 x 2 rows: the
    run is refused before it starts, as ``execute`` refuses a module that does not fit."""
    from neuron_sim.interpreter.memory import MemoryLimitExceeded, estimate_memory

    text = ("HloModule m, num_partitions=2\nENTRY main {\n  x = f32[65536] parameter(0)\n"
            "  ROOT n = f32[65536] negate(x)\n}\n")
    module = parse_module(text)
    limit = estimate_memory(module, Topology(1, 2)).peak_bytes
    x = np.ones(65536, np.float32)
    assert interpreter.run(module, [x], max_memory=limit)[0].shape == (2, 65536)
    with pytest.raises(MemoryLimitExceeded):
        execute_trials(module, [[x]] * 4, max_memory=limit)
