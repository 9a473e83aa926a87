"""A bounded sample of the closer's acceptance run (scripts/closer_corpus.py runs all of it).

Representative runnable JAX modules — a collective, argmax (variadic reduce), a data-dependent
cond, rng_uniform, constant- and out-of-range-start dynamic slices, a data-dependent while loop —
each through ``neuron-closer`` without InjectNumericalErrors: the rewrite verifies CORRECT under
the composed contract on the module's topology, and, where the closer keeps values exact, the
rewritten module run on JAX's inputs gives JAX's outputs bit for bit (an oracle independent of
the verifier). The positive control (InjectNumericalErrors with ``targets=root`` in the closer)
is UNSOUND on each. The documented known verdict: a variadic all-to-all makes
DeviceAssignmentLegalization raise (the seed's ``CHECK(inst->operands().size() == 1)``), an
ERROR naming that pass, never a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module_file
from neuron_sim.io import read_npz
from neuron_sim.topology import Topology
from neuron_sim.passes import PassContext, PassPipeline
from neuron_sim.passes.named_pipelines import named_pipeline
from neuron_sim.verify.api import VerifyOptions, check_pass
from neuron_sim.verify.result import Status

CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"
INJECT = "aws_neuron_inject_numerical_errors"
CONTROL = {f"{INJECT}.targets": "root"}

# module -> whether the closer keeps its values exact on JAX's inputs (rng draws are refolded)
SAMPLE = {
    "spmd_psum_1d": True,
    "spmd_argcond_cond_psum": True,
    "lowered_argmax": True,
    "lowered_argcond_cond": True,
    "lowered_rng_uniform_f32": False,
    "lowered_canon_dynamic_slice_constant_starts": True,
    "compiled_dynamic_slice_oob": True,
}


def corpus_case(name: str) -> tuple:
    module = parse_module_file(CORPUS / f"{name}.hlo")
    data = read_npz(CORPUS / f"{name}.npz")
    inputs = {k: v for k, v in data.items() if k.startswith("arg")}
    outputs = [data[f"out{j}"] for j in range(sum(k.startswith("out") for k in data))]
    return module, inputs, outputs


def closer(skip_inject: bool = True) -> list:
    return named_pipeline("neuron-closer", [INJECT] if skip_inject else [], CONTROL)


def test_the_sample_is_runnable_and_covers_the_idioms():
    manifest = {e["name"]: e for e in json.loads((CORPUS / "MANIFEST.json").read_text())}
    features = set().union(*(manifest[name]["features"] for name in SAMPLE))
    assert all(manifest[name]["runnable"] for name in SAMPLE)
    for needed in ("all-reduce", "argmax", "cond", "rng", "dynamic-slice", "out_of_range"):
        assert needed in features, needed


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_closer_verifies_and_the_positive_control_is_unsound(name):
    module, inputs, expected = corpus_case(name)
    result = check_pass(module, closer(), None,
                        VerifyOptions(trials=2, minimize=False, name_breaking_pass=True))
    assert result.status is Status.CORRECT, (result.error_line, result.detail)
    assert result.changed
    control = check_pass(module, closer(skip_inject=False), None,
                         VerifyOptions(trials=2, minimize=False, pass_options=CONTROL))
    assert control.changed and control.status is Status.UNSOUND, control.detail
    if SAMPLE[name]:
        target = module.clone()
        topology = Topology(module.replica_count, module.num_partitions)
        assert PassPipeline(closer()).run(target, PassContext(topology=topology))
        got = interpreter.run(target, inputs, topology=topology)
        assert len(got) == len(expected)
        for j, (out, want) in enumerate(zip(got, expected)):
            want = want.view(out.dtype) if want.dtype.kind == "V" else want
            assert np.array_equal(out, want, equal_nan=out.dtype.kind == "f"), f"out{j}"


def test_a_loop_unfinished_on_drawn_inputs_verifies_on_jax_inputs():
    """The Collatz loop does not end on most drawn s32 inputs (FAILED_TO_PROVE there); on the
    inputs JAX ran it on it ends, and the closer verifies and the control is caught."""
    module, inputs, _ = corpus_case("lowered_while_collatz")
    values = [inputs[f"arg{i}"] for i in range(len(inputs))]
    result = check_pass(module, closer(), None, VerifyOptions(inputs=values, minimize=False))
    assert result.status is Status.CORRECT and result.changed, result.detail
    control = check_pass(module, closer(skip_inject=False), None,
                         VerifyOptions(inputs=values, minimize=False, pass_options=CONTROL))
    assert control.status is Status.UNSOUND


def test_a_variadic_all_to_all_is_an_error_naming_device_assignment_legalization():
    module, _, _ = corpus_case("spmd_all_to_all_1d")
    result = check_pass(module, closer(), None,
                        VerifyOptions(trials=1, minimize=False, name_breaking_pass=True))
    assert result.status is Status.ERROR and result.breaking_pass is None
    assert "pass aws_neuron_device_assignment_legalization failed" in result.detail
    assert "operands().size() == 1" in result.detail
