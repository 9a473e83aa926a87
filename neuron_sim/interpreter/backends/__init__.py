"""Backends: how devices exchange data in collectives.

The evaluator and the ops are shared by every backend; a backend only implements the seam of
``neuron_sim.interpreter.transport`` (``Transport``: one ``collective(call, fingerprint)`` method).

- ``local`` (``local.py``): every device in one process; checks the rendezvous (a group
  reached by only some of its members raises CollectiveMismatchError) and applies each kind's
  data function (its descriptor in ``neuron_sim.semantics.collectives``).
- ``mpi`` (the ``mpi`` package): one MPI process per block of devices; exchanges rows between
  the ranks hosting them, then applies the same functions, so results are bit-identical.
"""

from __future__ import annotations

import functools

from neuron_sim.interpreter.transport import Transport

BACKENDS = ("local",)


def make_transport(name: str, num_devices: int) -> Transport:
    """The in-process transport of backend ``name`` for ``num_devices`` simulated devices.

    (The MPI backend builds its ``MpiTransport`` per rank in ``mpi.launch.run_mpi``.)
    """
    if name == "local":
        return _local_transport()(num_devices)
    raise ValueError(f"unknown backend {name!r} for an in-process run; available: "
                     f"{', '.join(BACKENDS)}")


@functools.lru_cache(maxsize=1)
def _local_transport() -> type:
    """``LocalTransport``, imported on first use (an import statement costs a few
    microseconds on every execute)."""
    from neuron_sim.interpreter.backends.local import LocalTransport
    return LocalTransport


__all__ = ["BACKENDS", "make_transport"]
