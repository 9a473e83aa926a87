"""``neuron-sim run --backend xla``: XLA:CPU runs committed JAX programs to JAX's own recorded
outputs and to the local backend's; a module XLA:CPU refuses, or a machine without jaxlib,
gets one sentence and exit code 2.

Expected values come from JAX (the corpus npz files hold what jax 0.10.2 computed on XLA:CPU)
or are derived by hand in the test's docstring.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_sim.cli import main
from neuron_sim.io import read_npz
from neuron_sim.xla_cpu import jaxlib_installed

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "jax"

needs_jaxlib = pytest.mark.skipif(not jaxlib_installed(), reason="jaxlib is not installed")

# Collective programs (multiples of 1/8: sums exact) and a fused float program.
PROGRAMS = ("spmd_psum_1d", "spmd_psum_int_bf16_1d", "spmd_rs_dim0_1d", "spmd_pmax_pmin_1d",
            "spmd_ppermute_ring_1d", "compiled_softmax")


def _recorded(name: str) -> tuple[dict, list[np.ndarray]]:
    arrays = read_npz(CORPUS / f"{name}.npz")
    inputs = {k: v for k, v in arrays.items() if k.startswith("arg")}
    outputs = [arrays[f"out{j}"] for j in range(sum(k.startswith("out") for k in arrays))]
    return inputs, outputs


@needs_jaxlib
@pytest.mark.parametrize("name", PROGRAMS)
def test_compiled_jax_programs_equal_the_recorded_outputs_and_the_local_backend(name):
    """XLA:CPU bit for bit equal to the recorded outputs (which are XLA:CPU's, under JAX);
    the interpreter too, but within the oracle's tolerance where a transcendental function's
    algorithm is XLA's choice (softmax's exp)."""
    from neuron_sim.hlo import parse_module
    from neuron_sim.interpreter import execute
    from neuron_sim.verify.fuzz.oracle_compare import compare_outputs
    from neuron_sim.xla_cpu import run_on_xla

    module = parse_module((CORPUS / f"{name}.hlo").read_text())
    inputs, recorded = _recorded(name)
    xla = run_on_xla(module, inputs)
    local = execute(module, inputs).outputs
    assert len(xla) == len(recorded) == len(local)
    for got, expected in zip(xla, recorded):
        assert got.tobytes() == np.asarray(expected).tobytes()
    recorded = [r.view(x.dtype) if r.dtype.kind == "V" else r for r, x in zip(recorded, xla)]
    assert compare_outputs(module, local, recorded).verdict in ("exact", "tolerance")
    assert compare_outputs(module, local, xla).verdict == \
        ("tolerance" if name == "compiled_softmax" else "exact")


@needs_jaxlib
def test_the_run_command_writes_xla_outputs_like_the_local_backend(tmp_path):
    """``run --backend xla -o`` writes the same npz as the local backend (bf16 as raw bytes)."""
    name = "spmd_psum_int_bf16_1d"
    written = {}
    for backend in ("xla", "local"):
        out = tmp_path / f"{backend}.npz"
        assert main(["run", str(CORPUS / f"{name}.hlo"), "--inputs",
                     str(CORPUS / f"{name}.npz"), "--backend", backend, "-o", str(out)]) == 0
        written[backend] = read_npz(out)
    _, recorded = _recorded(name)
    assert sorted(written["xla"]) == ["out0", "out1"]
    for j, expected in enumerate(recorded):
        assert written["xla"][f"out{j}"].tobytes() == np.asarray(expected).tobytes()
        assert written["local"][f"out{j}"].tobytes() == np.asarray(expected).tobytes()


DEVICE_IDS = """HloModule ids, replica_count=2, num_partitions=2

ENTRY %main () -> (u32[], u32[]) {
  %r = u32[] replica-id()
  %p = u32[] partition-id()
  ROOT %t = (u32[], u32[]) tuple(%r, %p)
}
"""


@needs_jaxlib
def test_rows_are_flattened_ids_under_any_device_assignment(tmp_path, capsys):
    """Row f of every output is device (r, p) = divmod(f, P), whatever physical ids the
    assignment gives: with 2x2 and da={{3,1},{0,2}}, rows 0..3 hold replica ids 0,0,1,1 and
    partition ids 0,1,0,1."""
    path = tmp_path / "ids.hlo"
    path.write_text(DEVICE_IDS)
    out = tmp_path / "ids.npz"
    assert main(["run", str(path), "--backend", "xla", "--device-assignment", "{{3,1},{0,2}}",
                 "-o", str(out)]) == 0
    got = read_npz(out)
    assert got["out0"].tolist() == [0, 0, 1, 1]
    assert got["out1"].tolist() == [0, 1, 0, 1]


RAGGED = """HloModule ragged, num_partitions=2

ENTRY %main (x: f32[4], out: f32[4], io: s32[2], ss: s32[2], oo: s32[2], rs: s32[2]) -> f32[4] {
  %x = f32[4] parameter(0)
  %out = f32[4] parameter(1)
  %io = s32[2] parameter(2)
  %ss = s32[2] parameter(3)
  %oo = s32[2] parameter(4)
  %rs = s32[2] parameter(5)
  ROOT %r = f32[4] ragged-all-to-all(%x, %out, %io, %ss, %oo, %rs), channel_id=1, replica_groups={{0,1}}
}
"""


@needs_jaxlib
def test_a_module_xla_cpu_refuses_is_one_sentence_and_exit_2(tmp_path, capsys):
    """XLA:CPU's thunk emitter has no ragged-all-to-all; the run says so in XLA's words."""
    path = tmp_path / "ragged.hlo"
    path.write_text(RAGGED)
    assert main(["run", str(path), "--seed", "1", "--backend", "xla"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "XLA:CPU refused the module" in err and "ragged-all-to-all" in err
    assert "Traceback" not in err


# Runs the command with jaxlib and jax made unimportable (a meta-path finder that refuses
# them), as on a machine where the xla extra was not installed.
WITHOUT_JAXLIB = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("jax", "jaxlib"):
            raise ImportError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Refuse())
from neuron_sim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _without_jaxlib(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_JAXLIB, *argv], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_without_jaxlib_backend_xla_says_how_to_install_it(tmp_path):
    path = tmp_path / "ids.hlo"
    path.write_text(DEVICE_IDS)
    done = _without_jaxlib("run", str(path), "--backend", "xla")
    assert done.returncode == 2
    assert done.stderr.strip() == ("neuron-sim: error: --backend xla needs jaxlib: "
                                   "pip install 'neuron-sim[xla]'")
    fuzz = _without_jaxlib("fuzz", "--oracle", "xla", "--examples", "1")
    assert fuzz.returncode == 2 and "pip install 'neuron-sim[xla]'" in fuzz.stderr


def test_without_jaxlib_the_local_backend_still_runs(tmp_path):
    path = tmp_path / "ids.hlo"
    path.write_text(DEVICE_IDS)
    done = _without_jaxlib("run", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert '"num_devices": 4' in done.stdout
