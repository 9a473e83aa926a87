"""Shared helpers for the pass tests: the HLO fixtures under tests/data/passes.

(A plain module, imported as ``pass_fixtures``: tests/ has no packages.)
"""

from __future__ import annotations

from pathlib import Path

from neuron_sim.hlo import HloModule, parse_module_file

DATA = Path(__file__).resolve().parents[1] / "data" / "passes"
JAX_CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"


def fixture_path(name: str) -> Path:
    return DATA / name


def load(name: str) -> HloModule:
    """Parse ``tests/data/passes/<name>``."""
    return parse_module_file(str(DATA / name))
