"""RewriteModuleDtype: value-movement modules computed in bf16, within half a bf16 ulp; other
families declined; bad option pairs refused. Bounds derived by hand in the docstrings."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.passes import PassError, get_pass
from neuron_sim.passes.contracts import BF16_HALF_ULP, EXACT, INFINITY_TO_FINITE, Tolerance, weakest
from neuron_sim.verify import VerifyOptions, check_pass

from pass_fixtures import load


def test_movement_module_is_computed_in_bf16_with_f32_interface():
    module = load("cleanup_io/movement_flat.hlo")
    dtype = get_pass("aws_neuron_rewrite_module_dtype")
    assert dtype.run(module) is True
    text = module.to_text()
    assert "bf16[2,4]{1,0} transpose" in text and "bf16[2,4]{1,0} maximum" in text
    assert str(module.entry.root.shape) == "f32[2,4]{1,0}"
    assert [str(p.shape) for p in module.entry.parameters] == ["f32[4,2]{1,0}", "f32[2]{0}"]


def test_it_verifies_under_the_tolerance_and_not_exactly():
    module = load("cleanup_io/movement_flat.hlo")
    result = check_pass(module, "aws_neuron_rewrite_module_dtype", ["1x1"], VerifyOptions(trials=3))
    assert str(result.status) == "CORRECT" and result.contract is BF16_HALF_ULP
    from neuron_sim.verify import check_modules
    target = module.clone()
    get_pass("aws_neuron_rewrite_module_dtype").run(target)
    assert str(check_modules(module, target, ["1x1"],
                             VerifyOptions(trials=1, minimize=False)).status) == \
        "UNSOUND"  # rounding f32 inputs to bf16 changes them: exactly is too strict


def test_the_half_ulp_bound_per_element():
    """bf16 has 7 stored mantissa bits: at 1.0 its ulp is 2**-7, so 1 + 2**-8 is half an ulp
    away and allowed, 1 + 2**-7 (a full ulp) is not; 3.4e38 is beyond bf16's max 3.39e38 and
    may overflow to inf."""
    source = np.array([1.0, 1.0, 3.4e38, np.nan, 1.0], dtype=np.float32)
    target = np.array([1 + 2**-8, 1 + 2**-7, np.inf, np.nan, np.nan], dtype=np.float32)
    assert BF16_HALF_ULP.allowed(source, target).tolist() == [True, False, True, True, False]


def test_arithmetic_and_discrete_consumers_are_declined():
    for result, body in (("f32", "ROOT %r = f32[2]{0} add(%x, %x)"),
                         ("pred", "%c = pred[2]{0} compare(%x, %x), direction=LT\n"
                                  "  ROOT %r = pred[2]{0} not(%c)")):
        module = parse_module(f"HloModule m\nENTRY %e (x: f32[2]) -> {result}[2] {{\n"
                              f"  %x = f32[2]{{0}} parameter(0)\n  {body}\n}}\n")
        dtype = get_pass("aws_neuron_rewrite_module_dtype")
        assert dtype.run(module) is False and dtype.declined


@pytest.mark.parametrize("options", [{"to": "f16"}, {"to": "f32"}, {"to": "s32"}])
def test_bad_pairs_are_refused(options):
    module = load("cleanup_io/movement_flat.hlo")
    with pytest.raises((PassError, ValueError)):
        get_pass("aws_neuron_rewrite_module_dtype", **options).run(module)


def test_composition_of_contracts():
    assert weakest([EXACT, EXACT]) is EXACT
    assert weakest([EXACT, INFINITY_TO_FINITE]) is INFINITY_TO_FINITE
    assert weakest([EXACT, BF16_HALF_ULP]) is BF16_HALF_ULP
    both = weakest([BF16_HALF_ULP, INFINITY_TO_FINITE, BF16_HALF_ULP])
    assert isinstance(both, Tolerance) and both.ulps == 0.5 and both.also is INFINITY_TO_FINITE
    twice = weakest([BF16_HALF_ULP, Tolerance("again", 0.5, ml_dtypes.bfloat16, "again")])
    assert twice.ulps == 1.0
    source = np.array([-np.inf, 1.0], dtype=np.float32)
    target = np.array([-3.0e38, 1 + 2**-8], dtype=np.float32)
    assert both.allowed(source, target).tolist() == [True, True]
