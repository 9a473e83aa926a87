"""MPI ranks on CPUs with different SIMD extensions compute the same bits as the local backend.

An MPI run's ranks may sit on different hosts. Each rank here gets its own numpy dispatch setting
through its environment (mpiexec's per-executable ``-env NPY_DISABLE_CPU_FEATURES ...``: AVX-512
off on one rank, AVX-512 and AVX2 off on another, nothing off on the rest), checks that numpy
honoured it (``mpi/checked_rank.py``), and runs modules in exact mode whose transcendentals feed
collectives and whose collectives feed transcendentals, on every float type. The gathered outputs
must be bit-identical to the local backend in this (native) process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import ElementType, parse_module_file
from neuron_sim.io import read_npz, write_npz
from neuron_sim.numerics import dispatch

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
RANK = Path(__file__).parent / "mpi" / "checked_rank.py"
SETTINGS = dispatch.settings()


def module_text(dtype: str) -> str:
    """Per device: transcendentals, an all-reduce, more transcendentals, an all-gather."""
    return f"""HloModule mixed_{dtype}, num_partitions=4

add {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT s = {dtype}[] add(a, b)
}}

ENTRY e {{
  x = {dtype}[64] parameter(0)
  y = {dtype}[64] parameter(1)
  s = {dtype}[64] sine(x)
  t = {dtype}[64] tanh(y)
  c = {dtype}[64] cbrt(x)
  m = {dtype}[64] exponential-minus-one(t)
  l = {dtype}[64] log-plus-one(y)
  a2 = {dtype}[64] atan2(x, y)
  p = {dtype}[64] power(y, s)
  u = {dtype}[64] add(s, c)
  v = {dtype}[64] multiply(m, l)
  w = {dtype}[64] subtract(a2, p)
  uv = {dtype}[64] add(u, v)
  z = {dtype}[64] add(uv, w)
  r = {dtype}[64] all-reduce(z), channel_id=1, replica_groups={{{{0,1,2,3}}}}, use_global_device_ids=true, to_apply=add
  e = {dtype}[64] exponential(r)
  k = {dtype}[64] cosine(r)
  g = {dtype}[64] tan(x)
  ek = {dtype}[64] add(e, k)
  q = {dtype}[64] add(ek, g)
  ROOT out = {dtype}[256] all-gather(q), channel_id=2, replica_groups={{{{0,1,2,3}}}}, use_global_device_ids=true, dimensions={{0}}
}}
"""


def inputs(dtype: str) -> dict[str, np.ndarray]:
    numpy_dtype = ElementType.from_spelling(dtype).numpy_dtype
    rng = np.random.default_rng(24)
    arrays = {}
    for i in range(2):
        x = rng.standard_normal((4, 64)) * np.array([0.5, 3.0, 40.0, 1e3])[:, None]
        arrays[f"arg{i}"] = np.abs(x).astype(numpy_dtype) if i == 1 else x.astype(numpy_dtype)
    return arrays


def mpmd(settings: list[str], jobs: Path) -> subprocess.CompletedProcess:
    """One mpiexec launch whose rank i runs under ``settings[i]``."""
    argv = [str(MPIEXEC)]
    for index, setting in enumerate(settings):
        if index:
            argv.append(":")
        argv += ["-n", "1"]
        disabled = SETTINGS[setting]
        if disabled:
            argv += ["-env", "NPY_DISABLE_CPU_FEATURES", " ".join(disabled)]
        argv += [sys.executable, str(RANK), str(jobs)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def rank_settings(world_size: int) -> list[str]:
    others = [s for s in SETTINGS if s != "native"]
    cycle = [*others, "native"] if others else ["native"]
    return [cycle[i % len(cycle)] for i in range(world_size)]


@pytest.mark.parametrize("world_size", [2, 4])
def test_exact_mode_with_mixed_dispatch_is_bit_identical_to_local(tmp_path, world_size):
    jobs = []
    for dtype in ("f32", "bf16", "f16", "f64"):
        hlo = tmp_path / f"mixed_{dtype}.hlo"
        hlo.write_text(module_text(dtype))
        npz = tmp_path / f"mixed_{dtype}.npz"
        write_npz(npz, inputs(dtype))
        jobs.append({"name": dtype, "hlo": str(hlo), "inputs": str(npz), "mode": "exact",
                     "output": str(tmp_path / f"out_{dtype}.npz")})
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps(jobs))
    settings = rank_settings(world_size)
    done = mpmd(settings, spec)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for rank, setting in enumerate(settings):
        disabled = " ".join(SETTINGS[setting]) or "-"
        assert f"rank {rank} disabled: {disabled}" in done.stdout, done.stdout
    for job in jobs:
        module = parse_module_file(job["hlo"])
        local = interpreter.run(module, inputs(job["name"]))
        got = read_npz(job["output"])
        for j, expected in enumerate(local):
            mpi = got[f"out{j}"]
            assert mpi.tobytes() == np.ascontiguousarray(expected).tobytes(), \
                f"{job['name']} output {j} differs between mixed-dispatch MPI and local"


def test_ranks_really_differ_in_their_dispatch_setting():
    """The comparison is not vacuous on this machine: at least two distinct settings exist."""
    assert len(set(rank_settings(4))) >= 2 or len(SETTINGS) == 1
