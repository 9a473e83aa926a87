"""Defaults the command line shows before anything heavy is imported.

``RUN_TIMEOUT``: seconds a ``neuron-sim run`` (and an MPI job's watchdog) may take before it
is ended (``neuron_sim.interpreter.backends.mpi.launch.DEFAULT_TIMEOUT`` is this value).
"""

RUN_TIMEOUT = 600.0
