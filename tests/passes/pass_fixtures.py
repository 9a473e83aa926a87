"""Shared helpers for the pass tests: the HLO fixtures under tests/data/passes.

(A plain module, imported as ``pass_fixtures``: tests/ has no packages.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neuron_sim.hlo import HloModule, parse_module_file
from neuron_sim.io import read_npz

DATA = Path(__file__).resolve().parents[1] / "data" / "passes"
JAX_CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"


def fixture_path(name: str) -> Path:
    return DATA / name


def load(name: str) -> HloModule:
    """Parse ``tests/data/passes/<name>``."""
    return parse_module_file(str(DATA / name))


def jax_corpus_case(name: str) -> tuple[HloModule, list[np.ndarray], list[np.ndarray]]:
    """``tests/data/jax/<name>``: the parsed module, its inputs (one per entry parameter) and
    JAX's outputs (``out0``, ``out1``, ... in order)."""
    module = parse_module_file(str(JAX_CORPUS / f"{name}.hlo"))
    data = read_npz(JAX_CORPUS / f"{name}.npz")
    args = [data[f"arg{i}"] for i in range(len(module.entry.parameters))]
    outs = [data[f"out{j}"] for j in range(sum(k.startswith("out") for k in data))]
    return module, args, outs
