"""The collective seam: what a backend implements (``Transport``).

The evaluator and the ops are shared by every backend; a backend only provides a ``Transport``.
When a collective executes, its op hands the transport one ``CollectiveCall`` and, for a
transport whose ``uses_fingerprints`` is True, the ``Fingerprint`` naming the instruction (a
transport that does not compare arrivals across processes is handed ``None``: building one
costs a little on every collective). The transport returns the outputs stacked over
``call.active``.

- ``neuron_sim.interpreter.backends.local.LocalTransport`` holds every device in one process.
- ``neuron_sim.interpreter.backends.mpi.transport.MpiTransport`` exchanges rows between the ranks
  hosting them, then applies the same data functions, so results are bit-identical.

The call, the fingerprint and the functions every backend shares live in
``neuron_sim.interpreter.collective_calls``; their names are also read from here, on first use
(PEP 562), so that the evaluator, which holds a transport, does not load the collectives'
descriptors for a program that has no collective.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from neuron_sim.lazy import lazy_exports

if TYPE_CHECKING:
    import numpy as np

    from neuron_sim.interpreter.collective_calls import CollectiveCall, Fingerprint


class Transport(Protocol):
    """What the collective ops call; every backend implements it."""

    uses_fingerprints: bool

    def collective(self, call: CollectiveCall, fingerprint: Fingerprint | None
                   ) -> list[np.ndarray]:
        """The outputs of ``call`` stacked over ``call.active`` (one array per operand)."""


_EXPORTS = {name: "neuron_sim.interpreter.collective_calls"
            for name in ("COLLECTIVE_KINDS", "CollectiveCall", "Fingerprint", "apply_collective",
                         "collective_groups", "collective_kind", "fingerprint_of")}

__all__ = ["Transport", *sorted(_EXPORTS)]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
