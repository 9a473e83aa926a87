"""The closer on the corpus's masked softmax (``compiled_rmc_where_max_softmax``) is CORRECT on
sampled inputs and UNSOUND on one the samples never draw: ReplaceMinimumConstant's documented
unsafety (a finite result computed from the sentinel), reached here through exp.

By hand, one row of ``softmax(where(mask, x, -inf))`` with x[0] = lowest (-3.4028235e38) kept
and every other element masked out: the source's row maximum is lowest, so the kept element
gives exp(lowest - lowest) = 1 and the masked ones exp(-inf - lowest) = exp(-inf) = 0 — the row
is [1, 0, 0, 0, 0, 0]. The rewrite fills the mask with lowest instead of -inf: every element is
now lowest, each gives exp(0) = 1, and the row is [1/6, ..., 1/6]. A finite result changed:
outside the infinity-to-finite contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neuron_sim.hlo import parse_module_file
from neuron_sim.passes.named_pipelines import named_pipeline
from neuron_sim.verify import Status, VerifyOptions, check_pass

CORPUS = Path(__file__).resolve().parents[1] / "data" / "jax"
INJECT = "aws_neuron_inject_numerical_errors"


def test_the_closer_breaks_the_masked_softmax_at_the_lowest_value():
    module = parse_module_file(CORPUS / "compiled_rmc_where_max_softmax.hlo")
    lowest = np.finfo(np.float32).min
    x = np.ones((4, 6), np.float32)
    x[0, 0] = lowest
    mask = np.ones((4, 6), bool)
    mask[0, 1:] = False
    result = check_pass(module, named_pipeline("neuron-closer", [INJECT], {}), None,
                        VerifyOptions(inputs=[x, mask], minimize=False))
    assert result.status is Status.UNSOUND
    cex = result.topology_results[0].counterexample
    assert cex.leaf == 1 and cex.index == (0, 0)
    assert float(cex.source_value) == 1.0 and np.isclose(float(cex.target_value), 1 / 6)


def test_the_proof_finds_it_without_being_given_the_input():
    """The sampled inputs never hold the lowest float, and z3 has no model of the row's float
    sum; the proof's witness candidates include inputs whose floats all hold one constant of
    the source or target — here every x = lowest, so any row with a kept and a masked element
    has maximum lowest and differs as above — and the verifier confirms it: UNSOUND."""
    module = parse_module_file(CORPUS / "compiled_rmc_where_max_softmax.hlo")
    result = check_pass(module, named_pipeline("neuron-closer", [INJECT], {}), None,
                        VerifyOptions(trials=3, minimize=False))
    assert result.status is Status.UNSOUND
    assert any("witness" in note for note in result.notes)
    (x, _mask) = result.topology_results[0].counterexample.inputs
    assert (np.asarray(x) == np.finfo(np.float32).min).all()
