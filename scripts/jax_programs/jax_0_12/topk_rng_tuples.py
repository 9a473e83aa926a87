"""lax.top_k, rng with XLA:CPU's GetRngSeed, and partitioned dumps of tuple-heavy programs
(JAX 0.12 corpus).

* ``lax.top_k`` lowers to HLO ``topk(x), k=K, largest=true`` (JAX 0.12 adds
  ``is_stable=true``); XLA:CPU compiles it to a ``TopK`` custom-call.
* ``lax.rng_uniform`` compiled by XLA:CPU 0.12 seeds its ThreeFry expansion from a
  ``GetRngSeed`` custom-call (frontend attribute ``_xla_cse_safe_zero_operand``); the outputs
  depend only on the draws being in range.
* XLA's pass dumps write a tuple element as an operand, ``%while.10#0``, instead of a
  get-tuple-element line; the partitioned dumps of while loops, multi-operand sorts, top_k and
  multi-output shard_maps below hold that form.
"""

from __future__ import annotations

import numpy as np

README_NOTES = """
## What JAX 0.12 writes (this corpus, beside the 0.10 one in `tests/data/jax/`)

The 0.10 program list plus programs for what 0.12 emits (`scripts/jax_programs/jax_0_12/`):
tuple elements as operands (`%while.10#0`, `%call#1`) in XLA's pass dumps (the "partitioned"
modules), shard_map collectives over mesh-axis subsets in non-canonical order
(`replica_groups=mesh['x'=2,'y'=4] {'y','x'}`, `{'c','b','a'}`), `topk(...), k=2,
largest=true, is_stable=true`, the `TopK` and `GetRngSeed` custom-calls (a module whose only
custom-calls are `TopK` is runnable), frontend attributes `is_spmd_generated`,
`xla_cpu_small_call`, `_xla_cse_safe_zero_operand`, `control-predecessors` on copies, and
`compare(...), order=TOTAL` in lowered sort comparators.
"""


def define(corpus) -> None:
    jnp, lax, P = corpus.jnp, corpus.lax, corpus.P
    r = corpus.rng_for
    nan, inf = np.float32("nan"), np.float32("inf")

    def topk(x, i):
        v, k = lax.top_k(x, 3)
        iv, ik = lax.top_k(i, 2)
        return v, k, iv, ik

    corpus.single(
        "top_k",
        "lax.top_k k=3 of f32 rows with ties, NaN, -0.0 and infinities, and k=2 of int32 rows",
        ["top_k", "nan", "signed_zero", "int"], topk,
        lambda g: [np.array([[1, 3, 3, 2, -1, 0], [nan, 1, inf, 5, 5, -inf],
                             [-0.0, 0.0, -0.0, 0.0, -1, -2]], np.float32),
                   corpus.ints(g, (4, 7), -3, 3)])

    def rng_seeded(x):
        u = lax.rng_uniform(jnp.float32(-1.5), jnp.float32(2.0), x.shape)
        n = lax.rng_uniform(jnp.int32(3), jnp.int32(9), x.shape)
        inside = (u >= -1.5) & (u < 2.0) & (n >= 3) & (n < 9)
        return jnp.where(inside, x, -x), jnp.sum(inside.astype(jnp.int32))

    corpus.single(
        "rng_get_seed",
        "lax.rng_uniform f32 and s32 compiled: XLA:CPU seeds its expansion from a GetRngSeed "
        "custom-call; only range membership reaches the outputs",
        ["rng", "rng_uniform", "get_rng_seed", "int"], rng_seeded,
        lambda g: [corpus.small(g, (4, 8))], kinds=("compiled",))

    m24 = dict(mesh=(2, 4), axes=("x", "y"))
    xy = P("x", "y")

    def loop_sort_topk(x, y):
        def body(c):
            a, b, k = c
            return (a + lax.psum(a, ("y", "x")) * 0.125,
                    lax.ppermute(b, "y", [(0, 1), (1, 2), (2, 3), (3, 0)]), k + 1)

        a, b, _ = lax.while_loop(lambda c: c[2] < 2, body, (x, y, 0))
        s, t = lax.sort((a, b), num_keys=1)
        return s, t, lax.top_k(a, 2)[0]

    for kind in ("compiled", "partitioned"):
        corpus.spmd(
            f"{'spmd' if kind == 'compiled' else 'partitioned'}_tuples_loop_sort_topk_2x4",
            "(2,4) mesh: a while loop carrying (a, b, k) with psum over ('y','x') and a ring "
            "ppermute over 'y', then a two-operand sort and top_k; tuple elements as %x#i "
            "operands in the dump",
            ["while", "psum", "ppermute", "sort", "top_k", "tuple_operands", "axis_order",
             "mesh2d"], loop_sort_topk,
            [corpus.small(r("tlst24x"), (4, 16)), corpus.small(r("tlst24y"), (4, 16))],
            in_specs=(xy, xy), out_specs=(xy, xy, xy), kind=kind, **m24)

    def cond_tuple(x, y):
        # every device reaches the psum: a collective inside only one branch would be reached
        # by half of its group (XLA:CPU does not notice; neuron-sim refuses it)
        p, q = lax.cond(lax.axis_index("i") % 2 == 0, lambda a, b: (a * 2.0, b + 1.0),
                        lambda a, b: (a - 1.0, b * 3.0), x, y)
        return lax.psum(p, "i"), q

    corpus.spmd(
        "partitioned_tuples_cond_1d",
        "lax.cond on axis_index % 2 whose branches return a pair, then a psum of its first "
        "element: the partitioned dump reads the conditional's tuple with %x#i operands",
        ["cond", "conditional", "axis_index", "tuple_operands", "device_dependent_control_flow"],
        cond_tuple, [corpus.small(r("tcond1x"), (16, 3)), corpus.small(r("tcond1y"), (16, 3))],
        in_specs=(P("i"), P("i")), out_specs=(P(), P("i")), kind="partitioned",
        mesh=(8,), axes=("i",))

    def multi_out(a, b):
        return (lax.all_gather(a, "i", axis=1, tiled=True),
                lax.psum_scatter(b, "i", scatter_dimension=0, tiled=True),
                lax.all_to_all(a, "i", 0, 0, tiled=True), lax.axis_index("i").reshape(1))

    corpus.spmd(
        "partitioned_tuples_multi_output_1d",
        "a shard_map body returning four values (all_gather, psum_scatter, all_to_all, "
        "axis_index): the call's tuple read as %call#i in the partitioned dump",
        ["all_gather", "psum_scatter", "reduce_scatter", "all_to_all", "axis_index",
         "tuple_operands"], multi_out,
        [corpus.small(r("tmo1a"), (64, 3)), corpus.small(r("tmo1b"), (128, 2))],
        in_specs=(P("i"), P("i")), out_specs=(P("i"), P("i"), P("i"), P("i")),
        kind="partitioned", mesh=(8,), axes=("i",))

    def scan_tuple(x):
        def step(c, row):
            c = c + lax.psum(row, "i")
            return c, c * 0.5

        c, ys = lax.scan(step, jnp.zeros_like(x[0]), x)
        return c, ys

    corpus.spmd(
        "partitioned_tuples_scan_psum_1d",
        "lax.scan with a psum in its step, carry and stacked outputs: a while loop over a tuple",
        ["scan", "while", "psum", "all_reduce", "tuple_operands"], scan_tuple,
        [corpus.small(r("tscan1"), (4, 16))], in_specs=P(None, "i"), out_specs=(P("i"), P(None, "i")),
        kind="partitioned", mesh=(8,), axes=("i",))

    wsc = lax.with_sharding_constraint
    corpus.named(
        "partitioned_named_tuple_4x2",
        "jit + NamedSharding on a (4,2) mesh returning a sum over 'b', a replicated copy and a "
        "max: the partitioner's collectives in mesh form",
        ["all_reduce", "all_gather", "mesh2d", "tuple_operands"],
        lambda x: (x.sum(1), wsc(x * 2.0, P()), x.max(0)),
        [corpus.small(r("pnt42"), (8, 6))], in_specs=(P("a", "b"),), mesh=(4, 2),
        axes=("a", "b"),
        reference=lambda x: (x.sum(1), x * 2.0, x.max(0)), kind="partitioned")
