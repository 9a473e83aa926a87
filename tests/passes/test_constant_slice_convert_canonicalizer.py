"""ConstantSliceConvertCanonicalizer: convert(slice(constant)) and convert(constant) folded with
the interpreter's convert.

Hand derivations. f32 -> s32 (XLA saturates and maps NaN to 0; JAX's compiled dump of
``lowered_canon_convert_constant_slice`` folds the same table to
``{-2, 0, 2147483647, -2147483648, 2147483647, -2147483648, 2147483520, -2147483648}``): -2.5
truncates to -2, NaN -> 0, inf and 3e9 saturate to 2^31-1, -inf and -3e9 to -2^31. f32 -> bf16
(8 significant bits, ties to even): 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 -> 1 (even);
1 + 3*2^-8 halfway between 1 + 2^-7 (odd) and 1 + 2^-6 -> 1.015625; 3.4e38 is past the midpoint
(2 - 2^-8) * 2^127 ~ 3.3962e38 between bf16's largest finite value and 2^128 -> inf.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo import Opcode
from neuron_sim.passes import PassPipeline
from neuron_sim.verify import VerifyOptions, check_pass

from canonicalizer_fixtures import jax_module, module_of, run, verdicts

KEY = "aws_neuron_constant_slice_convert_canonicalizer"
TABLE = "f32[8] constant({9, -2.5, nan, inf, -inf, 3e+09, -3e+09, 1.5})"


def folded(module) -> np.ndarray:
    root = module.entry.root
    assert root.opcode is Opcode.CONSTANT
    return np.asarray(root.literal.value)


def test_f32_to_s32_saturates_and_maps_nan_to_zero():
    module = module_of(f"t = {TABLE}", "s = f32[6] slice(t), slice={[1:7]}",
                       "c = s32[6] convert(s)")
    assert run(KEY, module)[0]
    assert folded(module).tolist() == [-2, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31]


def test_f32_to_bf16_rounds_to_nearest_even_and_overflows_to_inf():
    module = module_of("t = f32[4] constant({0, 1.00390625, 1.01171875, 3.4e+38})",
                       "s = f32[3] slice(t), slice={[1:4]}", "c = bf16[3] convert(s)")
    assert run(KEY, module)[0]
    assert folded(module).astype(np.float64).tolist() == [1.0, 1.015625, np.inf]


def test_strided_slice_and_a_bare_constant_fold():
    module = module_of(f"t = {TABLE}", "s = f32[4] slice(t), slice={[0:8:2]}",
                       "c = s32[4] convert(s)")
    assert run(KEY, module)[0]
    assert folded(module).tolist() == [9, 0, -2**31, -2**31]
    module = module_of(f"t = {TABLE}", "c = f16[8] convert(t)")
    assert run(KEY, module)[0]
    # f16's largest finite value is 65504: +-3e9 overflow to +-inf; the rest are exact in f16.
    assert np.array_equal(folded(module).astype(np.float64),
                          [9, -2.5, np.nan, np.inf, -np.inf, np.inf, -np.inf, 1.5], equal_nan=True)


def test_folding_verifies_on_three_topologies():
    module = module_of(f"t = {TABLE}", "s = f32[6] slice(t), slice={[1:7]}",
                       "c = s32[6] convert(s)")
    assert verdicts(KEY, module) == ["CORRECT"] * 3


def test_convert_of_a_parameter_declines():
    module = module_of("x = f32[4] parameter(0)", "c = s32[4] convert(x)")
    assert run(KEY, module) == (False, [])


def test_convert_of_an_elided_constant_declines():
    module = module_of("t = f32[4] constant({...})", "c = s32[4] convert(t)")
    assert run(KEY, module) == (False, [])


def test_a_constant_larger_than_max_elements_declines():
    module = module_of(f"t = {TABLE}", "c = s32[8] convert(t)")
    assert run(KEY, module, max_elements=7) == (False, [])


def test_fires_on_the_jax_dump_and_verifies():
    module = jax_module("lowered_canon_convert_constant_slice")
    changed, log = run(KEY, module.clone())
    assert changed and [line.split(" ")[0] for line in log] == ["%convert_element_type.8"]
    assert verdicts(KEY, module) == ["CORRECT"] * 3


def test_after_peeling_the_barrier_both_slices_of_the_jax_dump_fold():
    pipeline = "aws_neuron_peel_optimization_barriers," + KEY
    module = jax_module("lowered_canon_convert_constant_slice")
    result = check_pass(module, pipeline, ["1x1", "2x2", "1x4"], VerifyOptions(minimize=False))
    assert [str(t.status) for t in result.topology_results] == ["CORRECT"] * 3
    peeled = module.clone()
    PassPipeline(pipeline.split(",")).run(peeled)
    converts = [i for c in peeled.computations if c.is_entry for i in c.instructions
                if i.opcode is Opcode.CONVERT]
    assert [i.name for i in converts] == ["convert_element_type.9"]  # the parameter's
