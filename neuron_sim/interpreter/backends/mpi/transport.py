"""The collective transport of one MPI rank: rendezvous, check, then exact or native data movement.

The evaluator runs on the devices this rank hosts and hands every collective it reaches to
:meth:`MpiTransport.collective` as a :class:`CollectiveCall` (operands stacked over the devices
that reached it) with its :class:`Fingerprint`. The transport

1. exchanges arrivals with the peer ranks (those hosting another member of a group one of its
   devices belongs to) and checks that every participant of those groups arrived at the same
   collective — otherwise every rank ends with the same mismatch message;
2. moves the data: ``exact`` (default) gathers the inputs each device needs and applies the
   kind's data function, bit-identical to the local backend; ``native`` uses MPI's own
   collectives on sub-communicators, faster, possibly different in the last bits of floats.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from neuron_sim.interpreter.backends.mpi.exact import exact_collective
from neuron_sim.interpreter.backends.mpi.exchange import ArraySpec, Exchange
from neuron_sim.interpreter.backends.mpi.layout import RankLayout
from neuron_sim.interpreter.backends.mpi.protocol import (Arrival, CollectiveMismatch, ControlPlane,
                                               check_groups_arrived)
from neuron_sim.interpreter.collective_calls import CollectiveCall, Fingerprint
from neuron_sim.semantics.collectives.descriptor import GroupReading

__all__ = ["MODES", "MpiTransport"]

MODES = ("exact", "native")


class MpiTransport:
    """Collectives, the end-of-program check and the output gather for one rank.

    The evaluator's transport (``neuron_sim.interpreter.transport.Transport``): the collective ops call
    :meth:`collective` with the devices of this rank that reached the collective.

    ``comm`` defaults to ``MPI.COMM_WORLD``; its size W must divide the device count.
    ``collective_groups`` (native mode) lists the participant groups of every collective of the
    module, so that the sub-communicators are created up front, before control flow can diverge.
    """

    name = "mpi"
    uses_fingerprints = True

    def __init__(self, layout: RankLayout, *, mode: str = "exact", timeout: float | None = None,
                 comm: Any = None,
                 collective_groups: Sequence[Sequence[Sequence[int]]] = ()) -> None:
        from mpi4py import MPI

        if mode not in MODES:
            raise ValueError(f"unknown MPI mode {mode!r}; choose one of {', '.join(MODES)}")
        world = MPI.COMM_WORLD if comm is None else comm
        if world.Get_size() != layout.world_size:
            raise ValueError(f"the rank layout is for {layout.world_size} processes but the "
                             f"communicator has {world.Get_size()}")
        self.layout = layout
        self.mode = mode
        self.rank = world.Get_rank()
        self.control = ControlPlane(world.Dup(), layout, timeout)
        self.data_comm = world.Dup()
        self.exchange = Exchange(self.data_comm, self.control.wait)
        self.native = None
        if mode == "native":
            from neuron_sim.interpreter.backends.mpi.native import NativeCollectives

            self.native = NativeCollectives(self.data_comm, layout, self.control.wait,
                                            collective_groups)
        self.collectives_run = 0

    @property
    def devices(self) -> tuple[int, ...]:
        """The flattened ids this rank hosts, ascending: the rows of its stacked values."""
        return self.layout.hosted(self.rank)

    # -- collectives ---------------------------------------------------------------------------
    def collective(self, call: CollectiveCall, fingerprint: Fingerprint) -> list[np.ndarray]:
        """The outputs of ``call`` for ``call.active``; raises MpiRunError if the run must end."""
        control = self.control
        control.poll_abort()
        native = self.native is not None and self.native.supports(call)
        if fingerprint is not None:
            # Both sides must move the data the same way; a disagreement is a mismatch, not a hang.
            fingerprint = Fingerprint((*fingerprint.fields,
                                       ("transport", "native" if native else "exact")))
        arrival = Arrival(self.rank, fingerprint, call.label or call.kind.spelling,
                          tuple(call.active))
        involved = set().union(*call.touching_groups(call.active)) if call.groups else set()
        if call.descriptor.group_reading is GroupReading.SOURCE_TARGET_PAIRS:
            involved |= {d for pair in call.pairs for d in pair if
                         pair[0] in call.active or pair[1] in call.active}
        peers = [r for r in self.layout.ranks_of(involved) if r != self.rank]
        received = control.rendezvous(arrival, peers)
        problem = check_groups_arrived(arrival, received.values(), call.groups, self.layout)
        if problem is not None:
            control.fail(CollectiveMismatch(problem))
        peer_active = {peer: other.active for peer, other in received.items()}
        # An error while moving or combining data propagates like in the local backend (the
        # evaluator names the instruction); ``run_mpi`` then ends every rank with it, and peers
        # waiting for this rank's data see the abort while they wait.
        if native:
            outputs = self.native.run(call, peer_active)
        else:
            outputs = exact_collective(call, self.exchange, self.layout, peer_active)
        self.collectives_run += 1
        return outputs

    # -- the end -------------------------------------------------------------------------------
    def finish(self) -> None:
        """Check that every rank passed the same collectives: the end-of-program rendezvous."""
        self.control.finish_rendezvous(self.devices)

    def gather(self, outputs: Sequence[np.ndarray]) -> list[np.ndarray] | None:
        """Rank 0 receives every rank's rows and returns ``[D, *shape]`` arrays; others None.

        ``outputs[j]`` is stacked over this rank's devices. Call after :meth:`finish`.
        """
        layout = self.layout
        specs = [ArraySpec(out.shape[1:], out.dtype) for out in outputs]
        if self.rank != 0:
            self.exchange.swap({0: list(outputs)}, {}, "sending outputs to rank 0")
            return None
        receives = {peer: [ArraySpec((len(layout.hosted(peer)), *s.shape), s.dtype)
                           for s in specs] for peer in range(1, layout.world_size)}
        received = self.exchange.swap({}, receives, "gathering outputs")
        full = []
        for j, spec in enumerate(specs):
            array = np.empty((layout.num_devices, *spec.shape), dtype=spec.dtype)
            array[list(self.devices)] = outputs[j]
            for peer, arrays in received.items():
                array[list(layout.hosted(peer))] = arrays[j]
            full.append(array)
        return full

    def close(self) -> None:
        """Release this transport's communicators after a successful run (every rank calls it)."""
        self.control.flush_sends()
        for comm in [self.control.comm, self.data_comm, *self._native_comms()]:
            comm.Free()

    def _native_comms(self) -> list[Any]:
        return list(self.native.communicators()) if self.native is not None else []

    def fail(self, error: BaseException, *, exit_code: int | None = None):
        """End the run for an error raised on this rank (all ranks raise the agreed MpiRunError)."""
        self.control.fail(error, exit_code=exit_code)
