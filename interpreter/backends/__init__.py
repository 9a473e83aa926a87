"""Backends: how devices exchange data in collectives.

The evaluator and the ops are shared by every backend; a backend only provides a ``Transport``.
When a collective executes, the op hands the transport one ``CollectiveCall``
(``interpreter.backends.mpi_exact``): its kind, its operands stacked over the devices of the
current frame that reached it (``call.active``, flattened ids), the participant groups of the
whole topology, dimension, permute pairs and reduction; plus a ``Fingerprint`` naming the
instruction (``mpi_collectives.fingerprint_of``) for transports that compare arrivals across
processes. The transport returns the outputs stacked over ``call.active``.

- ``LocalTransport`` holds every device in one process: it checks the rendezvous (a group
  reached by only some of its members raises CollectiveMismatchError) and applies the pure
  functions of ``interpreter.collectives``.
- ``MpiTransport`` (``mpi_transport.py``) exchanges rows between the ranks hosting them, then
  applies the same functions, so results are bit-identical.

A transport whose ``uses_fingerprints`` is False is handed ``None`` instead of a fingerprint
(building one costs a little on every collective).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from interpreter.backends.mpi_exact import CollectiveCall
from interpreter.backends.mpi_protocol import Fingerprint


class Transport(Protocol):
    """What the collective ops call."""

    def collective(self, call: CollectiveCall, fingerprint: Fingerprint | None
                   ) -> list[np.ndarray]:
        """The outputs of ``call`` stacked over ``call.active`` (one array per operand)."""


BACKENDS = ("local",)


def make_transport(name: str, num_devices: int) -> Transport:
    """The in-process transport of backend ``name`` for ``num_devices`` simulated devices.

    (The MPI backend builds its ``MpiTransport`` per rank in its own launcher.)
    """
    if name == "local":
        from interpreter.backends.local import LocalTransport
        return LocalTransport(num_devices)
    raise ValueError(f"unknown backend {name!r} for an in-process run; available: "
                     f"{', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "CollectiveCall", "Fingerprint", "Transport", "make_transport"]
