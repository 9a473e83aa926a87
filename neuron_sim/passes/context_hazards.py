"""What a pass relies on without checking it: the declaration ``check-schedule`` judges.

A pass is sound only where its assumptions about the context hold; most passes have none and
declare nothing (``HloPass.hazard`` is None). A pass that has some declares them next to its
other facts::

    hazard = relies_on(Reliance.FOLD_OFFSETS, Reliance.LOGICAL_GROUPS)

The declaration is data. The rule that judges each assumption on a module and a topology is the
verifier's (``neuron_sim.verify.schedule.hazards``), which reads it from the pass class.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.topology import Topology

IdentityRule = Callable[[HloInstruction, Topology], str | None]
"""Why a collective the pass deletes is not the identity on a topology (None: it is)."""


class Reliance(str, enum.Enum):
    """One assumption a pass makes about its context; the value says it in words."""

    IDENTITY_COLLECTIVES = ("every deleted collective is the identity on the topology (XLA's "
                            "degenerate rules)")
    FOLD_OFFSETS = ("the offset computation selects each device's reduce-scatter block on the "
                    "topology")
    LOGICAL_GROUPS = "replica groups are logical ids (not yet legalized to physical device ids)"
    PINNED_SEED = "a pinned seed (deterministic compiles)"
    SINGLE_RUN = "it runs once, on logical groups"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ContextHazard:
    """The assumptions of one pass. ``identity_rule`` goes with IDENTITY_COLLECTIVES: the pass's
    own test of whether a collective it deletes is the identity."""

    reliances: frozenset[Reliance]
    identity_rule: IdentityRule | None = None

    def __post_init__(self) -> None:
        if not self.reliances:
            raise ValueError("a context hazard relies on something; declare none instead")
        needs_rule = Reliance.IDENTITY_COLLECTIVES in self.reliances
        if needs_rule != (self.identity_rule is not None):
            raise ValueError("IDENTITY_COLLECTIVES goes with an identity_rule, and only it")

    def relies(self, reliance: Reliance) -> bool:
        """Does the pass make assumption ``reliance``?"""
        return reliance in self.reliances

    def describe(self) -> str:
        """The assumptions in words, in the order ``Reliance`` lists them."""
        return "; ".join(r.value for r in Reliance if r in self.reliances)


def relies_on(*reliances: Reliance, identity_rule: IdentityRule | None = None) -> ContextHazard:
    """The declaration of a pass that makes the assumptions ``reliances``."""
    return ContextHazard(frozenset(reliances), identity_rule)
