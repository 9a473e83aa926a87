"""Every runnable module of the JAX corpus (tests/data/jax) matches JAX's per-device outputs.

Integers and predicates must match exactly. Floats must match within a tolerance that depends on
the dtype and on the op family of the module (docs/run.md, "Accuracy"), counted in units in the
last place (ulps) of the expected value:

| op family (manifest features)                              | f32 / f64 | bf16 / f16 |
|------------------------------------------------------------|-----------|------------|
| data movement, integer-exact arithmetic, collectives       | 0 (bits)  | 0 (bits)   |
| transcendental (exp, log, tanh, logistic, erf, atan2, ...) | 2         | 1          |
| sums of many terms (reduce, reduce-window, dot, convolution)| 8         | 2          |

XLA:CPU evaluates transcendental functions with its own approximations (we are correctly
rounded) and sums in its own order (we fold left in index order), so the last bits may differ.
One documented exception, not a tolerance: XLA:CPU runs with denormals flushed to zero; the
interpreter computes IEEE denormals, so ``compare(±1.4e-45, 0)`` in ``*_convert_edge`` (elements
26 and 27 of out5) is true here and false in XLA.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module, parse_module_file, print_module
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology

CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
RUNNABLE = [entry for entry in MANIFEST if entry["runnable"]]

TRANSCENDENTAL = {"exp", "expm1", "exponential-minus-one", "log", "log1p", "log-plus-one",
                  "tanh", "logistic", "erf", "erf_inv", "atan2", "rsqrt", "sqrt", "softmax",
                  "logsumexp"}
SUMMING = {"reduce", "reduce-window", "dot", "dot_general", "matmul", "convolution", "cumsum",
           "softmax", "logsumexp", "avg_pool"}
# ulps by (family, narrow float?)
TOLERANCE_ULPS = {("exact", False): 0, ("exact", True): 0,
                  ("transcendental", False): 2, ("transcendental", True): 1,
                  ("summing", False): 8, ("summing", True): 2}
# (module, output, flat indices): expected disagreements, explained in the module docstring.
DENORMALS_FLUSHED_BY_XLA_CPU = {("lowered_convert_edge", 5): [26, 27],
                                ("compiled_convert_edge", 5): [26, 27]}


def family(entry: dict) -> str:
    features = set(entry["features"])
    if features & SUMMING:
        return "summing"
    if features & TRANSCENDENTAL:
        return "transcendental"
    return "exact"


def ulps_apart(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """|got - expected| in ulps of the expected value's type (NaN == NaN, equal infinities)."""
    info = ml_dtypes.finfo(expected.dtype) if expected.dtype.kind == "V" else \
        np.finfo(expected.dtype)
    a, b = got.astype(np.float64), expected.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        exponent = np.floor(np.log2(np.maximum(np.abs(b), float(info.tiny))))
        ulp = np.exp2(exponent - info.nmant)
        distance = np.where(same, 0.0, np.abs(a - b) / ulp)
    return np.where(np.isnan(distance), np.inf, distance)


def test_the_corpus_is_big_enough():
    assert len(RUNNABLE) >= 30
    features = set().union(*(e["features"] for e in RUNNABLE))
    for needed in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                   "collective-permute", "mesh2d", "device_dependent_control_flow", "sort",
                   "gather", "scatter", "convolution", "threefry", "bf16", "int"):
        assert needed in features, needed


@pytest.mark.parametrize("entry", RUNNABLE, ids=[e["name"] for e in RUNNABLE])
def test_module_matches_jax(entry):
    name = entry["name"]
    module = parse_module_file(CORPUS / f"{name}.hlo")
    data = read_npz(CORPUS / f"{name}.npz")
    inputs = {key: value for key, value in data.items() if key.startswith("arg")}
    outputs = interpreter.run(module, inputs)
    expected_count = len([k for k in data if k.startswith("out")])
    assert len(outputs) == expected_count
    for j, got in enumerate(outputs):
        expected = data[f"out{j}"]
        if expected.dtype.kind == "V":
            expected = expected.view(got.dtype)
        assert got.shape == expected.shape and got.dtype == expected.dtype, f"out{j}"
        if got.dtype.kind in "biu":
            differ = np.flatnonzero((got != expected).reshape(-1)).tolist()
            assert differ == DENORMALS_FLUSHED_BY_XLA_CPU.get((name, j), []), f"out{j}"
            continue
        narrow = got.dtype.itemsize < 4
        limit = TOLERANCE_ULPS[(family(entry), narrow)]
        distance = ulps_apart(got, expected)
        assert distance.max(initial=0) <= limit, (
            f"out{j}: {int((distance > limit).sum())} elements differ by more than {limit} "
            f"ulps (max {distance.max()})")


@pytest.mark.parametrize("entry", [e for e in MANIFEST if not e["runnable"]],
                         ids=[e["name"] for e in MANIFEST if not e["runnable"]])
def test_unrunnable_module_names_what_is_missing(entry):
    module = parse_module_file(CORPUS / f"{entry['name']}.hlo")
    with pytest.raises(interpreter.Unimplemented, match="custom-call.*custom_call_target="):
        interpreter.run(module, seed=0)


# One-device modules without collectives: run on 3 replicas they must give each device what it
# gives alone. (A one-device dump can keep degenerate collectives — spmd_schedule_psum_ppermute_1
# has an all-reduce over {{0}} — whose groups do not fit 3 devices.)
COLLECTIVE_TAGS = {"all-reduce", "all-gather", "reduce-scatter", "collective-permute",
                   "all-to-all"}
SINGLE_DEVICE = [e for e in RUNNABLE if e["replica_count"] * e["num_partitions"] == 1
                 and not COLLECTIVE_TAGS & set(e["features"])]


@pytest.mark.parametrize("entry", SINGLE_DEVICE, ids=[e["name"] for e in SINGLE_DEVICE])
def test_devices_with_different_inputs_each_get_their_own_single_device_result(entry):
    """Ops vectorized over devices (per-device values) agree with one device at a time."""
    module = parse_module_file(CORPUS / f"{entry['name']}.hlo")
    data = read_npz(CORPUS / f"{entry['name']}.npz")
    rng = np.random.default_rng(0)
    rows = {}
    for key, value in data.items():
        if not key.startswith("arg"):
            continue
        base = value[0]
        shuffled = rng.permutation(base.reshape(-1)).reshape(base.shape)
        reversed_ = base.reshape(-1)[::-1].reshape(base.shape)
        rows[key] = np.stack([base, shuffled, reversed_])
    stacked = interpreter.run(module, rows, topology=Topology(3, 1))
    for device in range(3):
        alone = interpreter.run(module, {k: v[device] for k, v in rows.items()},
                                topology=Topology(1, 1))
        for j, (many, one) in enumerate(zip(stacked, alone)):
            assert many[device].tobytes() == one[0].tobytes(), f"out{j} on device {device}"


MESH_GROUPS = [e for e in RUNNABLE if "mesh_groups" in e["features"]]


def test_the_corpus_has_jit_named_sharding_programs_with_mesh_form_groups():
    """JAX 0.10's SPMD partitioner prints mesh-form groups for jit + NamedSharding programs;
    the corpus holds them over 1-D and 2-D meshes, with device_ids and sub-axes."""
    assert len(MESH_GROUPS) >= 10
    assert {tuple(e["mesh"]) for e in MESH_GROUPS} >= {(8,), (4, 2), (2, 4)}
    texts = "".join((CORPUS / f"{e['name']}.hlo").read_text() for e in MESH_GROUPS)
    assert "device_ids=([" in texts and "':(2)2}" in texts
    features = set().union(*(e["features"] for e in MESH_GROUPS))
    for needed in ("all-reduce", "all-gather", "all-to-all", "collective-permute", "int"):
        assert needed in features, needed


def _with_groups_as_lists(text: str) -> str:
    """The module text with every mesh-form replica_groups written as explicit lists."""
    module = parse_module(text)
    rewritten = 0
    for computation in module.computations:
        for instruction in computation.instructions:
            groups = instruction.get("replica_groups")
            if groups is not None and groups.is_mesh:
                instruction.set_attr("replica_groups", ReplicaGroups.explicit(groups.groups))
                rewritten += 1
    assert rewritten
    return print_module(module)


@pytest.mark.parametrize("entry", MESH_GROUPS, ids=[e["name"] for e in MESH_GROUPS])
def test_mesh_form_groups_written_as_lists_give_bit_identical_outputs(entry):
    text = (CORPUS / f"{entry['name']}.hlo").read_text()
    as_lists = _with_groups_as_lists(text)
    assert "replica_groups=mesh[" not in as_lists and "replica_groups={{" in as_lists
    data = read_npz(CORPUS / f"{entry['name']}.npz")
    inputs = {key: value for key, value in data.items() if key.startswith("arg")}
    mesh_outputs = interpreter.run(parse_module(text), inputs)
    list_outputs = interpreter.run(parse_module(as_lists), inputs)
    assert len(mesh_outputs) == len(list_outputs)
    for j, (mesh_out, list_out) in enumerate(zip(mesh_outputs, list_outputs)):
        assert mesh_out.dtype == list_out.dtype and mesh_out.shape == list_out.shape
        assert mesh_out.tobytes() == list_out.tobytes(), f"out{j}"
