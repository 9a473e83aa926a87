"""Shared helpers for the closer's canonicalizer tests: a module from a few HLO lines, the JAX
corpus modules that hold the idioms, and the verifier on three topologies.

(A plain module, imported as ``canonicalizer_fixtures``: tests/ has no packages.)
"""

from __future__ import annotations

from neuron_sim.hlo import HloModule, parse_module, parse_module_file
from neuron_sim.passes import get_pass
from neuron_sim.verify import VerifyOptions, check_pass

from pass_fixtures import JAX_CORPUS

TOPOLOGIES = ["1x1", "2x2", "1x4"]


def module_of(*lines: str) -> HloModule:
    """A module whose entry is ``lines`` (the last one is the root)."""
    body = "\n".join("  " + line for line in lines[:-1])
    return parse_module(f"HloModule t\n\nENTRY e {{\n{body}\n  ROOT {lines[-1]}\n}}\n")


def jax_module(name: str) -> HloModule:
    return parse_module_file(str(JAX_CORPUS / f"{name}.hlo"))


def run(key: str, module: HloModule, **options) -> tuple[bool, list[str]]:
    """Run pass ``key`` on ``module`` in place: whether it changed it, and its rewrite log."""
    hlo_pass = get_pass(key, **options)
    changed = hlo_pass.run(module)
    return changed, hlo_pass.rewrites


def verdicts(key: str, module: HloModule) -> list[str]:
    """The verifier's status for pass ``key`` on each of TOPOLOGIES."""
    result = check_pass(module, key, TOPOLOGIES, VerifyOptions(minimize=False))
    return [str(t.status) for t in result.topology_results]
