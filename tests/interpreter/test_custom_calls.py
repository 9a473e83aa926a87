"""Custom-calls XLA:CPU emits: ``TopK`` runs with XLA's order; other targets are refused.

Expected values come from JAX 0.10.2 on XLA:CPU (``tests/data/custom_calls``, written by
``scripts/make_custom_call_data.py``: ``lax.top_k`` compiled to the ``TopK`` custom-call) and
from hand derivations in the docstrings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuron_sim.cli import main

DATA = Path(__file__).resolve().parent.parent / "data" / "custom_calls"
CASES = sorted(p.stem for p in DATA.glob("*.hlo"))

TOPK_MODULE = """HloModule topk

gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT, type=TOTALORDER
}

ENTRY e {
  x = f32[SHAPE] parameter(0)
  ROOT t = (f32[OUT], s32[OUT]) custom-call(x), custom_call_target="TARGET", called_computations={gt}
}
"""


def bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint32) if array.dtype == np.float32 else array


def run_cli(tmp_path: Path, module: str, inputs: str) -> dict[str, np.ndarray]:
    out = tmp_path / "out.npz"
    assert main(["run", module, "--inputs", inputs, "-o", str(out)]) == 0
    with np.load(out) as arrays:
        return {k: arrays[k] for k in arrays.files}


def test_the_corpus_has_the_topk_cases():
    assert {"topk_f32_rank1_k4", "topk_f32_rank2_k5", "topk_f32_rank2_k11"} <= set(CASES)
    for name in CASES:
        assert 'custom_call_target="TopK"' in (DATA / f"{name}.hlo").read_text()


@pytest.mark.parametrize("name", CASES)
def test_topk_matches_xla_cpu_bit_for_bit(tmp_path, name):
    """Values and indices equal JAX's bits, NaN of both signs, signed zeros and ties included."""
    out = run_cli(tmp_path, str(DATA / f"{name}.hlo"), str(DATA / f"{name}.npz"))
    with np.load(DATA / f"{name}.npz") as expected:
        for key in ("out0", "out1"):
            got = out[key][0]
            assert got.dtype == expected[key].dtype and got.shape == expected[key].shape
            np.testing.assert_array_equal(bits(got), bits(expected[key]))


def write_topk(tmp_path: Path, shape: str, out: str, target: str = "TopK") -> str:
    path = tmp_path / "topk.hlo"
    path.write_text(TOPK_MODULE.replace("SHAPE", shape).replace("OUT", out)
                    .replace("TARGET", target))
    return str(path)


def test_topk_orders_nan_first_and_ties_by_index(tmp_path):
    """x = [1, NaN, 3, -0, 3, +0, -NaN], k = 5. XLA:CPU's runtime sorts descending by the
    float's total order (-NaN < -inf < -0 < +0 < +inf < +NaN), equal bit patterns by the smaller
    index: +NaN (1), 3 (2), 3 (4), 1 (0), +0 (5); -0 (3) and -NaN (6) are cut."""
    negative_nan = np.uint32(0xFFC00000).view(np.float32)
    x = np.array([1, np.nan, 3, -0.0, 3, 0.0, negative_nan], np.float32)
    np.savez(tmp_path / "in.npz", arg0=x)
    out = run_cli(tmp_path, write_topk(tmp_path, "7", "5"), str(tmp_path / "in.npz"))
    np.testing.assert_array_equal(out["out1"][0], [1, 2, 4, 0, 5])
    assert np.isnan(out["out0"][0][0]) and not np.signbit(out["out0"][0][0])
    np.testing.assert_array_equal(bits(out["out0"][0][1:]),
                                  bits(np.array([3, 3, 1, 0.0], np.float32)))


def test_topk_runs_per_device(tmp_path):
    """Two replicas with different rows: each gets the top 2 of its own row."""
    path = Path(write_topk(tmp_path, "1,3", "1,2"))
    path.write_text(path.read_text().replace("HloModule topk", "HloModule topk, replica_count=2"))
    np.savez(tmp_path / "in.npz", arg0=np.array([[[5, 7, 6]], [[9, 8, 9]]], np.float32))
    out = run_cli(tmp_path, str(path), str(tmp_path / "in.npz"))
    np.testing.assert_array_equal(out["out0"], [[[7, 6]], [[9, 9]]])
    np.testing.assert_array_equal(out["out1"], [[[1, 2]], [[0, 2]]])


def test_an_unknown_target_is_an_unsupported_custom_call(tmp_path, capsys):
    np.savez(tmp_path / "in.npz", arg0=np.zeros(4, np.float32))
    module = write_topk(tmp_path, "4", "2", target="MyKernel")
    assert main(["run", module, "--inputs", str(tmp_path / "in.npz")]) != 0
    err = capsys.readouterr().err
    assert 'unsupported custom-call target: custom_call_target="MyKernel"' in err
    assert "supported: TopK" in err and "Traceback" not in err


def test_the_verifier_reports_an_unsupported_target_as_an_error(tmp_path, capsys):
    before = Path(write_topk(tmp_path, "4", "2", target="MyKernel"))
    after = tmp_path / "after.hlo"
    after.write_text(before.read_text().replace(
        "ROOT t = ", "t = ").replace("called_computations={gt}\n",
                                     "called_computations={gt}\n  ROOT k = (f32[2], s32[2]) "
                                     "copy(t)\n"))
    code = main(["verify", str(before), str(after)])
    out = capsys.readouterr().out
    assert code != 0
    assert "ERROR: Unsupported" in out and "MyKernel" in out
