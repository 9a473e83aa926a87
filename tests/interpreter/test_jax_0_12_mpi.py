"""The JAX 0.12 corpus's ragged_all_to_all and non-canonical mesh-order modules under real
``mpiexec``: the gathered outputs equal JAX's per-device outputs (for ragged-all-to-all, the
emulated ones of tests/data/jax_0_12, checked against JAX's own test results) bit for bit, in
exact mode, with 2 and 4 ranks (each rank hosting 4 or 2 of the 8 devices, so groups such as
{0,4,1,5,2,6,3,7} span ranks; the 2- and 4-device modules of JAX's own ragged tests run where
the rank count divides their devices). These modules only move data, so their outputs are exact.

One mpiexec launch per rank count runs every module (tests/interpreter/mpi/run_modules.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_sim.io import read_npz

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
RUNNER = Path(__file__).parent / "mpi" / "run_modules.py"
CORPUS = REPO / "tests" / "data" / "jax_0_12"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
ENTRIES = {e["name"]: e for e in MANIFEST if e["runnable"] and (
    "ragged-all-to-all" in e["features"]
    or "axis_order" in e["features"] and e["kind"] == "compiled")}
NAMES = sorted(ENTRIES)
WORLD_SIZES = (2, 4)
_RUNS: dict[int, tuple[dict[str, str], subprocess.CompletedProcess]] = {}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    def get(world_size: int) -> dict[str, str]:
        if world_size not in _RUNS:
            directory = tmp_path_factory.mktemp(f"jax012_mpi_w{world_size}")
            jobs = [{"name": name, "hlo": str(CORPUS / f"{name}.hlo"),
                     "inputs": str(CORPUS / f"{name}.npz"), "mode": "exact",
                     "output": str(directory / f"{name}.npz")} for name in NAMES
                    if ENTRIES[name]["num_partitions"] % world_size == 0]
            spec = directory / "jobs.json"
            spec.write_text(json.dumps(jobs))
            done = subprocess.run([str(MPIEXEC), "-n", str(world_size), sys.executable,
                                   str(RUNNER), str(spec)], capture_output=True, text=True,
                                  timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)),
                                  cwd=REPO)
            _RUNS[world_size] = ({job["name"]: job["output"] for job in jobs}, done)
        outputs, done = _RUNS[world_size]
        assert done.returncode == 0, f"the batch failed:\n{done.stdout}\n{done.stderr}"
        return outputs

    return get


def test_the_batch_holds_ragged_and_reordered_mesh_modules():
    assert sum("ragged" in n for n in NAMES) >= 8
    assert sum("ragged" not in n for n in NAMES) >= 8


CASES = [pytest.param(w, n, id=f"W{w}-{n}") for w in WORLD_SIZES for n in NAMES
         if ENTRIES[n]["num_partitions"] % w == 0]


@pytest.mark.parametrize("world_size, name", CASES)
def test_mpi_outputs_equal_the_expected_outputs(run, world_size, name):
    outputs = run(world_size)
    error = Path(outputs[name] + ".error.json")
    assert not error.exists(), f"{name} failed under MPI: {error.read_text()}"
    got = read_npz(outputs[name])
    expected = read_npz(CORPUS / f"{name}.npz")
    outs = sorted(k for k in expected if k.startswith("out"))
    assert sorted(got) == outs
    for key in outs:
        assert got[key].shape == expected[key].shape, key
        assert got[key].tobytes() == expected[key].tobytes(), f"{key} differs under MPI"
