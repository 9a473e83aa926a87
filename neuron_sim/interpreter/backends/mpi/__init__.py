"""The MPI backend: the same execution as the local backend, one MPI process per block of devices.

Its modules, in the order data flows through them:

1. ``launch`` -- every rank parses the module, keeps its devices' rows of the arguments, runs
   the shared evaluator on them; at the end rank 0 gathers the outputs (or every rank writes
   its own) and every rank leaves the same way, with one agreed error if the run ended early.
2. ``layout`` -- which rank hosts which simulated device (pure, no MPI).
3. ``transport`` -- ``MpiTransport``, this backend's ``neuron_sim.interpreter.transport.Transport``: for
   every collective, the rendezvous with the peer ranks, then exact or native data movement.
4. ``protocol`` -- the control plane: arrivals compared before data moves, one agreed error,
   the watchdog.
5. ``exact`` -- exact mode: each rank gathers the inputs its devices need and applies the
   kind's data function, bit-identical to the local backend.
6. ``native`` -- native mode: MPI's own collectives on sub-communicators.
7. ``exchange`` -- moving stacked rows between ranks as raw bytes.

Python API, for code already running under mpiexec (``docs/mpi.md``)::

    from neuron_sim.interpreter.backends.mpi import run_mpi
    result = run_mpi(module, inputs, topology, mode="exact")   # on every rank
"""

from neuron_sim.interpreter.backends.mpi.launch import (DEFAULT_TIMEOUT, MODES, MpiResult, MpiRunError,
                                             RankLayout, RankLayoutError, exit_process,
                                             per_rank_path, run_mpi, write_outputs)

__all__ = ["DEFAULT_TIMEOUT", "MODES", "MpiResult", "MpiRunError", "RankLayout",
           "RankLayoutError", "exit_process", "per_rank_path", "run_mpi", "write_outputs"]
