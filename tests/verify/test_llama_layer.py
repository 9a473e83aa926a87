"""The Llama-3-8B-shaped decoder layer of tests/data/llama (scripts/make_llama_corpus.py): the
interpreter runs the small variants like JAX, and verify proves the proven reduce-scatter
fold on the full-size TP=32 layer for all inputs without executing it."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module_file
from neuron_sim.io import read_npz
from neuron_sim.verify import Status, VerifyOptions, check_pass

CORPUS = Path(__file__).resolve().parents[1] / "data" / "llama"
MANIFEST = {e["name"]: e for e in json.loads((CORPUS / "MANIFEST.json").read_text())}


@pytest.mark.parametrize("name", ["llama_small_tp32", "llama_small_tp64"])
def test_the_small_layer_matches_jax_per_device(name):
    """JAX's per-device outputs (XLA:CPU, excess precision off) against the interpreter's.

    Tolerance: 2 bf16 ulps of the output's scale (its largest magnitude, 4.6 here: 2 x 2^-5).
    The layer is a chain of bf16 roundings (norms, RoPE, two attention dots, softmax, SwiGLU,
    three MLP dots, two residual adds); XLA:CPU's exp / rsqrt approximations and its
    summation order give 1-ulp f32 differences that a later bf16 rounding turns into one bf16
    ulp of an intermediate, and the residual adds carry that ulp at the scale of the output
    (the tolerance of tests/interpreter/test_jax_corpus.py is per element, which values near 0
    after a cancellation cannot meet). The check is not vacuous: the layer moves its input by
    far more than the tolerance, so an output that skipped attention or the MLP fails."""
    assert MANIFEST[name]["runnable"] and MANIFEST[name]["outputs"] == "jax"
    module = parse_module_file(CORPUS / f"{name}.hlo")
    data = read_npz(CORPUS / f"{name}.npz")
    (got,) = interpreter.run(module, {k: v for k, v in data.items() if k.startswith("arg")})
    expected = data["out0"].view(ml_dtypes.bfloat16).astype(np.float64)
    x = data["arg0"].view(ml_dtypes.bfloat16).astype(np.float64)
    assert got.shape == expected.shape == x.shape
    scale = np.abs(expected).max()
    tolerance = 2 * 2.0 ** (np.floor(np.log2(scale)) - 7)
    assert np.abs(got.astype(np.float64) - expected).max() <= tolerance
    assert np.abs(expected - x).max() > 10 * tolerance


def test_the_proven_fold_on_the_full_size_tp32_layer_is_proved_for_all_inputs():
    """hidden 4096, 32 heads, MLP 14336, sequence 2048, bf16, 32 devices. The fold turns both
    all-reduce + dynamic-slice pairs (after the o and down projections) into reduce-scatters;
    the slice offset of device d is 64 d (rows of the sequence), its reduce-scatter block
    d of 64 rows: the same sums. Its dots need about 5e11 multiply-adds, so verify proves it
    on symbolic positions instead of executing: CORRECT, all inputs."""
    module = parse_module_file(CORPUS / "llama3_8b_tp32.hlo")
    result = check_pass(module, "rewrite_all_reduce_dynamic_slice_proven",
                        options=VerifyOptions(trials=1, minimize=False))
    assert result.status is Status.CORRECT and result.proof == "all-inputs", result.detail
    (verdict,) = result.topology_results
    assert verdict.changed and len(verdict.rewrites) == 2
    assert verdict.proof_method == "positions" and verdict.compared == 0
    assert verdict.proof_outputs[0]["proof"] == "all-inputs"
