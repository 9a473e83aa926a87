"""``neuron-sim run``: inputs, outputs, table, JSON, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from neuron_sim.cli import main
from neuron_sim.io import read_npz, write_npz

CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"

MODULE = """HloModule cli_test, num_partitions=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

ENTRY main {
  x = bf16[3] parameter(0)
  s = f32[3] parameter(1)
  pid = u32[] partition-id()
  p = f32[] convert(pid)
  pb = f32[3] broadcast(p), dimensions={}
  y = f32[3] add(s, pb)
  ar = f32[3] all-reduce(y), channel_id=1, replica_groups={}, to_apply=add
  twice = bf16[3] add(x, x)
  ROOT t = (bf16[3], f32[3]) tuple(twice, ar)
}
"""

MISMATCH = """HloModule mismatch, num_partitions=2

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

reduce_it {
  x = f32[] parameter(0)
  ROOT r = f32[] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

keep {
  ROOT x = f32[] parameter(0)
}

ENTRY main {
  pid = u32[] partition-id()
  zero = u32[] constant(0)
  first = pred[] compare(pid, zero), direction=EQ
  v = f32[] constant(1)
  ROOT c = f32[] conditional(first, v, v), true_computation=reduce_it, false_computation=keep
}
"""


@pytest.fixture
def files(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(MODULE)
    inputs = tmp_path / "in.npz"
    write_npz(inputs, {"arg0": np.array([1, 2.5, -3], ml_dtypes.bfloat16),
                       "arg1": np.array([[0, 1, 2], [10, 11, 12]], np.float32)})
    return hlo, inputs, tmp_path


def test_writes_outputs_to_npz_with_bf16_as_raw_bytes(files, capsys):
    hlo, inputs, tmp = files
    out = tmp / "out.npz"
    assert main(["run", str(hlo), "--inputs", str(inputs), "-o", str(out)]) == 0
    assert "wrote 2 outputs" in capsys.readouterr().out
    arrays = read_npz(out)
    assert sorted(arrays) == ["out0", "out1"]
    assert arrays["out0"].dtype == np.dtype("V2")
    twice = arrays["out0"].view(ml_dtypes.bfloat16).astype(np.float32)
    assert twice.tolist() == [[2, 5, -6], [2, 5, -6]]
    # device 0 holds s, device 1 holds s + 1: the sum is [0+11, 1+12, 2+13].
    assert arrays["out1"].tolist() == [[11, 13, 15], [11, 13, 15]]


def test_prints_a_per_device_table(files, capsys):
    hlo, inputs, _ = files
    assert main(["run", str(hlo), "--inputs", str(inputs)]) == 0
    text = capsys.readouterr().out
    assert "2 devices (topology 1x2)" in text
    assert "out0 bf16[3]" in text and "out1 f32[3]" in text
    assert "[11, 13, 15]" in text and "(0, 1)" in text


def test_json_output_has_every_devices_values(files, capsys):
    hlo, inputs, _ = files
    assert main(["run", str(hlo), "--inputs", str(inputs), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["num_devices"] == 2 and record["topology"] == "1x2"
    assert record["outputs"][1]["values"] == [[11, 13, 15], [11, 13, 15]]
    assert record["outputs"][1]["same_on_every_device"] is True


def test_seed_draws_inputs_and_topology_options_override_the_header(files, capsys):
    hlo, _, tmp = files
    out = tmp / "drawn.npz"
    assert main(["run", str(hlo), "--seed", "3", "--partitions", "4", "-o", str(out)]) == 0
    assert read_npz(out)["out1"].shape == (4, 3)


def test_corpus_inputs_file_reproduces_the_expected_outputs(tmp_path):
    out = tmp_path / "o.npz"
    name = "spmd_ppermute_partial_1d"
    assert main(["run", str(CORPUS / f"{name}.hlo"), "--inputs", str(CORPUS / f"{name}.npz"),
                 "-o", str(out)]) == 0
    expected = read_npz(CORPUS / f"{name}.npz")
    got = read_npz(out)
    assert all(got[k].tobytes() == expected[k].tobytes() for k in got)


@pytest.mark.parametrize("extra, message", [
    ([], "give --inputs IN.npz or --seed S"),
    (["--inputs", "WRONG"], "parameter 1 (arg1, f32[3]) has dtype int32, expected f32"),
])
def test_bad_inputs_exit_2_with_one_sentence(files, capsys, extra, message):
    hlo, _, tmp = files
    if "WRONG" in extra:
        wrong = tmp / "wrong.npz"
        write_npz(wrong, {"arg0": np.zeros(3, ml_dtypes.bfloat16),
                          "arg1": np.zeros(3, np.int32)})
        extra = ["--inputs", str(wrong)]
    assert main(["run", str(hlo), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_collective_mismatch_exits_1(tmp_path, capsys):
    hlo = tmp_path / "mismatch.hlo"
    hlo.write_text(MISMATCH)
    assert main(["run", str(hlo)]) == 1
    err = capsys.readouterr().err
    assert "collective mismatch" in err and "reached by devices {0} only" in err


def test_unimplemented_op_exits_2(tmp_path, capsys):
    hlo = tmp_path / "cc.hlo"
    hlo.write_text('HloModule cc\n\nENTRY main {\n  ROOT c = f32[2] custom-call(), '
                   'custom_call_target="Foo"\n}\n')
    assert main(["run", str(hlo)]) == 2
    assert "does not implement 'custom-call'" in capsys.readouterr().err
