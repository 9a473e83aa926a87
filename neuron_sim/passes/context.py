"""What a pass may know beyond the module it rewrites."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology


@dataclass(frozen=True)
class PassContext:
    """What a pass may know beyond the module: the topology it is compiled for and user options.

    ``topology`` None means the module header's ``replica_count`` x ``num_partitions`` with
    XLA's default device assignment. ``options`` are the user's ``NAME=VALUE`` (every pass that
    declares NAME takes it) or ``PASSKEY.NAME=VALUE`` (only that pass), as text; each pass
    converts the ones it declares (``HloPass.option``). A verifier that checks a pass on several
    topologies runs it once per topology, each with its own context.
    """

    topology: Topology | None = None
    options: Mapping[str, str] = field(default_factory=dict)

    def topology_for(self, module: HloModule) -> Topology:
        """The topology ``module`` is compiled for: ours if given, else its header's."""
        if self.topology is not None:
            return self.topology
        return Topology(module.replica_count, module.num_partitions)
