"""DynamicSliceTranspose: dynamic-slice(transpose(x, perm), s) -> transpose(dynamic-slice(x, s'),
perm) with s'[perm[i]] = s[i] (and the sizes likewise).

Expected values: JAX's outputs for the corpus programs, and the source module itself run on
every start vector (the rewrite must be exact). The permuted clamp: dimension i of the
transposed array is dimension perm[i] of x with the same extent, so clamping s[i] to
[0, y_dim[i] - size[i]] and s'[perm[i]] to [0, x_dim[perm[i]] - size'[perm[i]]] is the same
clamp — the per-device run below checks it on starts from -3 to past the end.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import Opcode
from neuron_sim.hlo.builder import ModuleBuilder
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.verify import Status, VerifyOptions, check_pass

from pass_fixtures import jax_corpus_case

KEY = "aws_neuron_dynamic_slice_transpose"


def transposed_slice_module(perm=(2, 0, 1), sizes=(2, 2, 3), transpose_other_user=False):
    builder = ModuleBuilder("dst")
    main = builder.computation("main")
    x = main.parameter(0, "f32[3,4,5]", "x")
    starts = [main.parameter(1 + i, "s32[]", f"s{i}") for i in range(3)]
    t = main.transpose(x, perm, name="t")
    ds = main.dynamic_slice(t, starts, sizes, name="ds")
    root = main.tuple([ds, t]) if transpose_other_user else ds
    return builder.build(main.build(root))


def test_the_slice_moves_under_the_transpose_with_permuted_starts_and_sizes():
    module = transposed_slice_module()
    assert get_pass(KEY).run(module) is True
    root = module.entry.root
    assert root.opcode is Opcode.TRANSPOSE and tuple(root.get("dimensions")) == (2, 0, 1)
    ds = root.operand(0)
    assert ds.opcode is Opcode.DYNAMIC_SLICE and ds.operand(0).name == "x"
    # inv = (1, 2, 0): x's dim 0 is t's dim 1, x's dim 1 is t's dim 2, x's dim 2 is t's dim 0
    assert [op.name for op in ds.operands[1:]] == ["s1", "s2", "s0"]
    assert tuple(ds.get("dynamic_slice_sizes")) == (2, 3, 2)
    assert str(root.shape.without_layout()) == "f32[2,2,3]"


def test_the_permuted_clamp_equals_the_original_on_out_of_range_starts():
    source = transposed_slice_module()
    target = source.clone()
    assert get_pass(KEY).run(target) is True
    # t = f32[5,3,4], sizes (2,2,3): valid starts are [0,3] x [0,1] x [0,1]; go beyond both ends
    combos = np.array(list(itertools.product(range(-3, 8), range(-2, 5), range(-2, 5))),
                      np.int32)
    topology = Topology(1, len(combos))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    inputs = [x, combos[:, 0], combos[:, 1], combos[:, 2]]
    want = interpreter.run(source, inputs, topology)[0]
    got = interpreter.run(target, inputs, topology)[0]
    np.testing.assert_array_equal(got, want)
    t = x.transpose(2, 0, 1)  # the clamp by hand for one far-out start: (7, -2, 4) -> (3, 0, 1)
    far = next(i for i, c in enumerate(combos) if tuple(c) == (7, -2, 4))
    np.testing.assert_array_equal(got[far], t[3:5, 0:2, 1:4])


def test_a_transpose_with_other_users_is_kept_for_them():
    module = transposed_slice_module(transpose_other_user=True)
    assert get_pass(KEY).run(module) is True
    ds_result, kept = module.entry.root.operands
    assert ds_result.opcode is Opcode.TRANSPOSE and kept.name == "t"


def test_a_dynamic_slice_of_anything_but_a_transpose_is_left_alone():
    builder = ModuleBuilder("dst_negative")
    main = builder.computation("main")
    x = main.parameter(0, "f32[3,4,5]", "x")
    s = main.parameter(1, "s32[]", "s")
    neg = main.unary(Opcode.NEGATE, x)
    main.dynamic_slice(neg, [s, s, s], (1, 2, 3))
    module = builder.build(main.build())
    before = module.to_text()
    assert get_pass(KEY).run(module) is False
    assert module.to_text() == before


def test_the_lowered_jax_module_fires_and_matches_jax():
    module, args, outs = jax_corpus_case("lowered_dst_transpose_dynamic_slice")
    rewrite = get_pass(KEY)
    assert rewrite.run(module) is True and len(rewrite.rewrites) == 3
    got = interpreter.run(module, args, Topology())
    for g, want in zip(got, outs):
        np.testing.assert_array_equal(g, want)


def test_the_compiled_jax_module_has_no_transposed_slice_left():
    # XLA already slices first: transpose(dynamic-slice) inside loop fusions, which the
    # OpExpanderPass walk does not visit (and whose shape is not this pass's pattern).
    module, _, _ = jax_corpus_case("compiled_dst_transpose_dynamic_slice")
    assert get_pass(KEY).run(module) is False


@pytest.mark.parametrize("name", ["lowered_dst_transpose_dynamic_slice",
                                  "compiled_dst_transpose_dynamic_slice"])
def test_verify_is_correct_on_one_and_multi_device_topologies(name):
    module, _, _ = jax_corpus_case(name)
    result = check_pass(module, KEY, ["1x1", "1x4", "2x2"], VerifyOptions(minimize=False))
    assert result.status is Status.CORRECT, result.error_line
