"""Helpers for the interpreter tests: build small modules from HLO text and run them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import HloModule, parse_module
from neuron_sim.topology import Topology


def module(body: str, *, header: str = "", computations: str = "") -> HloModule:
    """A module whose ENTRY computation has ``body`` (instructions, last one ROOT)."""
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    if not any(line.startswith("ROOT ") for line in lines):
        lines[-1] = "ROOT " + lines[-1]
    text = (f"HloModule test{', ' + header if header else ''}\n\n{computations}\n\n"
            "ENTRY main {\n  " + "\n  ".join(lines) + "\n}\n")
    return parse_module(text)


def run(body: str, *inputs, header: str = "", computations: str = "",
        topology: Topology | None = None, seed: int | None = None) -> list[np.ndarray]:
    """Run an entry body on inputs (one per parameter); outputs as [D, *shape] arrays."""
    return interpreter.run(module(body, header=header, computations=computations),
                           list(inputs), topology=topology, seed=seed)


def run1(body: str, *inputs, **kwargs) -> np.ndarray:
    """The single output of a one-device run, without the device axis."""
    (out,) = run(body, *inputs, **kwargs)
    assert out.shape[0] == 1
    return out[0]


def scalar_computation(name: str, op: str, element_type: str, *, direction: str = "") -> str:
    """A two-parameter scalar computation ``name`` applying ``op`` (a compare if ``direction``)."""
    result = "pred" if direction else element_type
    attrs = f", direction={direction}" if direction else ""
    return (f"\n{name} {{\n  a = {element_type}[] parameter(0)\n  b = {element_type}[] parameter(1)\n"
            f"  ROOT r = {result}[] {op}(a, b){attrs}\n}}\n")


ADD_F32 = scalar_computation("add_f32", "add", "f32")
ADD_S32 = scalar_computation("add_s32", "add", "s32")


DATA = Path(__file__).resolve().parents[1] / "data"


def runnable_corpus() -> list[tuple[str, Path, Path]]:
    """(id, module file, npz with its inputs) of every runnable module of the front ends'
    corpora: JAX 0.10 and 0.12 (tests/data/jax, jax_0_12) and PyTorch/XLA (torch_xla), as
    their manifests mark them."""
    cases = []
    for folder in ("jax", "jax_0_12"):
        for entry in json.loads((DATA / folder / "MANIFEST.json").read_text()):
            if entry["runnable"]:
                name = entry["name"]
                cases.append((f"{folder}/{name}", DATA / folder / f"{name}.hlo",
                              DATA / folder / f"{name}.npz"))
    for entry in json.loads((DATA / "torch_xla" / "MANIFEST.json").read_text()):
        runnable = entry.get("runnable", True)  # a bool, or one per module
        for module_file in entry["modules"]:
            if runnable.get(module_file, True) if isinstance(runnable, dict) else runnable:
                cases.append((f"torch_xla/{module_file}", DATA / "torch_xla" / module_file,
                              DATA / "torch_xla" / entry["data"]))
    return cases
