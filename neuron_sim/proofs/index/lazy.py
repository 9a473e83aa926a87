"""``LazyModule`` lives in the core now (``neuron_sim.lazy``), so that the core's own z3 terms
(``neuron_sim.semantics``) can bind z3 lazily too; this name stays for existing importers."""

from __future__ import annotations

from neuron_sim.lazy import LazyModule

__all__ = ["LazyModule"]
