"""Generate the golden JAX/XLA corpus under ``tests/data/jax/``.

For every program defined below this script writes

* ``NAME.hlo``  -- HLO text dumped by XLA: either the optimized, SPMD-partitioned
  module (``jax.jit(f).lower(*a).compile().as_text()``, kind "compiled"), the
  unoptimized module (``jax.jit(f).lower(*a).as_text(dialect="hlo")``, kind
  "lowered"), or XLA's module right after its SPMD partitioner, before fusion and the other
  optimizations (``--xla_dump_hlo_pass_re=spmd-partitioning``, kind "partitioned": what a
  backend compiler's own pipeline receives);
* ``NAME.npz``  -- per-device inputs ``arg{i}`` and JAX's per-device outputs
  ``out{j}``, each stacked along a leading device axis of size
  ``D = replica_count * num_partitions`` (flattened device id
  ``f = replica * num_partitions + partition``);
* ``MANIFEST.json`` and ``README.md`` describing the corpus.

JAX is needed only to run this script; it is not a dependency of neuron-sim.
Run it from any directory with a Python environment that has ``jax`` (a separate virtual
environment; JAX is never a dependency of neuron-sim)::

    XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu \\
        python scripts/make_jax_corpus.py

(the two environment variables are set by the script itself when missing).
The output is deterministic: re-running rewrites byte-identical files (XLA's debug info names
this script's own lines, so editing it changes those numbers and nothing else).

``--out-dir DIR`` writes another corpus (the JAX 0.12 one: ``--out-dir tests/data/jax_0_12
--programs scripts/jax_programs/jax_0_12`` under jax 0.12, Python 3.12); ``--programs`` adds
folders of program files to ``scripts/jax_programs/*.py``.
"""

from __future__ import annotations

import os

_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import dataclasses  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlib  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

try:
    from jax._src.lib import hlo as _hlo_lib  # only used to print elided constants
except Exception:  # pragma: no cover - depends on the jax version
    _hlo_lib = None

if hasattr(jax, "shard_map"):
    _shard_map = jax.shard_map
else:  # older JAX
    from jax.experimental.shard_map import shard_map as _shard_map

jax.config.update("jax_default_prng_impl", "threefry2x32")

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "tests" / "data" / "jax"
COMMAND = (
    "XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu "
    "python scripts/make_jax_corpus.py"
)

BF16 = ml_dtypes.bfloat16
I32_MIN = np.iinfo(np.int32).min
I32_MAX = np.iinfo(np.int32).max
NAN = np.float32("nan")
INF = np.float32("inf")

# HLO element type -> numpy dtype
HLO_DTYPES = {
    "pred": np.dtype(bool),
    "s8": np.dtype(np.int8),
    "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32),
    "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(BF16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
}

# custom-call targets that only mean something to JAX / the SPMD partitioner
JAX_ONLY_CUSTOM_CALLS = (
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "xla.sdy.",
)

# custom-call targets the interpreter executes (XLA:CPU's TopK from lax.top_k): a module whose
# only custom-calls are these is runnable
RUNNABLE_CUSTOM_CALLS = ("TopK",)

# HLO opcodes that are recorded as feature tags when they occur in a module
TAGGED_OPCODES = {
    "all-reduce", "reduce-scatter", "all-gather", "collective-permute",
    "all-to-all", "partition-id", "replica-id", "while", "conditional",
    "sort", "gather", "scatter", "convolution", "reduce-window", "dot",
    "dynamic-slice", "dynamic-update-slice", "custom-call", "call",
    "rng-bit-generator", "reduce-precision", "bitcast-convert", "pad",
    "reverse", "iota", "concatenate", "transpose", "clamp", "select",
    "popcnt", "count-leading-zeros", "erf", "logistic", "tanh",
    "exponential-minus-one", "log-plus-one", "atan2", "is-finite",
    "round-nearest-even", "round-nearest-afz", "reduce", "fusion",
    "remainder", "divide", "shift-left", "shift-right-logical",
    "shift-right-arithmetic", "convert", "ragged-all-to-all", "topk", "rng",
    "rng-get-and-update-state",
}


# --------------------------------------------------------------------------
# case description
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    name: str
    kind: str  # "compiled" | "lowered" | "partitioned"
    description: str
    features: list[str]
    fn: Callable[..., Any]
    args: list[np.ndarray]
    # SPMD programs: mesh shape + axis names, shard_map specs
    mesh: tuple[int, ...] | None = None
    axes: tuple[str, ...] | None = None
    in_specs: Any = None
    out_specs: Any = None
    gspmd: bool = False  # lower with the GSPMD partitioner instead of Shardy
    # jit + NamedSharding (in_specs / out_specs are the in_ / out_shardings) instead of shard_map
    named: bool = False
    # optional reference check: check(args_per_device, outs_per_device)
    check: Callable[[list[np.ndarray], list[np.ndarray]], None] | None = None
    # named cases: numpy function of the global inputs giving the global outputs
    reference: Callable[..., Any] | None = None
    # programs XLA:CPU compiles but cannot execute (ragged-all-to-all): numpy function of the
    # per-device inputs ([D, ...] each) giving the per-device outputs; the text then comes from
    # XLA's dump (cpu_after_optimizations for "compiled", after_spmd-partitioning for
    # "partitioned") and the manifest says the outputs are emulated
    emulate: Callable[..., Any] | None = None
    # JAX configuration options set while the case is lowered, e.g.
    # {"jax_raise_on_ppermute_sort_diff": False} for a ppermute over axes in non-mesh order
    jax_config: dict[str, Any] | None = None


CASES: list[Case] = []


def rng_for(key: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(key.encode()))


def small(rng: np.random.Generator, shape, dtype=np.float32, lo=-32, hi=32) -> np.ndarray:
    """Small floats that are multiples of 1/8: exact in bf16 and sums are exact."""
    return (rng.integers(lo, hi, size=shape) / 8.0).astype(dtype)


def ints(rng: np.random.Generator, shape, lo=-50, hi=50, dtype=np.int32) -> np.ndarray:
    return rng.integers(lo, hi, size=shape).astype(dtype)


def spmd(name, description, features, fn, args, *, mesh, axes, in_specs, out_specs,
         gspmd=False, check=None, kind="compiled", emulate=None, jax_config=None):
    CASES.append(Case(name, kind, description, features, fn, args, mesh, axes,
                      in_specs, out_specs, gspmd=gspmd, check=check, emulate=emulate,
                      jax_config=jax_config))


def named(name, description, features, fn, args, *, mesh, axes, in_specs, out_specs=None,
          reference, kind="compiled"):
    """Register a jit + NamedSharding program: XLA's SPMD partitioner inserts the collectives
    (printed as mesh-form replica groups). ``reference`` computes the global outputs with numpy
    from the global inputs, independently of JAX."""
    CASES.append(Case(name, kind, description, ["named_sharding", *features], fn, args,
                      mesh, axes, in_specs, out_specs, named=True, reference=reference))


def single(base, description, features, fn, make_args, kinds=("lowered", "compiled")):
    """Register a single-device program as lowered_BASE and/or compiled_BASE."""
    for kind in kinds:
        args = make_args(rng_for(base))
        CASES.append(Case(f"{kind}_{base}", kind, description, list(features), fn, args))


# --------------------------------------------------------------------------
# reference checks (numpy) for SPMD programs; a[i] / o[j] are [D, ...]
# --------------------------------------------------------------------------


def _assert_eq(got, want, what):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def check_axis_index_1d(a, o):
    d = o[0].shape[0]
    _assert_eq(o[0].reshape(d), np.arange(d), "axis_index('i') per flattened device")
    _assert_eq(o[1], a[0] + np.arange(d, dtype=np.float32).reshape(d, 1, 1), "x + axis_index")


def check_axis_index_2d(nx, ny):
    def check(a, o):
        f = np.arange(nx * ny)
        _assert_eq(o[0].reshape(-1), f // ny, "axis_index('x') per flattened device")
        _assert_eq(o[1].reshape(-1), f % ny, "axis_index('y') per flattened device")
        _assert_eq(o[2].reshape(-1), f, "linear axis index")
    return check


def check_psum_all(a, o):
    want = a[0].sum(axis=0)
    for f in range(a[0].shape[0]):
        _assert_eq(o[0][f], want, f"psum on device {f}")


def check_ar_ds(k):
    def check(a, o):
        total = a[0].sum(axis=0)
        for f in range(a[0].shape[0]):
            _assert_eq(o[0][f], total[f * k:(f + 1) * k], f"AR+DS slice on device {f}")
    return check


def check_ppermute(perm):
    def check(a, o):
        want = np.zeros_like(a[0])
        for src, dst in perm:
            want[dst] = a[0][src]
        _assert_eq(o[0], want, "ppermute")
    return check


def check_rs_dim(dim, k):
    def check(a, o):
        total = a[0].sum(axis=0)
        for f in range(a[0].shape[0]):
            want = np.take(total, np.arange(f * k, (f + 1) * k), axis=dim)
            _assert_eq(o[0][f], want, f"reduce-scatter on device {f}")
    return check


def check_ar_ds_x_2x4(a, o):
    # mesh (2,4): psum over 'x' groups {y, 4+y}; device f=(x,y) keeps rows x*k:(x+1)*k
    k = o[0].shape[1]
    for f in range(8):
        x, y = divmod(f, 4)
        total = a[0][y] + a[0][4 + y]
        _assert_eq(o[0][f], total[x * k:(x + 1) * k], f"AR(x)+DS on device {f}")


# --------------------------------------------------------------------------
# SPMD programs (compiled, shard_map over 8 devices)
# --------------------------------------------------------------------------

M1 = dict(mesh=(8,), axes=("i",))
M24 = dict(mesh=(2, 4), axes=("x", "y"))
M42 = dict(mesh=(4, 2), axes=("x", "y"))


def _define_spmd_1d():
    r = rng_for

    def f_axis_index(x):
        i = lax.axis_index("i")
        return i.reshape(1), x + i.astype(x.dtype)

    spmd("spmd_axis_index_1d",
         "axis_index('i') and x + axis_index over a 1-D mesh of 8; verifies that the device "
         "holding shard k is partition k",
         ["axis_index", "partition_id"], f_axis_index, [small(r("ai1"), (16, 3))],
         in_specs=P("i"), out_specs=(P("i"), P("i")), check=check_axis_index_1d, **M1)

    spmd("spmd_psum_1d", "psum (all-reduce sum) of a [2,3] f32 shard over 8 devices",
         ["psum", "all_reduce"], lambda x: lax.psum(x, "i"), [small(r("psum1"), (16, 3))],
         in_specs=P("i"), out_specs=P(), check=check_psum_all, **M1)

    spmd("spmd_psum_int_bf16_1d", "psum of an int32 shard and of a bf16 shard",
         ["psum", "all_reduce", "bf16", "int"],
         lambda a, b: (lax.psum(a, "i"), lax.psum(b, "i")),
         [ints(r("psumib"), (16, 3)), small(r("psumib2"), (8, 4), BF16)],
         in_specs=(P("i"), P("i")), out_specs=(P(), P()), **M1)

    spmd("spmd_rs_dim0_1d", "psum_scatter scatter_dimension=0 tiled=True: [16,3] -> [2,3]",
         ["psum_scatter", "reduce_scatter"],
         lambda x: lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True),
         [small(r("rs0"), (128, 3))], in_specs=P("i"), out_specs=P("i"),
         check=check_rs_dim(0, 2), **M1)

    spmd("spmd_rs_dim1_1d", "psum_scatter scatter_dimension=1 tiled=True: [2,16] -> [2,2]",
         ["psum_scatter", "reduce_scatter"],
         lambda x: lax.psum_scatter(x, "i", scatter_dimension=1, tiled=True),
         [small(r("rs1"), (16, 16))], in_specs=P("i"), out_specs=P("i"),
         check=check_rs_dim(1, 2), **M1)

    spmd("spmd_ag_tiled_1d", "all_gather tiled=True along axis 0 and along axis 1",
         ["all_gather"],
         lambda x: (lax.all_gather(x, "i", axis=0, tiled=True),
                    lax.all_gather(x, "i", axis=1, tiled=True)),
         [small(r("agt"), (16, 3))], in_specs=P("i"), out_specs=(P("i"), P("i")), **M1)

    spmd("spmd_ag_untiled_1d", "all_gather tiled=False (new leading axis) and axis=1 untiled",
         ["all_gather"],
         lambda x: (lax.all_gather(x, "i"), lax.all_gather(x, "i", axis=1)),
         [small(r("agu"), (16, 3))], in_specs=P("i"), out_specs=(P("i"), P("i")), **M1)

    ring = [(j, (j + 1) % 8) for j in range(8)]
    spmd("spmd_ppermute_ring_1d", "ppermute ring shift: device j sends to (j+1)%8",
         ["ppermute", "collective_permute"], lambda x: lax.ppermute(x, "i", ring),
         [small(r("ring"), (16, 3))], in_specs=P("i"), out_specs=P("i"),
         check=check_ppermute(ring), **M1)

    partial = [(0, 3), (3, 0), (5, 6), (6, 2)]
    spmd("spmd_ppermute_partial_1d",
         "ppermute with a partial permutation (0->3, 3->0, 5->6, 6->2); devices 1,4,5,7 "
         "receive nothing and get zeros",
         ["ppermute", "collective_permute", "partial_permutation"],
         lambda x: lax.ppermute(x, "i", partial),
         [small(r("pperm"), (16, 3))], in_specs=P("i"), out_specs=P("i"),
         check=check_ppermute(partial), **M1)

    spmd("spmd_all_to_all_1d",
         "all_to_all tiled: split axis 0 / concat axis 0 on [8,3], and split 1 / concat 0 on [2,8]",
         ["all_to_all"],
         lambda a, b: (lax.all_to_all(a, "i", 0, 0, tiled=True),
                       lax.all_to_all(b, "i", 1, 0, tiled=True)),
         [small(r("a2a"), (64, 3)), small(r("a2a2"), (16, 8))],
         in_specs=(P("i"), P("i")), out_specs=(P("i"), P("i")), **M1)

    spmd("spmd_pmax_pmin_1d", "pmax / pmin of f32 (with -0.0, inf) and int32 shards",
         ["pmax", "pmin", "all_reduce", "int"],
         lambda a, b: (lax.pmax(a, "i"), lax.pmin(a, "i"), lax.pmax(b, "i"), lax.pmin(b, "i")),
         [np.where(rng_for("pmm").random((16, 3)) < 0.15, np.float32(-0.0),
                   small(rng_for("pmm2"), (16, 3))).astype(np.float32),
          ints(r("pmmi"), (16, 3), -1000, 1000)],
         in_specs=(P("i"), P("i")), out_specs=(P(), P(), P(), P()), **M1)

    def ar_ds(x):
        k = x.shape[0] // 8
        return lax.dynamic_slice_in_dim(lax.psum(x, "i"), lax.axis_index("i") * k, k)

    spmd("spmd_ar_ds_idiom_1d",
         "all-reduce then each device slices its own shard: "
         "dynamic_slice_in_dim(psum(x), axis_index('i')*2, 2) on a local [16,3] f32",
         ["psum", "all_reduce", "axis_index", "dynamic_slice", "ar_ds_idiom"],
         ar_ds, [small(r("ards"), (128, 3))], in_specs=P("i"), out_specs=P("i"),
         check=check_ar_ds(2), **M1)

    spmd("spmd_ar_ds_idiom_int_1d",
         "AR+DS idiom on int32: dynamic_slice_in_dim(psum(x), axis_index('i')*3, 3) on local [24,2]",
         ["psum", "all_reduce", "axis_index", "dynamic_slice", "ar_ds_idiom", "int"],
         ar_ds, [ints(r("ardsi"), (192, 2), -10**6, 10**6)], in_specs=P("i"), out_specs=P("i"),
         check=check_ar_ds(3), **M1)

    def while_psum(x):
        def body(_, c):
            return lax.psum(c, "i") * 0.125 + c
        return lax.fori_loop(0, 3, body, x)

    spmd("spmd_while_psum_1d", "fori_loop (3 iterations) with a psum inside the loop body",
         ["while", "psum", "all_reduce"], while_psum, [small(r("whps"), (16, 3))],
         in_specs=P("i"), out_specs=P("i"), **M1)


def _define_spmd_2d():
    r = rng_for

    def f_idx(x):
        ix = lax.axis_index("x")
        iy = lax.axis_index("y")
        lin = lax.axis_index(("x", "y"))
        return ix.reshape(1, 1), iy.reshape(1, 1), lin.reshape(1, 1), x + (10 * ix + iy).astype(x.dtype)

    spmd("spmd_axis_index_2x4",
         "axis_index('x'), axis_index('y') and axis_index(('x','y')) on a (2,4) mesh; "
         "verifies partition p = 4*x + y",
         ["axis_index", "partition_id", "mesh2d"], f_idx, [small(r("ai24"), (4, 8))],
         in_specs=P("x", "y"), out_specs=(P("x", "y"),) * 4,
         check=check_axis_index_2d(2, 4), **M24)

    spmd("spmd_psum_x_2x4", "psum over mesh axis 'x' (size 2) of a (2,4) mesh",
         ["psum", "all_reduce", "mesh2d"], lambda x: lax.psum(x, "x"),
         [small(r("psx"), (4, 12))], in_specs=P("x", "y"), out_specs=P(None, "y"), **M24)

    spmd("spmd_psum_y_2x4", "psum over mesh axis 'y' (size 4) of a (2,4) mesh",
         ["psum", "all_reduce", "mesh2d"], lambda x: lax.psum(x, "y"),
         [small(r("psy"), (4, 12))], in_specs=P("x", "y"), out_specs=P("x", None), **M24)

    spmd("spmd_psum_xy_2x4", "psum over both mesh axes ('x','y') of a (2,4) mesh",
         ["psum", "all_reduce", "mesh2d"], lambda x: lax.psum(x, ("x", "y")),
         [small(r("psxy"), (4, 12))], in_specs=P("x", "y"), out_specs=P(), **M24)

    spmd("spmd_ag_y_2x4", "all_gather over 'y' (tiled, axis 1) on a (2,4) mesh",
         ["all_gather", "mesh2d"], lambda x: lax.all_gather(x, "y", axis=1, tiled=True),
         [small(r("agy"), (4, 12))], in_specs=P("x", "y"), out_specs=P("x", "y"), **M24)

    spmd("spmd_rs_x_2x4", "psum_scatter over 'x' (scatter_dimension 0, tiled) on a (2,4) mesh",
         ["psum_scatter", "reduce_scatter", "mesh2d"],
         lambda x: lax.psum_scatter(x, "x", scatter_dimension=0, tiled=True),
         [small(r("rsx"), (8, 12))], in_specs=P("x", "y"), out_specs=P("x", "y"), **M24)

    perm = [(j, (j + 1) % 4) for j in range(4)]
    spmd("spmd_ppermute_y_2x4", "ppermute ring shift along 'y' (size 4) on a (2,4) mesh",
         ["ppermute", "collective_permute", "mesh2d"], lambda x: lax.ppermute(x, "y", perm),
         [small(r("ppy"), (4, 12))], in_specs=P("x", "y"), out_specs=P("x", "y"), **M24)

    def ar_ds_x(x):
        k = x.shape[0] // 2
        return lax.dynamic_slice_in_dim(lax.psum(x, "x"), lax.axis_index("x") * k, k)

    spmd("spmd_ar_ds_x_2x4",
         "AR+DS idiom over 'x' of a (2,4) mesh on a local [8,3]: dynamic_slice_in_dim(psum(x,'x'), axis_index('x')*4, 4)",
         ["psum", "all_reduce", "axis_index", "dynamic_slice", "ar_ds_idiom", "mesh2d"],
         ar_ds_x, [small(r("ardsx"), (8, 12))], in_specs=P(None, "y"), out_specs=P("x", "y"),
         check=check_ar_ds_x_2x4, **M24)

    def mixed(x):
        s = lax.psum(x, "x")
        g = lax.all_gather(x, "y", axis=0, tiled=True)
        rs = lax.psum_scatter(x, "x", scatter_dimension=1, tiled=True)
        return s, g, rs, lax.axis_index("x").reshape(1, 1), lax.axis_index("y").reshape(1, 1)

    spmd("spmd_mixed_4x2",
         "(4,2) mesh: psum over 'x' (groups {0,2,4,6},{1,3,5,7}), all_gather over 'y', "
         "psum_scatter over 'x' along dim 1, and both axis indices",
         ["psum", "all_reduce", "all_gather", "psum_scatter", "reduce_scatter", "axis_index",
          "mesh2d"],
         mixed, [small(r("mx42"), (8, 16))], in_specs=P("x", "y"),
         out_specs=(P(None, "y"), P("x", "y"), P("x", "y"), P("x", "y"), P("x", "y")),
         check=lambda a, o: check_axis_index_2d(4, 2)(a, [o[3], o[4], o[3] * 2 + o[4]]),
         **M42)


def _define_spmd_control_flow():
    r = rng_for

    def while_ai(x):
        n = lax.axis_index("i") + 1

        def cond(c):
            return c[0] < n

        def body(c):
            return c[0] + 1, c[1] * 2.0 + 1.0

        cnt, y = lax.while_loop(cond, body, (jnp.int32(0), x))
        return cnt.reshape(1), y

    spmd("spmd_while_axis_index",
         "while_loop whose trip count is axis_index('i')+1 (device-dependent control flow)",
         ["while", "axis_index", "device_dependent_control_flow"], while_ai,
         [small(r("whai"), (16, 3))], in_specs=P("i"), out_specs=(P("i"), P("i")),
         check=lambda a, o: _assert_eq(o[0].reshape(-1), np.arange(1, 9), "trip counts"), **M1)

    def cond_ai(x):
        return lax.cond(lax.axis_index("i") % 2 == 0, lambda v: v * 2.0, lambda v: v - 1.0, x)

    spmd("spmd_cond_axis_index",
         "lax.cond on axis_index('i') % 2 == 0: even devices double, odd devices subtract 1",
         ["cond", "conditional", "axis_index", "device_dependent_control_flow"], cond_ai,
         [small(r("cdai"), (16, 3))], in_specs=P("i"), out_specs=P("i"), **M1)

    def switch_ai(x, y):
        branches = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: jnp.maximum(a, b) - 1.0]
        return lax.switch(lax.axis_index("i") % 3, branches, x, y)

    spmd("spmd_switch_axis_index",
         "lax.switch with index axis_index('i') % 3 over three branches",
         ["switch", "conditional", "axis_index", "device_dependent_control_flow"], switch_ai,
         [small(r("swai"), (16, 3)), small(r("swai2"), (16, 3))],
         in_specs=(P("i"), P("i")), out_specs=P("i"), **M1)


def _define_lowered_spmd():
    r = rng_for

    def ar_ds(x):
        k = x.shape[0] // 8
        return lax.dynamic_slice_in_dim(lax.psum(x, "i"), lax.axis_index("i") * k, k)

    spmd("lowered_spmd_ar_ds_sdy",
         "unoptimized shard_map AR+DS idiom lowered with Shardy (xla.sdy.* custom-calls); "
         "arrays are global (not per-device)",
         ["psum", "axis_index", "dynamic_slice", "shard_map", "shardy"], ar_ds,
         [small(r("lards"), (128, 3))], in_specs=P("i"), out_specs=P("i"), kind="lowered", **M1)

    spmd("lowered_spmd_ar_ds_gspmd",
         "unoptimized shard_map AR+DS idiom lowered with GSPMD (Sharding / SPMDFullToShardShape / "
         "SPMDShardToFullShape custom-calls); arrays are global",
         ["psum", "axis_index", "dynamic_slice", "shard_map", "gspmd"], ar_ds,
         [small(r("lards"), (128, 3))], in_specs=P("i"), out_specs=P("i"), gspmd=True,
         kind="lowered", **M1)

    spmd("lowered_spmd_collectives_gspmd",
         "unoptimized shard_map on a (2,4) mesh with all_gather('y'), psum_scatter('x') and a "
         "ppermute, lowered with GSPMD; arrays are global",
         ["all_gather", "psum_scatter", "ppermute", "shard_map", "gspmd", "mesh2d"],
         lambda x: (lax.all_gather(x, "y", axis=1, tiled=True),
                    lax.psum_scatter(x, "x", scatter_dimension=0, tiled=True),
                    lax.ppermute(x, "y", [(0, 1), (1, 2), (2, 3), (3, 0)])),
         [small(r("lcol"), (8, 12))], in_specs=P("x", "y"),
         out_specs=(P("x", "y"), P("x", "y"), P("x", "y")), gspmd=True, kind="lowered", **M24)


# --------------------------------------------------------------------------
# jit + NamedSharding programs (compiled; the SPMD partitioner prints mesh-form groups)
# --------------------------------------------------------------------------


def _define_named():
    r = rng_for
    wsc = jax.lax.with_sharding_constraint
    m1, m42, m24 = dict(mesh=(8,), axes=("i",)), dict(mesh=(4, 2), axes=("a", "b")), \
        dict(mesh=(2, 4), axes=("a", "b"))
    m222 = dict(mesh=(2, 2, 2), axes=("a", "b", "c"))

    named("named_sum_1d", "jnp.sum over axis 0 of a [16,3] f32 array sharded P('i') on 8 "
          "devices: an all-reduce over the whole mesh",
          ["all_reduce"], lambda x: x.sum(0), [small(r("nsum1"), (16, 3))],
          in_specs=(P("i"),), reference=lambda x: x.sum(0), **m1)

    named("named_max_int_1d", "jnp.max over the sharded axis 0 of an int32 [16,5] array",
          ["all_reduce", "int"], lambda x: x.max(0), [ints(r("nmax1"), (16, 5))],
          in_specs=(P("i"),), reference=lambda x: x.max(0), **m1)

    named("named_allgather_1d", "a [16,3] array sharded P('i') constrained to replicated: "
          "all-gather", ["all_gather"], lambda x: wsc(x * 2.0, P()),
          [small(r("nag1"), (16, 3))], in_specs=(P("i"),), reference=lambda x: x * 2.0, **m1)

    named("named_all_to_all_1d", "a [8,16] array resharded from P('i', None) to P(None, 'i'): "
          "all-to-all", ["all_to_all"], lambda x: wsc(x + 1.0, P(None, "i")),
          [small(r("na2a1"), (8, 16))], in_specs=(P("i", None),), out_specs=P(None, "i"),
          reference=lambda x: x + 1.0, **m1)

    named("named_roll_1d", "jnp.roll by 1 along the sharded axis: collective-permute",
          ["collective_permute"], lambda x: jnp.roll(x, 1, axis=0),
          [small(r("nroll1"), (16, 3))], in_specs=(P("i"),), out_specs=P("i"),
          reference=lambda x: np.roll(x, 1, axis=0), **m1)

    named("named_sum_scatter_1d", "sum over the sharded axis 0 of [8,64] with the result "
          "sharded P('i')", ["all_reduce", "dynamic_slice"], lambda x: x.sum(0),
          [small(r("nrs1"), (8, 64))], in_specs=(P("i", None),), out_specs=P("i"),
          reference=lambda x: x.sum(0), **m1)

    named("named_sum_b_4x2", "(4,2) mesh, x sharded P('a','b'), sum over axis 1: all-reduce "
          "over mesh axis 'b'", ["all_reduce", "mesh2d"], lambda x: x.sum(1),
          [small(r("nsb42"), (8, 6))], in_specs=(P("a", "b"),),
          reference=lambda x: x.sum(1), **m42)

    named("named_sum_all_4x2", "(4,2) mesh, x sharded P('a','b'), total sum: all-reduces over "
          "both mesh axes", ["all_reduce", "mesh2d"], lambda x: x.sum(),
          [small(r("nsall42"), (8, 6))], in_specs=(P("a", "b"),),
          reference=lambda x: x.sum(), **m42)

    named("named_allgather_4x2", "(4,2) mesh, x sharded P('a','b') constrained to replicated: "
          "all-gathers over both axes", ["all_gather", "mesh2d"],
          lambda x: wsc(x - 0.5, P()), [small(r("nag42"), (8, 6))], in_specs=(P("a", "b"),),
          reference=lambda x: x - 0.5, **m42)

    named("named_swap_axes_4x2", "(4,2) mesh, x resharded from P('a','b') to P('b','a'): an "
          "all-to-all over a sub-axis (device_ids iota) and a collective-permute",
          ["all_to_all", "collective_permute", "mesh2d", "sub_axis"],
          lambda x: wsc(x * 3.0, P("b", "a")), [small(r("nswap42"), (8, 8))],
          in_specs=(P("a", "b"),), out_specs=P("b", "a"), reference=lambda x: x * 3.0, **m42)

    named("named_matmul_4x2", "(4,2) mesh, x [8,16] P('a','b') @ w [16,4] P('b',None): dot of "
          "the shards, all-reduce over 'b'", ["dot", "all_reduce", "mesh2d"],
          lambda x, w: x @ w, [small(r("nmm42x"), (8, 16)), small(r("nmm42w"), (16, 4))],
          in_specs=(P("a", "b"), P("b", None)), out_specs=P("a", None),
          reference=lambda x, w: x @ w, **m42)

    named("named_sum_a_2x4", "(2,4) mesh, x sharded P('a','b'), sum over axis 0: all-reduce "
          "over mesh axis 'a'", ["all_reduce", "mesh2d"], lambda x: x.sum(0),
          [small(r("nsa24"), (4, 8))], in_specs=(P("a", "b"),),
          reference=lambda x: x.sum(0), **m24)

    named("named_sum_2x2x2_ac", "(2,2,2) mesh, x sharded P(('a','c'),'b'), sum over axis 0: "
          "groups on a device_ids iota mesh", ["all_reduce", "mesh2d"], lambda x: x.sum(0),
          [small(r("nsac222"), (8, 8))], in_specs=(P(("a", "c"), "b"),),
          reference=lambda x: x.sum(0), **m222)

    named("named_sum_2x2x2_ca", "(2,2,2) mesh, x sharded P(('c','a'),'b'), sum over axis 1: "
          "groups on a transposed device_ids mesh", ["all_reduce", "mesh2d"],
          lambda x: x.sum(1), [small(r("nsca222"), (8, 8))], in_specs=(P(("c", "a"), "b"),),
          reference=lambda x: x.sum(1), **m222)


# --------------------------------------------------------------------------
# single-device programs
# --------------------------------------------------------------------------


def _define_single():
    # ---- sort ----
    def sort_multi(k1, k2, v, m):
        a = lax.sort((k1, k2, v), num_keys=2, is_stable=True)
        b = lax.sort((m, m * 2.0), dimension=0, num_keys=1)
        return (*a, *b)

    single("sort_multi",
           "lax.sort of three operands with num_keys=2 (ties in the first key), and a "
           "two-operand sort along dimension 0",
           ["sort", "multi_operand"], sort_multi,
           lambda r: [ints(r, (12,), 0, 4), small(r, (12,)), ints(r, (12,), 0, 100),
                      small(r, (5, 3))])

    single("argsort",
           "jnp.argsort (stable, with ties, NaN and -0.0) ascending and descending, and jnp.sort",
           ["sort", "argsort", "nan"],
           lambda x: (jnp.argsort(x), jnp.argsort(x, descending=True), jnp.sort(x)),
           lambda r: [np.array([3, 1, 2, 1, NAN, -0.0, 0.0, -INF, 3, INF, -2, 1],
                               np.float32)])

    # ---- gather / scatter ----
    def gathers(x, idx, idx2):
        return (jnp.take(x, idx, axis=0, mode="fill", fill_value=-1.0),
                jnp.take(x, idx, axis=1, mode="clip"),
                x[idx2[:, 0], idx2[:, 1]],
                x[idx % 6])

    single("gather_take",
           "jnp.take with mode='fill' (out-of-range -> -1) and mode='clip', 2-D point gather, "
           "row gather",
           ["gather", "take"], gathers,
           lambda r: [small(r, (6, 5)), np.array([0, 5, 2, -1, 7, 2, -8], np.int32),
                      np.array([[0, 0], [5, 4], [2, 3], [1, 1]], np.int32)])

    def scatters(x, idx, u, idx_set, u_set):
        return (x.at[idx].add(u),
                x.at[idx_set].set(u_set),
                x.at[idx].max(u),
                x.at[idx].mul(u, mode="drop"))

    single("scatter",
           "x.at[idx].add with repeated and out-of-range indices (dropped), .at[].set with "
           "unique indices, .at[].max, .at[].mul",
           ["scatter", "scatter_add", "repeated_indices"], scatters,
           lambda r: [small(r, (8, 3)), np.array([1, 3, 1, 1, 9, 0, 3], np.int32),
                      small(r, (7, 3)), np.array([6, 2, 0], np.int32), small(r, (3, 3))])

    # ---- convolution ----
    def conv(x, w):
        return lax.conv_general_dilated(
            x, w, window_strides=(2, 1), padding=[(1, 2), (0, 1)],
            lhs_dilation=(1, 2), rhs_dilation=(2, 1),
            dimension_numbers=("NCHW", "OIHW", "NCHW"))

    single("conv",
           "conv_general_dilated NCHW/OIHW with strides (2,1), padding ((1,2),(0,1)), lhs_dilation "
           "(1,2), rhs_dilation (2,1)",
           ["convolution", "padding", "dilation", "stride"], conv,
           lambda r: [small(r, (2, 3, 7, 6), lo=-16, hi=16), small(r, (4, 3, 3, 2), lo=-16, hi=16)])

    def conv_grouped(x, w):
        return lax.conv_general_dilated(
            x, w, window_strides=(1, 2), padding="SAME", feature_group_count=2,
            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    single("conv_grouped",
           "conv_general_dilated NHWC/HWIO, feature_group_count=2, SAME padding, stride (1,2)",
           ["convolution", "feature_group_count", "grouped_conv"], conv_grouped,
           lambda r: [small(r, (1, 5, 6, 4), lo=-16, hi=16), small(r, (3, 3, 2, 6), lo=-16, hi=16)])

    # ---- reduce_window ----
    def pools(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2),
                               [(0, 0), (0, 0), (1, 1), (1, 1)])
        sm = lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        dil = lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 1, 1), "VALID",
                                base_dilation=(1, 1, 2, 1), window_dilation=(1, 1, 1, 2))
        return mx, sm / 4.0, dil

    single("reduce_window_pool",
           "max pool 3x3/2 with padding, avg pool 2x2/2 via reduce_window add, and a reduce_window "
           "with base and window dilation",
           ["reduce_window", "max_pool", "avg_pool"], pools,
           lambda r: [small(r, (1, 2, 6, 7))])

    # ---- random (threefry) ----
    def rand(key_data):
        key = jax.random.wrap_key_data(key_data, impl="threefry2x32")
        k1, k2, k3 = jax.random.split(key, 3)
        return (jax.random.normal(k1, (4, 4)),
                jax.random.uniform(k2, (8,)),
                jax.random.bits(k3, (6,), dtype=jnp.uint32),
                jax.random.randint(key, (5,), -10, 10))

    single("random_threefry",
           "threefry2x32 PRNG with the key passed as a u32[2] argument: split, normal, uniform, "
           "bits, randint",
           ["random", "threefry", "erf_inv"], rand,
           lambda r: [np.array([0, 42], np.uint32)])

    # ---- bf16 ----
    def bf16(a, b):
        return a @ b, a * b + a, jnp.exp(a * 0.25), jnp.sum(a, axis=1), (a - b) / (jnp.abs(b) + 1)

    single("bf16_arith", "bf16 matmul, elementwise mul/add/exp/div and a bf16 reduction",
           ["bf16", "dot", "matmul"], bf16,
           lambda r: [small(r, (8, 8), BF16), small(r, (8, 8), BF16)])

    # ---- dot_general with batch dims ----
    def dots(a, b, c, d, i, j):
        return (jnp.einsum("bij,bjk->bik", a, b),
                lax.dot_general(c, d, (((1, 3), (0, 3)), ((2,), (1,)))),
                lax.dot_general(i, j, (((1,), (0,)), ((), ()))))

    single("dot_batch",
           "dot_general with batch dims (einsum bij,bjk->bik), two contracting dims with a batch "
           "dim in the middle, and an int32 matmul",
           ["dot", "dot_general", "batch_dims", "int"], dots,
           lambda r: [small(r, (2, 3, 4)), small(r, (2, 4, 5)), small(r, (2, 3, 4, 5)),
                      small(r, (3, 4, 2, 5)), ints(r, (3, 4)), ints(r, (4, 2))])

    # ---- cumulative ----
    single("cumsum",
           "jnp.cumsum (both axes), cumprod, cummax, cumlogsumexp, associative_scan on int32",
           ["cumsum", "cumulative", "reduce_window", "associative_scan"],
           lambda x, i: (lax.cumsum(x, axis=0), lax.cumsum(x, axis=1, reverse=True),
                         lax.cumprod(x * 0.5 + 1.0, axis=1), lax.cummax(x, axis=0),
                         lax.cumlogsumexp(x, axis=1), lax.associative_scan(jnp.add, i, axis=1),
                         jnp.cumsum(i, axis=0)),
           lambda r: [small(r, (5, 6)), ints(r, (4, 7))])

    # ---- softmax / logsumexp ----
    single("softmax",
           "jax.nn.softmax, jax.nn.log_softmax and jax.nn.logsumexp along the last axis",
           ["softmax", "logsumexp", "reduce", "exp", "log"],
           lambda x: (jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x, axis=-1),
                      jax.nn.logsumexp(x, axis=-1)),
           lambda r: [np.concatenate([r.standard_normal((3, 6)), [[1000, 0, -1000, 1, 2, 3]]])
                      .astype(np.float32)])

    # ---- argmax (variadic reduce) ----
    single("argmax",
           "jnp.argmax / jnp.argmin (variadic reduce) with ties and NaN, and int32 argmax",
           ["argmax", "argmin", "variadic_reduce", "nan"],
           lambda x, i: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), jnp.argmax(i, axis=0)),
           lambda r: [np.array([[1, 3, 3, 2], [NAN, 1, 5, 5], [-INF, -INF, -1, 0],
                                [0.0, -0.0, 0.0, -0.0]], np.float32),
                      ints(r, (5, 3), -3, 3)])

    # ---- integer division / remainder edge cases ----
    a = np.array([7, -7, 7, -7, I32_MIN, I32_MIN, 0, 5, -5, I32_MAX, I32_MIN, 1, 13, -13, 0, I32_MIN],
                 np.int32)
    b = np.array([2, 2, -2, -2, -1, 1, 0, 0, 0, -1, 0, I32_MIN, 5, 5, -3, I32_MIN], np.int32)
    ua = np.array([7, 0, 4294967295, 5, 4294967295, 100], np.uint32)
    ub = np.array([2, 0, 1, 0, 4294967295, 7], np.uint32)
    ba = np.array([-128, -128, 127, -7, 9, -128], np.int8)
    bb = np.array([-1, 0, 0, 2, -4, 1], np.int8)

    single("int_divrem_edge",
           "int32 lax.div/lax.rem incl. x/0, x%0, INT_MIN/-1, INT_MIN%-1 and negative operands; "
           "uint32 and int8 likewise",
           ["int", "div", "rem", "division_by_zero", "overflow"],
           lambda a, b, ua, ub, ba, bb: (lax.div(a, b), lax.rem(a, b), lax.div(ua, ub),
                                         lax.rem(ua, ub), lax.div(ba, bb), lax.rem(ba, bb)),
           lambda r: [a, b, ua, ub, ba, bb])

    # ---- shifts ----
    amounts = np.arange(0, 41, dtype=np.int32)
    amounts = np.concatenate([amounts, np.array([-1, I32_MIN], np.int32)])
    vals = np.array([1, -1, I32_MAX, I32_MIN, 12345, -12345], np.int32)
    sx = np.repeat(vals[:, None], amounts.size, axis=1)
    ss = np.repeat(amounts[None, :], vals.size, axis=0)

    single("shifts_edge",
           "shift_left / shift_right_logical / shift_right_arithmetic on int32 and uint32 with "
           "shift amounts 0..40, -1 and INT_MIN (>= bit width)",
           ["int", "shift", "shift_left", "shift_right_logical", "shift_right_arithmetic"],
           lambda x, s, ux, us: (lax.shift_left(x, s), lax.shift_right_logical(x, s),
                                 lax.shift_right_arithmetic(x, s), lax.shift_left(ux, us),
                                 lax.shift_right_logical(ux, us), lax.shift_right_arithmetic(ux, us)),
           lambda r: [sx, ss, sx.view(np.uint32), ss.view(np.uint32)])

    # ---- float -> int conversions ----
    fvals = np.array([NAN, -NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -0.9, 0.99,
                      2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 3e9, -3e9, 1e20,
                      255.5, 256.0, -129.0, 127.9, 4294967296.0, 65535.0, 1e-45, -1e-45],
                     np.float32)
    ivals = np.array([16777217, I32_MAX, I32_MIN, -1, 255, 256, -129, 128, 70000, -70000], np.int32)

    single("convert_edge",
           "lax.convert_element_type f32 -> s32/u32/s8/u8/s16/pred/bf16/f16 of NaN, +-inf, "
           "out-of-range and fractional values; s32 -> f32/s8/u8/u32/bf16",
           ["convert", "nan", "inf", "saturation", "int"],
           lambda f, i: tuple(lax.convert_element_type(f, t) for t in
                              (jnp.int32, jnp.uint32, jnp.int8, jnp.uint8, jnp.int16, jnp.bool_,
                               jnp.bfloat16, jnp.float16))
           + tuple(lax.convert_element_type(i, t) for t in
                   (jnp.float32, jnp.int8, jnp.uint8, jnp.uint32, jnp.bfloat16)),
           lambda r: [fvals, ivals])

    # ---- small int wraparound ----
    single("int8_wrap",
           "int8/uint8/int32 wraparound: add, sub, mul, neg, abs of -128, INT32_MAX+1",
           ["int", "int8", "uint8", "overflow", "wraparound"],
           lambda a, b, ua, ub, i: (a + b, a - b, a * b, -a, jnp.abs(a), ua + ub, ua - ub, ua * ub,
                                    -ua, i + 1, i * 3),
           lambda r: [np.array([127, -128, 100, -100, 0, -1, 64], np.int8),
                      np.array([1, -1, 100, -100, -128, 127, 2], np.int8),
                      np.array([255, 0, 200, 128, 1, 17, 16], np.uint8),
                      np.array([1, 1, 100, 2, 255, 15, 16], np.uint8),
                      np.array([I32_MAX, I32_MIN, 1 << 30, -(1 << 30), 0, -1, 7], np.int32)])

    # ---- comparisons with NaN / -0.0 ----
    cx = np.array([NAN, 0.0, -0.0, 1.0, INF, -INF, NAN, -0.0, 2.0], np.float32)
    cy = np.array([NAN, -0.0, 0.0, NAN, INF, NAN, 1.0, -0.0, -INF], np.float32)
    single("compare_nan",
           "eq/ne/lt/le/gt/ge, max/min with NaN, +-0.0 and infinities; sort with NaN and -0.0",
           ["compare", "nan", "signed_zero", "max", "min", "sort"],
           lambda x, y: (x == y, x != y, x < y, x <= y, x > y, x >= y, lax.max(x, y), lax.min(x, y),
                         jnp.sort(jnp.concatenate([x, y]))),
           lambda r: [cx, cy])

    # ---- rounding ----
    rx = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.0, 0.0, NAN, INF, -INF,
                   8388608.5, 8388609.0, 1.2, -1.7, -3.0, 1e-30], np.float32)
    single("rounding",
           "jnp.round (half to even), lax.round AWAY_FROM_ZERO, floor, ceil, trunc, sign, abs on "
           "halves, +-0.0, NaN, inf",
           ["round", "floor", "ceil", "sign", "nan", "signed_zero"],
           lambda x: (jnp.round(x), lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), jnp.floor(x),
                      jnp.ceil(x), jnp.trunc(x), jnp.sign(x), jnp.abs(x)),
           lambda r: [rx])

    # ---- clamp / select ----
    single("clamp_select",
           "lax.clamp (incl. lo > hi and NaN), lax.select, jnp.where, lax.select_n with an int32 "
           "case index, integer clamp",
           ["clamp", "select", "select_n", "nan"],
           lambda x, lo, hi, p, n, i: (lax.clamp(lo, x, hi), lax.clamp(-1.0, x, 1.0),
                                       lax.select(p, x, lo), jnp.where(x > 0, x, 0.0),
                                       lax.select_n(n, x, lo, hi),
                                       lax.clamp(jnp.int32(-3), i, jnp.int32(5))),
           lambda r: [np.array([-2, 0.5, 3, NAN, -0.0, 1, 7, -9], np.float32),
                      np.array([-1, -1, -1, -1, 0, 2, 5, NAN], np.float32),
                      np.array([1, 1, 1, 1, 0, -2, 6, 0], np.float32),
                      np.array([True, False, True, False, True, False, True, False]),
                      np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32),
                      np.array([-10, -3, 0, 4, 5, 6, I32_MIN, I32_MAX], np.int32)])

    # ---- pad ----
    single("pad_edge",
           "lax.pad with negative low/high edge padding and interior padding",
           ["pad", "negative_padding", "interior_padding"],
           lambda x, v: (lax.pad(x, v, [(-1, 2, 1), (2, -2, 0)]),
                         lax.pad(x, v, [(1, -3, 2), (-1, -1, 1)]),
                         lax.pad(x, jnp.float32(0), [(0, 0, 0), (-5, 3, 0)])),
           lambda r: [small(r, (4, 5)), np.float32(9.5)])

    # ---- rev / iota / concatenate / transpose ----
    single("rev_iota_concat_transpose",
           "lax.rev, lax.iota / broadcasted_iota, concatenate, transpose, reshape",
           ["rev", "iota", "concatenate", "transpose", "reshape"],
           lambda x, y: (lax.rev(x, (0, 2)),
                         lax.iota(jnp.int32, 7),
                         lax.broadcasted_iota(jnp.float32, (2, 4, 5), 1) + x[:2],
                         jnp.concatenate([x, y], axis=1),
                         jnp.transpose(x, (2, 0, 1)),
                         x.reshape(6, 10).T),
           lambda r: [small(r, (3, 4, 5)), small(r, (3, 2, 5))])

    # ---- dynamic slice / update slice out of range ----
    def dyn(x, u, starts, ustarts):
        outs = []
        for k in range(0, starts.shape[0], 2):
            outs.append(lax.dynamic_slice(x, (starts[k], starts[k + 1]), (2, 3)))
            outs.append(lax.dynamic_update_slice(x, u, (starts[k], starts[k + 1])))
        outs.append(lax.dynamic_slice(x, (ustarts[0], ustarts[1]), (3, 2)))
        outs.append(lax.dynamic_update_slice(x, u, (ustarts[0], ustarts[1])))
        return tuple(outs)

    single("dynamic_slice_oob",
           "dynamic_slice / dynamic_update_slice with in-range, out-of-range (clamped) and negative "
           "(JAX wraps negatives by +dim first, then XLA clamps) int32 starts, plus uint32 starts",
           ["dynamic_slice", "dynamic_update_slice", "clamping", "out_of_range"], dyn,
           lambda r: [small(r, (6, 5)), small(r, (2, 3)),
                      np.array([1, 1, 4, 4, 10, 10, -1, -3, 100, -100, 5, 2], np.int32),
                      np.array([4000000000, 2], np.uint32)])

    # ---- transcendental ----
    tx = np.concatenate([np.linspace(-4, 4, 17), [NAN, INF, -INF, 0.0, -0.0, -1.0, -0.999, 1e-7,
                                                  20.0, -20.0, 88.0, 100.0]]).astype(np.float32)
    ty = np.concatenate([np.linspace(3, -3, 17), [1.0, 1.0, 1.0, -0.0, -0.0, 0.0, 0.0, -1.0,
                                                  INF, -INF, NAN, 2.0]]).astype(np.float32)
    single("transcendental",
           "erf, logistic (jax.nn.sigmoid), tanh, expm1, log1p, atan2 (signed zeros, infinities), "
           "exp, log, sqrt, rsqrt",
           ["erf", "logistic", "tanh", "expm1", "log1p", "atan2", "exp", "log", "sqrt", "rsqrt",
            "nan", "inf"],
           lambda x, y: (lax.erf(x), jax.nn.sigmoid(x), jnp.tanh(x), jnp.expm1(x), jnp.log1p(x),
                         jnp.arctan2(y, x), jnp.exp(x), jnp.log(x), jnp.sqrt(x), lax.rsqrt(x)),
           lambda r: [tx, ty])

    # ---- bit ops ----
    bi = np.array([0, 1, -1, I32_MIN, I32_MAX, 255, 256, 0x0F0F0F0F, -256, 12345], np.int32)
    bf = np.array([1.0, -0.0, NAN, INF, -INF, 3.4e38, 1e-40, 65520.0, 1.0009765625, 0.1],
                  np.float32)
    single("bit_ops",
           "population_count, clz, not/and/or/xor, is_finite, reduce_precision (f16- and bf16-like), "
           "bitcast_convert_type f32<->s32, f32->u16[.,2], bf16->s16",
           ["popcnt", "clz", "bitwise", "is_finite", "reduce_precision", "bitcast_convert"],
           lambda i, u8, f: (lax.population_count(i), lax.population_count(u8), lax.clz(i),
                             lax.clz(u8), ~i, i & 0x0FF0, i | 3, i ^ -1, jnp.isfinite(f),
                             lax.reduce_precision(f, exponent_bits=5, mantissa_bits=10),
                             lax.reduce_precision(f, exponent_bits=8, mantissa_bits=7),
                             lax.bitcast_convert_type(f, jnp.int32),
                             lax.bitcast_convert_type(i, jnp.float32),
                             lax.bitcast_convert_type(f, jnp.uint16),
                             lax.bitcast_convert_type(f.astype(jnp.bfloat16), jnp.int16)),
           lambda r: [bi, np.array([0, 1, 128, 255, 15, 16, 7, 200, 64, 3], np.uint8), bf])

    # ---- a constant table large enough for as_text() to elide it ----
    table = (np.arange(48, dtype=np.float32) * 0.25 - 3.0).reshape(4, 12)
    single("const_table",
           "adds and gathers from a 48-element f32 constant table (as_text() would print it as "
           "{...})",
           ["constant", "large_constant", "gather"],
           lambda x, i: (x + jnp.asarray(table), jnp.asarray(table)[i % 4] * 2.0),
           lambda r: [small(r, (4, 12)), np.array([3, 0, 5, -1], np.int32)])

    # ---- while loop / fori on a single device (compiled + lowered) ----
    def collatz(n):
        def cond(c):
            return jnp.any(c[0] != 1)

        def body(c):
            v, steps = c
            done = v == 1
            nv = jnp.where(v % 2 == 0, v // 2, 3 * v + 1)
            return jnp.where(done, v, nv), steps + jnp.where(done, 0, 1)

        return lax.while_loop(cond, body, (n, jnp.zeros_like(n)))

    single("while_collatz",
           "lax.while_loop computing Collatz step counts elementwise (data-dependent trip count)",
           ["while", "int", "control_flow"], collatz,
           lambda r: [np.array([1, 2, 3, 6, 7, 27, 97, 12], np.int32)])


# --------------------------------------------------------------------------
# HLO text helpers
# --------------------------------------------------------------------------


def header_ints(text: str) -> tuple[int, int]:
    head = text.split("\n", 1)[0]
    m = re.search(r"\breplica_count=(\d+)", head)
    n = re.search(r"\bnum_partitions=(\d+)", head)
    return (int(m.group(1)) if m else 1), (int(n.group(1)) if n else 1)


def _braced(text: str, start: int) -> str:
    """Return the text inside the {...} whose '{' is at index start."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:j]
    raise ValueError("unbalanced braces")


SHAPE_RE = re.compile(r"\b(pred|[suf]\d+|bf16)\[([0-9,]*)\]")


def _shapes(s: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(t, tuple(int(d) for d in dims.split(",") if d)) for t, dims in SHAPE_RE.findall(s)]


def entry_layout(text: str):
    head = text.split("\n", 1)[0]
    k = head.index("entry_computation_layout={")
    inner = _braced(head, k + len("entry_computation_layout="))
    params, result = inner.split(")->", 1)
    return _shapes(params), _shapes(result)


def entry_parameters(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """Parameter shapes of the ENTRY computation, by parameter number (regex only)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ENTRY "))
    params = {}
    for line in lines[start + 1:]:
        if line.startswith("}"):
            break
        m = re.match(r"\s*(?:ROOT\s+)?%?\S+ = (pred|[suf]\d+|bf16)\[([0-9,]*)\](?:\{[^}]*\})? "
                     r"parameter\((\d+)\)", line)
        if m:
            dims = tuple(int(d) for d in m.group(2).split(",") if d)
            params[int(m.group(3))] = (m.group(1), dims)
    assert sorted(params) == list(range(len(params))), params
    return [params[i] for i in range(len(params))]


OPCODE_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = .*? ([a-z][a-z0-9\-]*)\(", re.M)


def opcodes(text: str) -> set[str]:
    return set(OPCODE_RE.findall(text))


def custom_call_targets(text: str) -> set[str]:
    return set(re.findall(r'custom_call_target="([^"]+)"', text))


_QUOTED_ABSOLUTE_PATH = re.compile(r'"(/[^"\n]*)"')


def scrub_paths(text: str) -> str:
    """The HLO text with the generating machine's paths made repo-relative.

    XLA's debug info (the FileNames section, ``source_file=`` in metadata) names the Python
    files JAX traced through by absolute path. Files of this repository become relative to its
    root; a file of an installed package keeps its path from ``site-packages/`` on. Any other
    absolute path is an error, so no machine path reaches the corpus.
    """
    def relative(match: re.Match) -> str:
        path = match.group(1)
        root = f"{REPO}/"
        if path.startswith(root):
            return f'"{path[len(root):]}"'
        if "/site-packages/" in path:
            return f'"{path.split("/site-packages/", 1)[1]}"'
        raise AssertionError(f"absolute path outside the repository in HLO text: {path}")
    return _QUOTED_ABSOLUTE_PATH.sub(relative, text)


def compiled_text(compiled) -> tuple[str, bool]:
    """as_text() of the compiled module; if XLA elided large constants ({...}), print
    them in full (checking that otherwise the text is exactly as_text())."""
    text = compiled.as_text()
    if "{...}" not in text or _hlo_lib is None:
        return text, False
    mods = compiled.runtime_executable().hlo_modules()
    assert len(mods) == 1
    assert mods[0].to_string(_hlo_lib.HloPrintOptions()) == text
    opts = _hlo_lib.HloPrintOptions()
    opts.print_large_constants = True
    return mods[0].to_string(opts), True


# --------------------------------------------------------------------------
# running a case
# --------------------------------------------------------------------------


def _np(x) -> np.ndarray:
    return np.asarray(x)


def per_device(garr, devices) -> np.ndarray:
    by_id = {s.device.id: _np(s.data) for s in garr.addressable_shards}
    return np.stack([by_id[d.id] for d in devices])


def run_named(case: Case):
    """Compile a jit + NamedSharding program, check its global outputs against the numpy
    reference, and return (text, large_constants, devices, per-device args, per-device outs)."""
    devs = np.array(jax.devices())
    assert [d.id for d in devs] == list(range(devs.size))
    mesh = Mesh(devs.reshape(case.mesh), case.axes)
    in_shardings = tuple(NamedSharding(mesh, s) for s in case.in_specs)
    kwargs = {}
    if case.out_specs is not None:
        kwargs["out_shardings"] = NamedSharding(mesh, case.out_specs)
    with jax.set_mesh(mesh), tempfile.TemporaryDirectory() as dump:
        gargs = [jax.device_put(a, sh) for a, sh in zip(case.args, in_shardings)]
        lowered = jax.jit(case.fn, in_shardings=in_shardings, **kwargs).lower(*gargs)
        options = {} if case.kind != "partitioned" else {
            "xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"}
        compiled = lowered.compile(compiler_options=options)
        res = jax.tree_util.tree_leaves(compiled(*gargs))
        partitioned = [f.read_text() for f in
                       sorted(Path(dump).glob("*.after_spmd-partitioning.*.txt"))]
    want = jax.tree_util.tree_leaves(case.reference(*case.args))
    assert len(want) == len(res), case.name
    for j, (got, ref) in enumerate(zip(res, want)):
        _assert_eq(_np(got), np.asarray(ref, dtype=_np(got).dtype), f"{case.name} out{j}")
    if case.kind == "partitioned":
        assert len(partitioned) == 1, partitioned
        text, large_constants = partitioned[0], False
    else:
        text, large_constants = compiled_text(compiled)
    devices = list(compiled.runtime_executable().local_devices())
    assert [d.id for d in devices] == list(range(len(devices))), devices
    return (text, large_constants, devices, [per_device(a, devices) for a in gargs],
            [per_device(o, devices) for o in res])


def _dump_file(dump: str, pattern: str) -> str:
    found = sorted(Path(dump).glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0].read_text()


def run_dumped(case: Case, lowered, gargs, mesh_devices):
    """Compile a shard_map program with XLA's pass dumps on and return (text, devices, per-device
    args, per-device outs). The text is XLA's dump: after its SPMD partitioner for kind
    "partitioned", after all its passes for kind "compiled" (the module ``as_text()`` prints,
    for programs XLA:CPU compiles but cannot execute; the dump writes tuple elements as ``%x#i``
    operands where ``as_text()`` writes get-tuple-element lines). Outputs are JAX's, or for an
    ``emulate`` case the emulation's from the per-device inputs."""
    with tempfile.TemporaryDirectory() as dump:
        options = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning"}
        compiled = None
        try:
            compiled = lowered.compile(compiler_options=options)
        except Exception as error:  # XLA:CPU's thunk emitter refuses ragged-all-to-all
            if case.emulate is None or "not supported by XLA:CPU" not in str(error):
                raise
        if case.kind == "partitioned":
            text = _dump_file(dump, "*.after_spmd-partitioning.*.txt")
        else:
            text = _dump_file(dump, "*.cpu_after_optimizations.txt")
    if compiled is not None:
        devices = list(compiled.runtime_executable().local_devices())
    else:
        devices = mesh_devices
    assert [d.id for d in devices] == list(range(len(devices))), devices
    args = [per_device(a, devices) for a in gargs]
    if case.emulate is not None:
        assert compiled is None, f"{case.name}: XLA:CPU compiled it; compare with JAX instead"
        outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(case.emulate(*args))]
    else:
        res = jax.tree_util.tree_leaves(compiled(*gargs))
        outs = [per_device(o, devices) for o in res]
    return text, devices, args, outs


def run_case(case: Case) -> dict:
    text: str
    large_constants = False
    if case.mesh is None:
        jitted = jax.jit(case.fn)
        lowered = jitted.lower(*case.args)
        if case.kind == "lowered":
            text = lowered.as_text(dialect="hlo")
            compiled = lowered.compile()
        else:
            compiled = lowered.compile()
            text, large_constants = compiled_text(compiled)
        res = jax.tree_util.tree_leaves(compiled(*case.args))
        args = [a[None] for a in case.args]
        outs = [_np(o)[None] for o in res]
        devices = None
    elif case.named:
        text, large_constants, devices, args, outs = run_named(case)
    else:
        prev = jax.config.jax_use_shardy_partitioner
        jax.config.update("jax_use_shardy_partitioner", not case.gspmd)
        saved = {k: getattr(jax.config, k) for k in case.jax_config or {}}
        for key, value in (case.jax_config or {}).items():
            jax.config.update(key, value)
        try:
            devs = np.array(jax.devices())[:int(np.prod(case.mesh))]
            assert [d.id for d in devs] == list(range(devs.size))
            mesh = Mesh(devs.reshape(case.mesh), case.axes)
            in_specs = (case.in_specs,) if isinstance(case.in_specs, P) else tuple(case.in_specs)
            g = jax.jit(_shard_map(case.fn, mesh=mesh, in_specs=case.in_specs,
                                   out_specs=case.out_specs))
            gargs = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(case.args, in_specs)]
            lowered = g.lower(*gargs)
            if case.emulate is not None or case.kind == "partitioned":
                text, devices, args, outs = run_dumped(case, lowered, gargs, list(devs))
            elif case.kind == "lowered":
                compiled = lowered.compile()
                res = jax.tree_util.tree_leaves(compiled(*gargs))
                text = lowered.as_text(dialect="hlo")
                args = [a[None] for a in case.args]
                outs = [_np(o)[None] for o in res]
                devices = None
            else:
                compiled = lowered.compile()
                res = jax.tree_util.tree_leaves(compiled(*gargs))
                text, large_constants = compiled_text(compiled)
                # execution order of the executable: partition p runs on devices[p]
                devices = list(compiled.runtime_executable().local_devices())
                assert [d.id for d in devices] == list(range(len(devices))), devices
                args = [per_device(a, devices) for a in gargs]
                outs = [per_device(o, devices) for o in res]
        finally:
            jax.config.update("jax_use_shardy_partitioner", prev)
            for key, value in saved.items():
                jax.config.update(key, value)

    replicas, partitions = header_ints(text)
    d = replicas * partitions
    if case.kind in ("compiled", "partitioned") and case.mesh is not None:
        assert replicas == 1 and partitions == int(np.prod(case.mesh)), (replicas, partitions)
        assert len(devices) == d
    else:
        assert d == 1, (case.name, replicas, partitions)

    # ---- parser-free sanity checks of the text against the arrays ----
    params = entry_parameters(text)
    layout_params, layout_result = entry_layout(text)
    assert len(params) == len(args), (case.name, params, [a.shape for a in args])
    assert params == layout_params, (case.name, params, layout_params)
    for i, ((t, dims), a) in enumerate(zip(params, args)):
        assert a.dtype == HLO_DTYPES[t], (case.name, i, t, a.dtype)
        assert a.shape == (d, *dims), (case.name, i, dims, a.shape)
    assert len(layout_result) == len(outs), (case.name, layout_result, [o.shape for o in outs])
    for j, ((t, dims), o) in enumerate(zip(layout_result, outs)):
        assert o.dtype == HLO_DTYPES[t], (case.name, j, t, o.dtype)
        assert o.shape == (d, *dims), (case.name, j, dims, o.shape)

    if case.check is not None:
        case.check(args, outs)

    ops = opcodes(text)
    targets = custom_call_targets(text)
    jax_only = sorted(t for t in targets if t.startswith(JAX_ONLY_CUSTOM_CALLS))
    elided = "{...}" in text
    runnable = not (targets - set(RUNNABLE_CUSTOM_CALLS)) and not elided
    # manual tags spelled like an HLO opcode ("all_reduce") use the opcode spelling
    features = {t.replace("_", "-") if t.replace("_", "-") in TAGGED_OPCODES else t
                for t in case.features}
    features |= ops & TAGGED_OPCODES
    if any(t == "bf16" for t, _ in params + layout_result) or "bf16[" in text:
        features.add("bf16")
    if jax_only:
        features.add("jax_custom_calls")
    if large_constants:
        features.add("large_constants")
    if re.search(r'"kind":"__ynn_fusion"', text):
        features.add("ynn_fusion")
    if "replica_groups=mesh[" in text:
        features.add("mesh_groups")

    description = case.description
    if large_constants:
        description += " (large constants printed in full; as_text() elides them)"

    (OUT_DIR / f"{case.name}.hlo").write_text(scrub_paths(text))
    arrays = {f"arg{i}": a for i, a in enumerate(args)}
    arrays.update({f"out{j}": o for j, o in enumerate(outs)})
    write_npz(OUT_DIR / f"{case.name}.npz", arrays)

    entry = {
        "name": case.name,
        "kind": case.kind,
        "description": description,
        "replica_count": replicas,
        "num_partitions": partitions,
        "mesh": list(case.mesh) if case.mesh is not None else None,
        "runnable": runnable,
        "features": sorted(features),
    }
    if case.axes is not None:
        entry["mesh_axes"] = list(case.axes)
    if case.emulate is not None:
        entry["expected_outputs"] = ("numpy emulation of the exchange (XLA:CPU cannot execute "
                                     "ragged-all-to-all); the text is XLA's dump")
    if targets:
        entry["custom_call_targets"] = sorted(targets)
    print(f"wrote {case.name}: kind={case.kind} D={d} params={len(args)} outs={len(outs)} "
          f"runnable={runnable}" + (f" custom_calls={sorted(targets)}" if targets else ""))
    return entry


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Same layout as np.savez (stored zip of .npy members) but with fixed timestamps so
    that regenerating the corpus gives byte-identical files."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue())
    path.write_bytes(buf.getvalue())
    # round trip
    with np.load(path) as z:
        assert sorted(z.files) == sorted(arrays)
        for key, arr in arrays.items():
            got = z[key]
            if arr.dtype == np.dtype(BF16):
                assert got.dtype.kind == "V" and got.dtype.itemsize == 2
                got = got.view(BF16)
            assert got.dtype == arr.dtype and got.shape == arr.shape
            assert got.tobytes() == arr.tobytes()


README = """\
# JAX/XLA golden corpus

Generated by `scripts/make_jax_corpus.py` (jax {jax_version}, jaxlib {jaxlib_version},
{n} modules) with

    {command}

JAX is needed only to regenerate these files. Per module NAME:

* `NAME.hlo`: HLO text. kind "compiled" = `jax.jit(f).lower(*args).compile().as_text()`
  (optimized; SPMD-partitioned for `spmd_*` shard_map programs and for `named_*` programs
  (`jax.jit` with `NamedSharding` inputs and sharding constraints; the partitioner prints their
  replica groups in mesh form, `mesh['axis_0'=4,'axis_1'=2] {{'axis_0'}}`), `num_partitions`
  in the header; if XLA elided large constants as `{{...}}` they are printed in full instead);
  kind "lowered" = `jax.jit(f).lower(*args).as_text(dialect="hlo")` (unoptimized); kind
  "partitioned" = XLA's own dump of the module right after its SPMD partitioner, before fusion
  (`compile(compiler_options={{"xla_dump_to": ..., "xla_dump_hlo_pass_re":
  "spmd-partitioning"}})`, the `after_spmd-partitioning` file: what a backend's pipeline
  receives). Paths
  of Python files in the debug info are relative to the repository root.
* `NAME.npz`: `arg{{i}}` = ENTRY parameter i, `out{{j}}` = j-th leaf of the ENTRY result
  (tuple flattened), each shaped `[D, *shape]` with D = replica_count * num_partitions
  (1 when the header has neither) and index f = replica * num_partitions + partition.
  Partition p ran on JAX device id p (checked with axis_index). bf16 arrays are stored as
  raw 2-byte void (`|V2`): `np.load(...)[k].view(ml_dtypes.bfloat16)`. Lowered `shard_map`
  modules (`lowered_spmd_*`, runnable=false) hold global arrays with D = 1.
* Outputs are what XLA:CPU computed (for "lowered" modules: the compiled execution of the
  same program), so transcendental results may differ from other implementations in the
  last ulps; the collective programs use multiples of 1/8 so their sums are exact.
* Compiled texts keep XLA's debug sections (FileNames / FunctionNames / FileLocations /
  StackFrames before the computations, `stack_frame_id` in metadata) and `/*index=N*/`
  comments; fused dots may appear as `kind=kCustom` fusions with `__ynn_fusion` backend
  config (tag "ynn_fusion"); their called computation is plain HLO.
* `MANIFEST.json`: name, kind, description, replica_count, num_partitions, mesh, runnable
  (false if the text has custom-calls such as Sharding / SPMDFullToShardShape /
  xla.sdy.* or elided constants), features.
"""


def _define_program_files(folder: Path | None = None) -> list[str]:
    """Programs kept in ``scripts/jax_programs/*.py`` (one file per theme, e.g. the idioms a
    cleanup pass looks for): each file defines ``define(corpus)`` and registers its cases
    through ``corpus.single`` / ``corpus.spmd`` / ``corpus.named`` (``corpus`` is this
    module), so that programs can be added without editing this file. ``folder`` names another
    folder of such files (``--programs``); a file there may also define ``README_NOTES``, text
    appended to the corpus README. Returns those notes."""
    import importlib.util

    notes = []
    folder = folder or Path(__file__).resolve().parent / "jax_programs"
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        prefix = "jax_programs" if folder.name == "jax_programs" else f"jax_programs_{folder.name}"
        spec = importlib.util.spec_from_file_location(f"{prefix}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.define(sys.modules[__name__])
        notes.append(getattr(module, "README_NOTES", ""))
    return notes


def main(argv: list[str] | None = None) -> int:
    """Regenerate the corpus; ``--only NAME_OR_PREFIX ...`` regenerates just the matching cases
    and keeps every other entry of the manifest (no stale files are removed then)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="PREFIX",
                        help="regenerate only the cases whose name starts with a PREFIX")
    parser.add_argument("--out-dir", type=Path, default=None, metavar="DIR",
                        help="write the corpus to DIR (relative to the repository root unless "
                             "absolute) instead of tests/data/jax")
    parser.add_argument("--programs", nargs="+", type=Path, default=[], metavar="DIR",
                        help="also load the program files of these folders (relative to the "
                             "repository root unless absolute), e.g. scripts/jax_programs/jax_0_12")
    args = parser.parse_args(argv)
    assert len(jax.devices()) == 8, jax.devices()
    global OUT_DIR
    command = COMMAND
    if args.out_dir is not None:
        OUT_DIR = args.out_dir if args.out_dir.is_absolute() else REPO / args.out_dir
        command += f" --out-dir {args.out_dir}"
    if args.programs:
        command += " --programs " + " ".join(str(d) for d in args.programs)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _define_spmd_1d()
    _define_spmd_2d()
    _define_spmd_control_flow()
    _define_lowered_spmd()
    _define_named()
    _define_single()
    notes = _define_program_files()
    for folder in args.programs:
        notes += _define_program_files(folder if folder.is_absolute() else REPO / folder)
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names), "duplicate names"

    selected = [c for c in CASES if not args.only or c.name.startswith(tuple(args.only))]
    if args.only and not selected:
        parser.error(f"no case starts with any of {args.only}")
    fresh = {case.name: run_case(case) for case in selected}
    if args.only:
        manifest_path = OUT_DIR / "MANIFEST.json"
        old = {e["name"]: e for e in json.loads(manifest_path.read_text())}
        old.update(fresh)
        manifest = [old[name] for name in names if name in old]
    else:
        manifest = [fresh[name] for name in names]
        keep = {f"{name}{suffix}" for name in names for suffix in (".hlo", ".npz")}
        for stale in OUT_DIR.iterdir():
            if stale.suffix in (".hlo", ".npz") and stale.name not in keep:
                stale.unlink()
                print(f"removed stale {stale.name}")

    (OUT_DIR / "MANIFEST.json").write_text(
        "[\n" + ",\n".join("  " + json.dumps(e) for e in manifest) + "\n]\n")
    (OUT_DIR / "README.md").write_text(README.format(
        jax_version=jax.__version__, jaxlib_version=jaxlib.__version__,
        n=len(manifest), command=command) + "".join(notes))
    print(f"{len(manifest)} modules, {sum(e['runnable'] for e in manifest)} runnable, "
          f"jax {jax.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
