"""Collectives without ``replica_groups`` and collective-permutes without pairs, through the CLI.

XLA's parser reads an absent ``replica_groups`` as ``{}``: one group of every id the group mode
ranges over (replicas for CrossReplica, partitions for CrossPartition, every device for
CrossReplicaAndPartition). A collective-permute sends only along its pairs and a device that is
no pair's target receives zeros (XLA's HloEvaluator and CPU thunk zero-fill it), so a permute
with no pairs gives zeros on every device. These modules were internal errors before
(AttributeError on the missing attribute); now ``run``, ``check`` and ``verify`` take them.
The MPI backend runs the same forms in ``mpi/collective_modules.py`` (bit-identical to local).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuron_sim.cli import main

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.hlo"
    path.write_text(text)
    return str(path)


def run(tmp_path: Path, module: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    np.savez(tmp_path / "in.npz", **inputs)
    out = tmp_path / "out.npz"
    assert main(["run", module, "--inputs", str(tmp_path / "in.npz"), "-o", str(out)]) == 0
    with np.load(out) as arrays:
        return {k: arrays[k] for k in arrays.files}


def per_device(devices: int, size: int) -> np.ndarray:
    """Row d is d * 10 + [0, 1, ..., size-1]: every device's value tells where it came from."""
    return (np.arange(devices)[:, None] * 10 + np.arange(size)[None, :]).astype(np.float32)


def test_all_reduce_without_groups_sums_all_replicas(tmp_path):
    """CrossReplica on 4 replicas x 1 partition: one group {0,1,2,3}. Device d holds
    10d + [0, 1]; the sum is (0+10+20+30) + 4*[0, 1] = [60, 64] on every device."""
    module = write(tmp_path, "ar", "HloModule ar, replica_count=4\n" + ADD + """
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), to_apply=add
}
""")
    out = run(tmp_path, module, {"arg0": per_device(4, 2)})
    np.testing.assert_array_equal(out["out0"], np.tile([60.0, 64.0], (4, 1)))


def test_all_reduce_without_groups_and_a_channel_sums_every_device(tmp_path):
    """channel_id without use_global_device_ids is CrossReplicaAndPartition: on 2 replicas x
    2 partitions ``{}`` is one group of all four devices: (0+10+20+30) + 4*[0, 1]."""
    module = write(tmp_path, "arc", "HloModule arc, replica_count=2, num_partitions=2\n"
                   + ADD + """
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), channel_id=1, to_apply=add
}
""")
    out = run(tmp_path, module, {"arg0": per_device(4, 2)})
    np.testing.assert_array_equal(out["out0"], np.tile([60.0, 64.0], (4, 1)))


def test_all_reduce_without_groups_cross_replica_keeps_partitions_apart(tmp_path):
    """CrossReplica on 2 replicas x 2 partitions: ``{}`` means replicas {0,1}, one group per
    partition: flattened {0,2} and {1,3}. Devices 0 and 2 get 0+20 + 2*[0,1] = [20, 22];
    devices 1 and 3 get 10+30 + 2*[0,1] = [40, 42]."""
    module = write(tmp_path, "arr", "HloModule arr, replica_count=2, num_partitions=2\n"
                   + ADD + """
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), to_apply=add
}
""")
    out = run(tmp_path, module, {"arg0": per_device(4, 2)})
    np.testing.assert_array_equal(out["out0"], [[20, 22], [40, 42], [20, 22], [40, 42]])


def test_all_gather_without_groups_gathers_every_device_in_flattened_order(tmp_path):
    """CrossReplicaAndPartition (channel_id) on 2x2: one group of flattened ids 0..3, so
    every device gets the concatenation of rows 0, 1, 2, 3 (XLA's shard count is R*P = 4)."""
    module = write(tmp_path, "ag", """HloModule ag, replica_count=2, num_partitions=2

ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[8] all-gather(p), dimensions={0}, channel_id=1
}
""")
    x = per_device(4, 2)
    out = run(tmp_path, module, {"arg0": x})
    np.testing.assert_array_equal(out["out0"], np.tile(x.reshape(8), (4, 1)))


@pytest.mark.parametrize("pairs", ["", ", source_target_pairs={}"],
                         ids=["absent", "empty"])
def test_collective_permute_without_pairs_gives_zeros_everywhere(tmp_path, pairs):
    """No device is a target, so every device receives zeros (XLA: a device that is no pair's
    target gets a zero-filled result)."""
    module = write(tmp_path, "cp", f"""HloModule cp, replica_count=4

ENTRY e {{
  p = f32[3] parameter(0)
  ROOT r = f32[3] collective-permute(p){pairs}
}}
""")
    out = run(tmp_path, module, {"arg0": per_device(4, 3) + 1})
    np.testing.assert_array_equal(out["out0"], np.zeros((4, 3), np.float32))


def test_check_accepts_collectives_without_groups(tmp_path, capsys):
    module = write(tmp_path, "ar", "HloModule ar, replica_count=4\n" + ADD + """
ENTRY e {
  p = f32[2] parameter(0)
  r = f32[2] all-reduce(p), to_apply=add
  ROOT c = f32[2] collective-permute(r)
}
""")
    assert main(["check", module]) == 0
    out = capsys.readouterr().out
    assert ": OK" in out and "{0,1,2,3}" in out


def test_verify_runs_a_module_without_groups_or_pairs(tmp_path, capsys):
    """A target that differs (an extra copy) makes the verifier execute both modules; the output
    is r + c, so the all-reduce's value (c, the permute without pairs, is zeros) is compared."""
    body = "HloModule m, replica_count=4\n" + ADD + """
ENTRY e {
  p = f32[2] parameter(0)
  r = f32[2] all-reduce(p), to_apply=add
  c = f32[2] collective-permute(r)
  ROOT o = f32[2] add(r, c)
}
"""
    before = write(tmp_path, "before", body)
    after = write(tmp_path, "after", body.replace(
        "ROOT o = f32[2] add(r, c)", "k = f32[2] copy(c)\n  ROOT o = f32[2] add(r, k)"))
    assert main(["verify", before, after]) == 0
    assert "Result: CORRECT" in capsys.readouterr().out


def test_verify_folds_an_all_reduce_without_groups(tmp_path, capsys):
    """The AR+DS fold on ``{}`` groups over 4 replicas: the verifier proves the rewrite
    (the fold analysis reads an absent attribute as ``{}``)."""
    module = write(tmp_path, "ards", "HloModule ards, replica_count=4\n" + ADD + """
ENTRY e {
  p = f32[8] parameter(0)
  ar = f32[8] all-reduce(p), to_apply=add
  rid = u32[] replica-id()
  two = u32[] constant(2)
  offset = u32[] multiply(rid, two)
  ROOT ds = f32[2] dynamic-slice(ar, offset), dynamic_slice_sizes={2}
}
""")
    code = main(["verify", module, "--passes", "rewrite_all_reduce_dynamic_slice_proven"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "-> %reduce-scatter" in out and "Result: CORRECT (7 executions" in out
