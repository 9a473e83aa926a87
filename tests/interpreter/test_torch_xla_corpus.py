"""Every module of the PyTorch/XLA corpus (tests/data/torch_xla) checks and matches PyTorch/XLA.

For each program the corpus holds XLA's module after its SPMD partitioner and the module XLA:CPU
executed, with the per-device inputs and outputs of that execution (8 PJRT CPU devices,
``scripts/make_torch_xla_corpus.py``). Both modules must pass the checker and, run by the
interpreter on those inputs, give those outputs:

- programs of data movement, integer arithmetic, dots, convolutions and collectives on values
  that are multiples of 1/8 (so every sum is exact): bit for bit;
- programs with transcendental functions (exp, tanh, erf, sine, cosine, logistic, log), rsqrt
  or batch norms: within 4 ulps of the output's largest magnitude, for every element. XLA:CPU
  uses its own approximations of the transcendental functions and of rsqrt, and expands the
  batch norms in float32 with the variance as ``E[x^2] - E[x]^2`` (``BatchNormExpander``); we
  compute correctly rounded functions and the batch norms in float64 rounded once. Those
  differences are absolute at the scale of the output (a cancellation in the variance does not
  shrink with a small element), so they are measured in ulps of the output's largest element,
  not of each element. Measured when the corpus was made: at most 2 such ulps.

One documented departure, not a tolerance of the numbers: XLA:CPU promotes a bf16 all-reduce
to f32 late in its pipeline (docs/semantics.md §3), so the module after partitioning, which sums
the bf16 partial products in bf16, may differ from the execution by up to 2 bf16 ulps of the
output's scale (measured on ``megatron_mlp_bf16.partitioned``: 1); the final module, which holds
the promotion, is bit-identical.

The send/recv program cannot run under XLA:CPU; its expected outputs are the value sent (the
loop-back pair ``{{0,0}}``), computed by numpy in the generator, and PyTorch/XLA's own text
(without ``_xla_send_recv_source_target_pairs``) must be refused with a message naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module_file
from neuron_sim.hlo.checker import check_module
from neuron_sim.io import read_npz, write_npz

CORPUS = Path(__file__).resolve().parents[1] / "data" / "torch_xla"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())

APPROXIMATE = {"exponential", "tanh", "erf", "sine", "cosine", "logistic", "log", "rsqrt",
               "sqrt", "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
               "layernorm", "batchnorm", "transcendental"}
TOLERANCE_OUTPUT_ULPS = 4


def _runnable(entry: dict, module: str) -> bool:
    runnable = entry.get("runnable", True)
    return runnable.get(module, True) if isinstance(runnable, dict) else bool(runnable)


CASES = [(entry, module) for entry in MANIFEST for module in entry["modules"]]
RUNNABLE = [(e, m) for e, m in CASES if _runnable(e, m)]


def test_the_corpus_covers_what_torch_xla_users_run():
    assert len(MANIFEST) >= 25 and len(RUNNABLE) >= 50
    features = set().union(*(e["features"] for e in MANIFEST))
    for needed in ("layernorm", "batch-norm-training", "batch-norm-grad",
                   "batch-norm-inference", "send", "recv", "all-reduce", "all-gather",
                   "all-to-all", "collective-permute", "convolution", "dropout", "train_step",
                   "embedding", "attention", "mesh2d", "sequence_parallel", "tp", "dp", "int",
                   "bf16", "reduce-scatter", "manual_collective"):
        assert needed in features, needed


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == np.dtype(ml_dtypes.bfloat16)


def _ulp_of_largest(expected: np.ndarray) -> float:
    """The spacing of the expected type's numbers at the output's largest magnitude."""
    largest = float(np.abs(expected.astype(np.float64)).max())
    info = ml_dtypes.finfo(expected.dtype)
    exponent = np.floor(np.log2(max(largest, float(info.tiny))))
    return float(np.exp2(exponent - info.nmant))


# Modules whose bf16 all-reduce XLA:CPU promotes to f32 after this dump (see the docstring).
BF16_ALL_REDUCE_PROMOTED_LATER = {"megatron_mlp_bf16.partitioned.hlo": 2}


def _tolerance(entry: dict, module: str) -> int:
    if module in BF16_ALL_REDUCE_PROMOTED_LATER:
        return BF16_ALL_REDUCE_PROMOTED_LATER[module]
    return TOLERANCE_OUTPUT_ULPS if APPROXIMATE & set(entry["features"]) else 0


@pytest.mark.parametrize("entry,module", RUNNABLE, ids=[m for _, m in RUNNABLE])
def test_module_checks_and_matches_torch_xla(entry, module):
    parsed = parse_module_file(CORPUS / module)
    check_module(parsed)
    data = read_npz(CORPUS / entry["data"])
    inputs = {key: value for key, value in data.items() if key.startswith("arg")}
    outputs = interpreter.run(parsed, inputs)
    assert len(outputs) == len([k for k in data if k.startswith("out")])
    limit = _tolerance(entry, module)
    for j, got in enumerate(outputs):
        expected = data[f"out{j}"]
        if expected.dtype.kind == "V":  # bfloat16, stored as raw 2-byte void
            expected = expected.view(got.dtype)
        assert got.shape == expected.shape and got.dtype == expected.dtype, f"out{j}"
        if entry["compare"] == "shapes":
            continue
        if not _is_float(got.dtype) or limit == 0:
            assert got.tobytes() == expected.tobytes(), f"out{j}"
            continue
        distance = np.abs(got.astype(np.float64) - expected.astype(np.float64)) \
            / _ulp_of_largest(expected)
        assert distance.max() <= limit, (
            f"out{j}: {int((distance > limit).sum())} elements differ by more than {limit} ulps "
            f"of the largest output (max {distance.max():.2f})")


def test_torch_xla_send_recv_without_pairs_checks_and_says_what_it_lacks():
    """PyTorch/XLA 2.9's xm.send / xm.recv text: an f32[] where XLA passes a token, and no
    ``_xla_send_recv_source_target_pairs``: the checker accepts it (XLA's verifier does), the
    interpreter names the recv and the attribute it needs."""
    module = parse_module_file(CORPUS / "send_recv.emitted.hlo")
    check_module(module)
    data = read_npz(CORPUS / "send_recv.npz")
    with pytest.raises(interpreter.InterpreterError,
                       match=r"%recv\.\d+: a recv needs the frontend attribute "
                             r"_xla_send_recv_source_target_pairs"):
        interpreter.run(module, {k: v for k, v in data.items() if k.startswith("arg")})


MPIEXEC = Path(sys.executable).parent / "mpiexec"
REPO = CORPUS.parents[2]


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec is not installed")
def test_mpi_ranks_run_a_sequence_parallel_layernorm_mlp_with_the_local_bits(tmp_path):
    """The partitioned sequence-parallel MLP (nn.LayerNorm as batch-norm-training, all-gathers,
    all-reduces) on 2 MPI ranks gives the local backend's bits."""
    module = CORPUS / "sequence_parallel_mlp.partitioned.hlo"
    data = read_npz(CORPUS / "sequence_parallel_mlp.npz")
    inputs = {k: v for k, v in data.items() if k.startswith("arg")}
    write_npz(tmp_path / "in.npz", inputs)
    cli = [sys.executable, "-c", "import sys; from neuron_sim.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [str(MPIEXEC), "-n", "2", *cli, "run", str(module), "--backend", "mpi", "--inputs",
         str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")],
        capture_output=True, text=True, timeout=150, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    (local,) = interpreter.run(parse_module_file(module), inputs)
    assert read_npz(tmp_path / "out.npz")["out0"].tobytes() == local.tobytes()
