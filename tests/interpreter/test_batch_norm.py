"""batch-norm-training, -inference and -grad: XLA's shape rules and XLA's definitions.

The values are derived by hand in each docstring from the definitions on XLA's operation
semantics page (mean and biased variance over every dimension but the feature dimension); the
shape rules and their order are ``ShapeInference::InferBatchNorm*Shape`` in
``xla/service/shape_inference.cc``. The PyTorch/XLA corpus (``test_torch_xla_corpus.py``) holds
the same ops against torch_xla's own results.
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.proofs.symbolic import TermTable, run_symbolic
from neuron_sim.topology import Topology

from interp_helpers import run

# Column 0 is 0, 2, 4, 6 (mean 3, deviations -3, -1, 1, 3, biased variance 20 / 4 = 5);
# column 1 is 5, 5, 5, 5 (mean 5, variance 0).
X = np.array([[0, 5], [2, 5], [4, 5], [6, 5]], np.float32)
SCALE = np.array([2, 3], np.float32)
OFFSET = np.array([1, -1], np.float32)

TRAINING = """
x = f32[4,2] parameter(0)
s = f32[2] parameter(1)
o = f32[2] parameter(2)
bn = (f32[4,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=4, feature_index=1
"""


def test_training_hand_derived():
    """epsilon = 4, so column 0 divides by sqrt(5 + 4) = 3: (x - 3) / 3 = -1, -1/3, 1/3, 1,
    times scale 2 plus offset 1 = -1, 1/3, 5/3, 3. Column 1 divides by sqrt(0 + 4) = 2:
    (5 - 5) / 2 = 0, times 3 minus 1 = -1. Results: (y, mean (3, 5), variance (5, 0))."""
    y, mean, var = run(TRAINING, X, SCALE, OFFSET)
    third = np.float32(1 / 3)
    expected = np.array([[-1, -1], [third, -1], [np.float32(5 / 3), -1], [3, -1]], np.float32)
    assert y[0].tobytes() == expected.tobytes()
    assert mean[0].tolist() == [3, 5] and var[0].tolist() == [5, 0]


def test_inference_hand_derived():
    """With the mean and variance given (3, 5) and (5, 0), epsilon 4: the training case's y."""
    (y,) = run("""
        x = f32[4,2] parameter(0)
        s = f32[2] parameter(1)
        o = f32[2] parameter(2)
        m = f32[2] parameter(3)
        v = f32[2] parameter(4)
        bn = f32[4,2] batch-norm-inference(x, s, o, m, v), epsilon=4, feature_index=1
        """, X, SCALE, OFFSET, np.array([3, 5], np.float32), np.array([5, 0], np.float32))
    assert y[0, :, 0].tolist() == [-1, np.float32(1 / 3), np.float32(5 / 3), 3]
    assert y[0, :, 1].tolist() == [-1] * 4


def test_grad_hand_derived():
    """x's columns are both 0, 2, 4, 6 with mean 3 and variance 5, epsilon 4 (var + eps = 9,
    root 3), scale 2 and 3.

    Column 0, dy = 1, 0, 0, 1: grad_offset = sum(dy) = 2; sum(dy * (x - mean)) = -3 + 3 = 0 so
    grad_scale = 0; grad_x = 2 / 3 * (dy - 2 / 4) = 1/3, -1/3, -1/3, 1/3.
    Column 1, dy = x - mean = -3, -1, 1, 3: grad_offset = 0; sum(dy * (x - mean)) = 20, so
    grad_scale = 20 / 3; grad_x = 3 / 3 * (dy - dy * 20 / (4 * 9)) = dy * 4 / 9
    = -4/3, -4/9, 4/9, 4/3."""
    x = np.array([[0, 0], [2, 2], [4, 4], [6, 6]], np.float32)
    dy = np.array([[1, -3], [0, -1], [0, 1], [1, 3]], np.float32)
    grad_x, grad_scale, grad_offset = run("""
        x = f32[4,2] parameter(0)
        s = f32[2] parameter(1)
        m = f32[2] parameter(2)
        v = f32[2] parameter(3)
        dy = f32[4,2] parameter(4)
        bn = (f32[4,2], f32[2], f32[2]) batch-norm-grad(x, s, m, v, dy), epsilon=4, feature_index=1
        """, x, SCALE, np.array([3, 3], np.float32), np.array([5, 5], np.float32), dy)
    f = np.float32
    assert grad_x[0, :, 0].tolist() == [f(1 / 3), f(-1 / 3), f(-1 / 3), f(1 / 3)]
    assert grad_x[0, :, 1].tolist() == [f(-4 / 3), f(-4 / 9), f(4 / 9), f(4 / 3)]
    assert grad_scale[0].tolist() == [0, f(20 / 3)]
    assert grad_offset[0].tolist() == [2, 0]


def test_feature_dimension_first_and_rank_3():
    """feature_index 0 of f32[2,2,2]: feature 0 holds 1..4 (mean 2.5, variance 1.25), feature 1
    holds 10 four times (variance 0); epsilon 0 gives y = (x - 2.5) / sqrt(1.25) for feature 0
    and 0 / 0 = NaN for feature 1 (no epsilon to save it)."""
    x = np.array([[[1, 2], [3, 4]], [[10, 10], [10, 10]]], np.float32)
    y, mean, var = run("""
        x = f32[2,2,2] parameter(0)
        s = f32[2] parameter(1)
        o = f32[2] parameter(2)
        bn = (f32[2,2,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0, feature_index=0
        """, x, np.ones(2, np.float32), np.zeros(2, np.float32))
    assert mean[0].tolist() == [2.5, 10] and var[0].tolist() == [1.25, 0]
    expected = ((np.arange(1, 5) - 2.5) / np.sqrt(1.25)).astype(np.float32).reshape(2, 2)
    assert y[0, 0].tobytes() == expected.tobytes()
    assert np.isnan(y[0, 1]).all()


def test_per_device_operands_normalize_each_device_alone():
    """Two devices with their own x: each device's statistics are its own (no collective)."""
    module = parse_module("HloModule m, replica_count=2\nENTRY e {\n" + "\n".join(
        ("ROOT " if "batch-norm" in line else "") + line.strip()
        for line in TRAINING.strip().splitlines()) + "\n}\n")
    xs = np.stack([X, X * 2])
    y, mean, var = interpreter.run(module, [xs, SCALE, OFFSET], topology=Topology(2, 1))
    assert mean.tolist() == [[3, 5], [6, 10]] and var.tolist() == [[5, 0], [20, 0]]
    alone, *_ = run(TRAINING, X, SCALE, OFFSET)
    assert y[0].tobytes() == alone[0].tobytes()


def test_the_symbolic_evaluator_holds_batch_norm_as_an_opaque_function_of_its_operands():
    """proofs.symbolic has no model of the batch norms: each output element is an
    uninterpreted term of the operands, so the same batch norm of the same inputs gives the same
    handles (source and target agree), another epsilon different ones (where the proof stops)."""
    def handles(epsilon: str, table: TermTable) -> list:
        module = parse_module("HloModule m\nENTRY e {\n" + "\n".join(
            ("ROOT " if "batch-norm" in line else "") + line.strip()
            for line in TRAINING.replace("epsilon=4", f"epsilon={epsilon}").strip()
            .splitlines()) + "\n}\n")
        return run_symbolic(module, Topology(1, 1), table, [(False,), (False,), (False,)])
    table = TermTable()
    first, again, other = handles("4", table), handles("4", table), handles("2", table)
    assert all(a.tolist() == b.tolist() for a, b in zip(first, again))
    assert first[0].tolist() != other[0].tolist()


# --- the checker: XLA's InferBatchNorm*Shape ----------------------------------------------------

def _checked(body: str) -> None:
    check_module(parse_module("HloModule m\nENTRY e {\n" + body.strip() + "\n}\n"))


def _rejected(body: str, phrase: str) -> None:
    with pytest.raises(HloCheckError) as info:
        _checked(body)
    assert phrase in str(info.value), str(info.value)
    assert "batch-norm" in str(info.value)


PARAMS = """
x = f32[4,2] parameter(0)
s = f32[2] parameter(1)
o = f32[2] parameter(2)
"""


def test_checker_accepts_the_three_ops():
    _checked(PARAMS + """
        t = (f32[4,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
        i = f32[4,2] batch-norm-inference(x, s, o, s, o), epsilon=0.001, feature_index=1
        ROOT g = (f32[4,2], f32[2], f32[2]) batch-norm-grad(x, s, o, s, i), epsilon=0.001, feature_index=1
        """)


@pytest.mark.parametrize("line,phrase", [
    ("ROOT t = (f32[4,2], f32[4], f32[4]) batch-norm-training(x, s, o), epsilon=1, feature_index=2",
     "smaller than the rank"),
    ("ROOT t = (f32[4,2], f32[4], f32[4]) batch-norm-training(x, s, o), epsilon=1, feature_index=-1",
     "must not be negative"),
    ("ROOT t = (f32[4,2], f32[4], f32[4]) batch-norm-training(x, s, o), epsilon=1, feature_index=0",
     "feature count 4"),
    ("b = f32[1,2] reshape(s)\nROOT t = (f32[4,2], f32[2], f32[2]) batch-norm-training(x, b, o), "
     "epsilon=1, feature_index=1", "must have rank 1"),
    ("c = s32[4,2] convert(x)\nd = s32[2] convert(s)\nROOT t = (s32[4,2], s32[2], s32[2]) "
     "batch-norm-training(c, d, d), epsilon=1, feature_index=1", "floating-point element type"),
    ("ROOT t = (f32[4,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=1, feature_index=1"
     ", metadata={}\nbad = f32[2,4] batch-norm-inference(x, s, o, s, o), epsilon=1, "
     "feature_index=1", ""),
    ("ROOT g = (f32[4,2], f32[2], f32[2]) batch-norm-grad(x, s, o, s, s), epsilon=1, "
     "feature_index=1", "rank of the operand"),
    ("y = f32[2,4] transpose(x), dimensions={1,0}\nROOT g = (f32[4,2], f32[2], f32[2]) "
     "batch-norm-grad(x, s, o, s, y), epsilon=1, feature_index=1", "operand's dimensions"),
])
def test_checker_rejects_what_xla_rejects(line, phrase):
    if not phrase:  # an inferred shape that is not the declared one
        body = PARAMS + line.split("\n", 1)[1].replace("bad =", "ROOT bad =")
        _rejected(body, "")
        return
    _rejected(PARAMS + line, phrase)


def test_mean_of_another_float_type_is_a_mixed_precision_question():
    """XLA's shape inference compares element types ignoring fp precision; the verifier's
    mixed-precision check (off unless allowed) then rejects a bf16 scale with an f32 operand."""
    body = PARAMS + """
        b = bf16[2] convert(s)
        ROOT t = (f32[4,2], f32[2], f32[2]) batch-norm-training(x, b, o), epsilon=1, feature_index=1
        """
    with pytest.raises(HloCheckError):
        _checked(body)
    check_module(parse_module("HloModule m\nENTRY e {\n" + body.strip() + "\n}\n"),
                 allow_mixed_precision=True)
