"""Run a batch of modules with the MPI backend in one mpiexec launch (a test helper).

    mpiexec -n W python tests/interpreter/mpi/run_modules.py JOBS.json

``JOBS.json`` is a list of jobs, each ``{"name", "hlo": path, "inputs": npz path or null,
"seed": int or null, "mode": "exact" | "native", "replicas": int or null, "partitions": int or
null, "device_assignment": "{{...}}" or null, "output": npz path}``, plus optionally
``"kill": [rank, n]`` (that rank kills itself with SIGKILL when it reaches its n-th collective,
counting from 0), ``"exit_before": rank`` (that rank fails before the run starts, as when its
host cannot read the module) and ``"timeout": seconds``.

Rank 0 writes each job's gathered outputs to ``output``. A job that ends early writes, on rank
0, ``{"message", "exit_code"}`` to ``output + ".error.json"`` and the batch goes on with the
next job when MPI is still in a clean state; otherwise every rank exits with the job's code at
once. After the batch, every rank exits with the code of the first job that failed (0 if none).
Launching MPI costs about a second, so the tests batch many modules per launch.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from neuron_sim.interpreter.backends.mpi import MpiRunError, exit_process, run_mpi  # noqa: E402
from neuron_sim.interpreter.backends.mpi.transport import MpiTransport  # noqa: E402
from neuron_sim.hlo import parse_module_file  # noqa: E402
from neuron_sim.io import output_arrays, read_npz, write_npz  # noqa: E402
from neuron_sim.topology import Topology, parse_device_assignment  # noqa: E402


def install_kill(rank_to_kill: int, at: int) -> None:
    """Make ``rank_to_kill`` die (SIGKILL, no cleanup) when it reaches collective ``at``."""
    original = MpiTransport.collective

    def collective(self, call, fingerprint):
        if self.rank == rank_to_kill and self.collectives_run >= at:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, call, fingerprint)

    MpiTransport.collective = collective


def topology_of(job: dict, module) -> Topology:
    replicas = job.get("replicas") or module.replica_count
    partitions = job.get("partitions") or module.num_partitions
    assignment = job.get("device_assignment")
    return Topology(replicas, partitions,
                    parse_device_assignment(assignment) if assignment else None)


def run_job(job: dict) -> int:
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    module = parse_module_file(job["hlo"])
    inputs = read_npz(job["inputs"]) if job.get("inputs") else None
    if inputs is not None:
        inputs = {k: v for k, v in inputs.items() if k.startswith("arg")}
    if job.get("kill"):
        install_kill(*job["kill"])
    if job.get("exit_before") == rank:
        print(f"rank {rank}: failing before the run", file=sys.stderr, flush=True)
        sys.exit(2)
    try:
        result = run_mpi(module, inputs, topology_of(job, module), mode=job.get("mode", "exact"),
                         timeout=job.get("timeout", 120), seed=job.get("seed"))
    except MpiRunError as error:
        if rank == 0:
            Path(job["output"] + ".error.json").write_text(
                json.dumps({"message": error.message, "exit_code": error.exit_code}))
        if not error.clean_shutdown:
            exit_process(error.exit_code, clean=False)
        return error.exit_code
    if rank == 0:
        write_npz(job["output"], output_arrays(result.outputs))
    return 0


def main() -> None:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    codes = [run_job(job) for job in jobs]
    exit_process(next((code for code in codes if code), 0))


if __name__ == "__main__":
    main()
