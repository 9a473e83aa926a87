"""Every elementwise op gives the same bits whichever SIMD code paths numpy dispatches to.

A counterexample must replay on any machine and MPI ranks may sit on different CPUs, so an op's
result must be a function of the module and the inputs alone. numpy chooses its loops by the
CPU at run time; ``NPY_DISABLE_CPU_FEATURES`` (read when numpy is imported) shows what a CPU
without AVX-512, or without AVX2 too, computes. Each setting runs in a fresh interpreter that
first checks the targets really are off (``neuron_sim.numerics.dispatch``: it fails loudly when
the variable was not honoured).

* ``test_every_elementwise_op_and_dtype_gives_the_same_bits_under_every_dispatch_setting``:
  every unary and binary elementwise opcode of the opcode table, on f16, bf16, f32, f64, the
  integer types, pred and c64 / c128 where the op is defined, over 80,000+ inputs (normals at four scales,
  ±0, ±inf, NaN, denormals, the overflow thresholds of each type), executed through
  ``neuron_sim.interpreter.run``; the SHA-256 of every result must be equal across settings —
  with one exception the contract states (docs/run.md): when both operands of a binary op are
  NaN, which one's payload and sign propagate is the CPU's choice (numpy's loops commute the
  operands on some paths), so binary results are hashed with every NaN made +NaN. Unary results
  are compared bit for bit, NaN payloads included.
* ``test_the_numerics_tests_pass_under_every_dispatch_setting``: the elementwise and numerics
  test files run again under each setting (their expected values are the correctly rounded
  ones, so they must hold on any CPU).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_sim.numerics import dispatch

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = dispatch.settings()

SNIPPET = r"""
import hashlib, json
import ml_dtypes
import numpy as np
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.opcodes import Category, Opcode
import neuron_sim.interpreter as interpreter

N = 81920
rng = np.random.default_rng(24)

def float_inputs(dtype, n):
    info = ml_dtypes.finfo(dtype) if dtype == ml_dtypes.bfloat16 else np.finfo(dtype)
    big, tiny = float(info.max), float(info.smallest_subnormal)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -27.0,
             big, -big, tiny, -tiny, float(info.tiny), -float(info.tiny), 88.7, -87.3,
             709.78, -745.1, 11.09, 3.1415927, -3.1415927, 1e30, -1e30, 65504.0, 1e-40]
    parts = [np.array(edges, np.float64)]
    for scale in (1e-3, 1.0, 30.0, 1e4):
        parts.append(rng.standard_normal(n // 4) * scale)
    x = np.concatenate(parts)
    with np.errstate(all="ignore"):
        return x.astype(dtype)

def int_inputs(dtype, n):
    info = np.iinfo(dtype)
    edges = np.array([0, 1, -1 if info.min < 0 else 2, int(info.min), int(info.max), 7, 64, 63,
                      31, 8], dtype)
    body = rng.integers(int(info.min), int(info.max), n, endpoint=True, dtype=dtype)
    small = rng.integers(-70 if info.min < 0 else 0, 70, n // 4).astype(dtype)
    return np.concatenate([edges, body, small])

def canonical_nans(x):
    # Every NaN as +NaN: which NaN operand a binary op propagates when both are NaN is the
    # CPU's choice (the contract's one exception, docs/run.md).
    if x.dtype.kind == "c":
        parts = [canonical_nans(np.ascontiguousarray(x.real)),
                 canonical_nans(np.ascontiguousarray(x.imag))]
        return np.concatenate(parts)
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        wide = x.astype(np.float64)
        return np.where(np.isnan(wide), np.nan, wide).astype(x.dtype)
    return x

TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
         "s8": np.int8, "s32": np.int32, "u32": np.uint32, "s64": np.int64, "u64": np.uint64,
         "pred": np.bool_, "c64": np.complex64, "c128": np.complex128}
SKIP = {Opcode.COMPLEX, Opcode.REAL, Opcode.IMAG, Opcode.IS_FINITE, Opcode.COMPARE,
        Opcode.CONVERT, Opcode.BITCAST_CONVERT, Opcode.REDUCE_PRECISION, Opcode.STOCHASTIC_CONVERT}
ops = [o for o in Opcode if o.category in (Category.UNARY, Category.BINARY) and o not in SKIP]
result = {}
for spelling, dtype in TYPES.items():
    if dtype == np.bool_:
        a = rng.integers(0, 2, N).astype(bool); b = rng.integers(0, 2, N).astype(bool)
    elif np.dtype(dtype).kind == "c":
        a = (float_inputs(np.float64, N) + 1j * np.roll(float_inputs(np.float64, N), 7)
             ).astype(dtype)
        b = np.roll(a, 5)
    elif np.dtype(dtype).kind in "iu":
        a = int_inputs(dtype, N); b = np.roll(int_inputs(dtype, N), 3)
    else:
        a = float_inputs(dtype, N); b = np.roll(float_inputs(dtype, N), 5)
    n = a.shape[0]
    for op in ops:
        arity = op.arity
        params = "".join(f"p{i} = {spelling}[{n}] parameter({i})\n  " for i in range(arity))
        operands = ", ".join(f"p{i}" for i in range(arity))
        text = (f"HloModule m\nENTRY e {{\n  {params}ROOT r = {spelling}[{n}] "
                f"{op.spelling}({operands})\n}}\n")
        args = [a, b][:arity]
        try:
            out = interpreter.run(parse_module(text), args)[0]
        except Exception as exc:  # an op not defined for the type: the same everywhere
            result[f"{op.spelling}/{spelling}"] = "error: " + type(exc).__name__
            continue
        if arity == 2:
            out = canonical_nans(out)
        result[f"{op.spelling}/{spelling}"] = hashlib.sha256(
            np.ascontiguousarray(out).tobytes()).hexdigest()
print(json.dumps(result))
"""


def _digests(setting: str) -> dict[str, str]:
    return json.loads(dispatch.run_under(SETTINGS[setting], SNIPPET, timeout=600).strip()
                      .splitlines()[-1])


@pytest.fixture(scope="module")
def native() -> dict[str, str]:
    return _digests("native")


def test_the_snippet_covers_the_transcendentals_on_every_float_type(native):
    for op in ("tanh", "sine", "cosine", "tan", "cbrt", "exponential-minus-one",
               "log-plus-one", "exponential", "log", "logistic", "erf", "atan2", "power",
               "rsqrt", "sqrt"):
        for spelling in ("f16", "bf16", "f32", "f64"):
            assert not native[f"{op}/{spelling}"].startswith("error"), (op, spelling)


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s != "native"])
def test_every_elementwise_op_and_dtype_gives_the_same_bits_under_every_dispatch_setting(
        native, setting):
    other = _digests(setting)
    assert other.keys() == native.keys()
    differing = sorted(k for k in native if native[k] != other[k])
    assert not differing, f"under {setting}, these (op, type) pairs give other bits: {differing}"


def test_this_machine_offers_a_setting_to_compare_with():
    """On x86-64 with AVX2 or AVX-512 (every CI machine here) the comparison is not vacuous:
    when a dispatch target beyond numpy's baseline is on in this process, there is a setting
    that turns it off."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("dispatch settings are compared on x86-64")
    features = dispatch.cpu_features()
    if not any(features.get(t) for t in dispatch.dispatch_targets()):
        pytest.skip("every dispatch target is already off (the suite runs under such a setting)")
    assert len(SETTINGS) >= 2, SETTINGS


NUMERICS_TESTS = ["tests/interpreter/test_elementwise.py", "tests/neuron_sim/numerics",
                  "--ignore=tests/neuron_sim/numerics/test_dispatch_independence.py"]


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s != "native"])
def test_the_numerics_tests_pass_under_every_dispatch_setting(setting):
    code = ("import sys, pytest\n"
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *{NUMERICS_TESTS!r}]))\n")
    try:
        out = dispatch.run_under(SETTINGS[setting], f"import os\nos.chdir({str(ROOT)!r})\n"
                                 + code, timeout=600)
    except RuntimeError as exc:
        pytest.fail(str(exc)[-3000:])
    assert " passed" in out and " failed" not in out, out[-2000:]
