"""All-reduce bandwidth of the backends, measured side by side in one run (not a timed test).

An all-reduce (sum) of a 64 MiB f32 tensor per device over 8 devices (``replica_count=8``,
distinct inputs per device), run with the local backend and with the MPI backend in exact and
native mode on W = 2 and 4 processes. Reported: the time of the collective itself (the
transport call; for MPI the slowest rank) and of the whole run (evaluation without process
start-up, MPI initialisation, input drawing or the output gather), each as *algorithm bandwidth*
= tensor bytes / time, the usual figure for collectives (nccl-tests' algbw). Best of
``--repeat`` runs.

    PYTHONPATH=. python scripts/bench_mpi.py [--size-mib 64] [--devices 8] [--ranks 2,4]
                                             [--repeat 3] [--json]

The MPI runs are separate ``mpiexec`` launches of this script (``--worker``); ``mpiexec`` is
looked up next to the Python interpreter (the venv's, from the ``mpich`` wheel).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ALL_REDUCE = """HloModule bench_all_reduce, replica_count={devices}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  p = f32[{elements}] parameter(0)
  ROOT ar = f32[{elements}] all-reduce(p), replica_groups={{}}, to_apply=add
}}
"""


def _module_text(size_mib: int, devices: int) -> str:
    return ALL_REDUCE.format(devices=devices, elements=size_mib * (1 << 20) // 4)


def _inputs(size_mib: int, devices: int) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(0)
    return {"arg0": generator.standard_normal((devices, size_mib * (1 << 20) // 4),
                                              dtype=np.float32)}


class _CollectiveTimer:
    """Wraps a transport class's ``collective`` to record how long each call takes."""

    def __init__(self, cls) -> None:
        self.seconds: list[float] = []
        original = cls.collective

        def timed(transport, call, fingerprint):
            started = time.perf_counter()
            try:
                return original(transport, call, fingerprint)
            finally:
                self.seconds.append(time.perf_counter() - started)

        cls.collective = timed


def bench_local(size_mib: int = 64, devices: int = 8, repeat: int = 3) -> dict:
    """The local backend: best collective time and best run time, in seconds."""
    import interpreter
    from interpreter.backends.local import LocalTransport
    from neuron_sim.hlo import parse_module

    timer = _CollectiveTimer(LocalTransport)
    module = parse_module(_module_text(size_mib, devices))
    inputs = _inputs(size_mib, devices)
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        interpreter.run(module, inputs)
        runs.append(time.perf_counter() - started)
    return {"backend": "local", "collective_s": min(timer.seconds), "run_s": min(runs)}


def _worker(size_mib: int, devices: int, mode: str, repeat: int) -> None:
    """Under mpiexec: time run_mpi; rank 0 prints one JSON line (slowest rank per repeat)."""
    from mpi4py import MPI

    from interpreter.backends.mpi import run_mpi
    from interpreter.backends.mpi.transport import MpiTransport
    from neuron_sim.hlo import parse_module

    comm = MPI.COMM_WORLD
    timer = _CollectiveTimer(MpiTransport)
    module = parse_module(_module_text(size_mib, devices))
    inputs = _inputs(size_mib, devices)
    collective, runs = [], []
    for _ in range(repeat):
        comm.Barrier()
        started = time.perf_counter()
        run_mpi(module, inputs, mode=mode, gather=False)
        elapsed = time.perf_counter() - started
        runs.append(comm.allreduce(elapsed, op=MPI.MAX))
        collective.append(comm.allreduce(timer.seconds[-1], op=MPI.MAX))
    if comm.Get_rank() == 0:
        print(json.dumps({"collective_s": min(collective), "run_s": min(runs)}), flush=True)


def bench_mpi(size_mib: int = 64, devices: int = 8, ranks: int = 2, mode: str = "exact",
              repeat: int = 3) -> dict:
    """The MPI backend on ``ranks`` processes: best collective and run times, in seconds."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    command = [str(mpiexec), "-n", str(ranks), sys.executable, str(Path(__file__).resolve()),
               "--worker", "--mode", mode, "--size-mib", str(size_mib), "--devices",
               str(devices), "--repeat", str(repeat)]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"mpiexec failed ({done.returncode}):\n{done.stderr}")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return {"backend": f"mpi {mode} W={ranks}", **record}


def bench_all_reduce(size_mib: int = 64, devices: int = 8, ranks=(2, 4), repeat: int = 3
                     ) -> list[dict]:
    """Local vs MPI exact vs MPI native; each record gains GB/s of algorithm bandwidth."""
    records = [bench_local(size_mib, devices, repeat)]
    for world_size in ranks:
        for mode in ("exact", "native"):
            records.append(bench_mpi(size_mib, devices, world_size, mode, repeat))
    size = size_mib * (1 << 20)
    for record in records:
        record["collective_GBps"] = size / record["collective_s"] / 1e9
        record["run_GBps"] = size / record["run_s"] / 1e9
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--ranks", default="2,4", help="process counts, comma separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="exact", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.size_mib, args.devices, args.mode, args.repeat)
        return
    ranks = tuple(int(r) for r in args.ranks.split(","))
    records = bench_all_reduce(args.size_mib, args.devices, ranks, args.repeat)
    if args.json:
        print(json.dumps(records, indent=1))
        return
    print(f"all-reduce (sum) of f32[{args.size_mib} MiB] over {args.devices} devices, "
          f"best of {args.repeat}; algorithm bandwidth = tensor bytes / time")
    print(f"{'backend':<20} {'collective':>12} {'GB/s':>7} {'whole run':>12} {'GB/s':>7}")
    for r in records:
        print(f"{r['backend']:<20} {r['collective_s'] * 1e3:>10.1f}ms {r['collective_GBps']:>7.2f} "
              f"{r['run_s'] * 1e3:>10.1f}ms {r['run_GBps']:>7.2f}")


if __name__ == "__main__":
    main()
