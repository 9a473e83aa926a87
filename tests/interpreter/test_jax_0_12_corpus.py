"""The JAX 0.12 corpus (tests/data/jax_0_12): every module checks, and every runnable one matches
JAX's per-device outputs, as the 0.10 corpus does (tests/interpreter/test_jax_corpus.py: the
same tolerances by op family, the same documented XLA:CPU difference for denormals).

The corpus is the 0.10 program list regenerated with jax 0.12 plus programs for what 0.12 emits
(scripts/jax_programs/jax_0_12/): ``%x#i`` tuple-element operands in XLA's pass dumps,
collectives over mesh-axis subsets in non-canonical order, ``topk``, ``GetRngSeed``, and
``ragged-all-to-all``, whose expected outputs are a numpy emulation checked against the results
JAX's own ragged_all_to_all tests state (XLA:CPU cannot execute the op; the manifest says so).

To stay fast, the modules inherited from the 0.10 list are sampled (every third, by name); the
programs new in 0.12 all run. ``NEURON_SIM_FULL_JAX_CORPUS=1`` runs every module.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module, parse_module_file
from neuron_sim.hlo.checker import check_module
from neuron_sim.io import read_npz
from test_jax_corpus import (DENORMALS_FLUSHED_BY_XLA_CPU, TOLERANCE_ULPS, _with_groups_as_lists,
                             family, ulps_apart)

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = DATA / "jax_0_12"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
OLD_NAMES = {e["name"] for e in json.loads((DATA / "jax" / "MANIFEST.json").read_text())}
FULL = os.environ.get("NEURON_SIM_FULL_JAX_CORPUS") == "1"

# Lowered sort comparators in jax 0.12 write `compare(a, b), direction=LT, order=TOTAL` (XLA's
# comparison-order attribute) where 0.10 wrote `type=TOTALORDER`; the parser reads it as the
# total order. These modules sort rows holding NaN, so they stay in the sample.
ORDER_TOTAL = {"lowered_argsort", "lowered_compare_nan"}


def _sampled(entries: list[dict]) -> list[dict]:
    if FULL:
        return entries
    inherited = sorted(e["name"] for e in entries if e["name"] in OLD_NAMES)
    keep = set(inherited[::3]) | ORDER_TOTAL
    return [e for e in entries if e["name"] not in OLD_NAMES or e["name"] in keep]


RUNNABLE = [e for e in MANIFEST if e["runnable"]]
NEW = [e for e in MANIFEST if e["name"] not in OLD_NAMES]


def test_the_corpus_holds_the_0_10_programs_and_what_0_12_emits():
    names = {e["name"] for e in MANIFEST}
    assert OLD_NAMES <= names
    assert len(NEW) >= 20
    features = set().union(*(e["features"] for e in NEW))
    for needed in ("ragged-all-to-all", "moe_dispatch", "axis_order", "mesh3d", "topk",
                   "get_rng_seed", "tuple_operands", "all-gather", "reduce-scatter", "all-to-all",
                   "collective-permute"):
        assert needed in features, needed
    texts = {e["name"]: (CORPUS / f"{e['name']}.hlo").read_text() for e in MANIFEST}
    everything = "".join(texts.values())
    for form in ("{'y','x'}", "{'c','b','a'}", "{'c','a'}", "topk(", "is_stable=true",
                 'custom_call_target="GetRngSeed"', "_xla_cse_safe_zero_operand",
                 "is_spmd_generated", "xla_cpu_small_call", "control-predecessors=",
                 "ragged-all-to-all("):
        assert form in everything, form
    tuple_operand = re.compile(r"[(,] ?%[\w.\-]+#\d")
    assert sum(bool(tuple_operand.search(t)) for t in texts.values()) >= 10


def test_ragged_modules_say_their_outputs_are_emulated():
    ragged = [e for e in MANIFEST if "ragged-all-to-all" in e["features"]]
    assert len(ragged) >= 8
    assert {e["kind"] for e in ragged} == {"compiled", "partitioned"}
    for entry in ragged:
        assert "numpy emulation" in entry["expected_outputs"], entry["name"]
        assert entry["runnable"], entry["name"]
    assert all("expected_outputs" not in e for e in MANIFEST
               if "ragged-all-to-all" not in e["features"])


JAX_RAGGED_TESTS = {
    # module: the result JAX's ragged_collective_test.py states for the same inputs
    "spmd_ragged_jax_test_x2": [[1, 3, 0, 0], [2, 2, 4, 0]],
    "spmd_ragged_axis_index_groups_x4": [[1, 3, 0, 0], [2, 2, 4, 0], [10, 30, 0, 0],
                                         [20, 20, 40, 0]],
    "spmd_ragged_degenerate_x2": [[0, 0, 1, 0], [0, 2, 3, 4]],
}


@pytest.mark.parametrize("name", sorted(JAX_RAGGED_TESTS))
def test_ragged_modules_give_the_results_jax_tests_state(name):
    """These modules hold the inputs of JAX's test_ragged_all_to_all (two devices, uneven
    slices), ..._axis_index_groups (groups {0,1},{2,3}) and ..._degenerate_groups (singleton
    groups); the stored expectation and neuron-sim's result must both be what JAX's test says."""
    want = JAX_RAGGED_TESTS[name]
    data = read_npz(CORPUS / f"{name}.npz")
    assert data["out0"].reshape(len(want), 4).tolist() == want
    module = parse_module_file(CORPUS / f"{name}.hlo")
    (got,) = interpreter.run(module, {k: v for k, v in data.items() if k.startswith("arg")})
    assert got.reshape(len(want), 4).tolist() == want


CHECKED = _sampled(MANIFEST)


@pytest.mark.parametrize("entry", CHECKED, ids=[e["name"] for e in CHECKED])
def test_module_passes_the_checker(entry):
    check_module(parse_module_file(CORPUS / f"{entry['name']}.hlo"))


MATCHED = _sampled(RUNNABLE)


@pytest.mark.parametrize("entry", MATCHED, ids=[e["name"] for e in MATCHED])
def test_module_matches_jax(entry):
    name = entry["name"]
    module = parse_module_file(CORPUS / f"{name}.hlo")
    data = read_npz(CORPUS / f"{name}.npz")
    outputs = interpreter.run(module, {k: v for k, v in data.items() if k.startswith("arg")})
    assert len(outputs) == len([k for k in data if k.startswith("out")])
    for j, got in enumerate(outputs):
        expected = data[f"out{j}"]
        if expected.dtype.kind == "V":
            expected = expected.view(got.dtype)
        assert got.shape == expected.shape and got.dtype == expected.dtype, f"out{j}"
        if got.dtype.kind in "biu":
            differ = np.flatnonzero((got != expected).reshape(-1)).tolist()
            assert differ == DENORMALS_FLUSHED_BY_XLA_CPU.get((name, j), []), f"out{j}"
            continue
        limit = TOLERANCE_ULPS[(family(entry), got.dtype.itemsize < 4)]
        distance = ulps_apart(got, expected)
        assert distance.max(initial=0) <= limit, (
            f"out{j}: {int((distance > limit).sum())} elements differ by more than {limit} "
            f"ulps (max {distance.max()})")


UNRUNNABLE = [e for e in MANIFEST if not e["runnable"]]


@pytest.mark.parametrize("entry", UNRUNNABLE, ids=[e["name"] for e in UNRUNNABLE])
def test_unrunnable_module_names_what_is_missing(entry):
    """Lowered shard_map modules hold JAX-only custom-calls; compiled_rng_get_seed holds
    XLA:CPU's GetRngSeed, whose value is a seed only XLA:CPU's runtime knows."""
    module = parse_module_file(CORPUS / f"{entry['name']}.hlo")
    with pytest.raises(interpreter.Unimplemented, match="custom-call.*custom_call_target="):
        interpreter.run(module, seed=0)


MESH_GROUPS = [e for e in NEW if e["runnable"] and "mesh_groups" in e["features"]]


@pytest.mark.parametrize("entry", MESH_GROUPS, ids=[e["name"] for e in MESH_GROUPS])
def test_mesh_form_groups_written_as_lists_give_bit_identical_outputs(entry):
    """A collective over ('y','x') or ('c','b','a') in mesh form and the same groups written out
    as explicit lists (ordered as the mesh form reads them) give the same bits."""
    text = (CORPUS / f"{entry['name']}.hlo").read_text()
    as_lists = _with_groups_as_lists(text)
    assert "replica_groups=mesh[" not in as_lists
    data = read_npz(CORPUS / f"{entry['name']}.npz")
    inputs = {key: value for key, value in data.items() if key.startswith("arg")}
    mesh_outputs = interpreter.run(parse_module(text), inputs)
    list_outputs = interpreter.run(parse_module(as_lists), inputs)
    for j, (mesh_out, list_out) in enumerate(zip(mesh_outputs, list_outputs, strict=True)):
        assert mesh_out.tobytes() == list_out.tobytes(), f"out{j}"
