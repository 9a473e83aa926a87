"""JAX programs holding the idioms of DynamicSliceTranspose, ReplaceMinimumConstant and
PartitionEmbedingOps (issue 12).

* ``dst_*``: a dynamic slice of a transposed array (``jnp.transpose`` then
  ``lax.dynamic_slice``), with starts in range, past the end (clamped) and negative;
* ``rmc_*``: the -inf sentinel of a mask fill (``jnp.where(mask, x, -inf)``, then a max or a
  softmax, with a row that is masked everywhere), of ``jnp.clip`` / ``lax.clamp`` /
  ``jnp.minimum`` with -inf and with ``finfo.min``, and a dynamic-update-slice into a -inf
  buffer;
* ``emb_*``: an embedding lookup ``table[ids]`` from a constant (hence replicated) table, on one
  device and in a shard_map over 8 partitions, the vocabulary-sharded form XLA's SPMD
  partitioner builds itself (the table sharded ``P('i', None)`` by NamedSharding), and a lookup
  with the table, the ids and the result all replicated over 8 partitions as XLA's module
  stands right after its SPMD partitioner (kind "partitioned": the gather is not fused yet,
  and the parameters carry ``sharding={replicated}`` — PartitionEmbedingOps' idiom).

Each single-device program is generated lowered (the idiom survives) and compiled (XLA may
fuse it away).
"""

from __future__ import annotations

import numpy as np

NEG_INF = float("-inf")
F32_MIN = float(np.finfo(np.float32).min)
TABLE = (np.arange(48, dtype=np.float32).reshape(16, 3) * 0.5 - 7.0)
TABLE[5, 1] = -0.0


def define(corpus) -> None:
    jax, jnp, lax = corpus.jax, corpus.jnp, corpus.lax
    P = corpus.P

    def transposed_slices(x, starts):
        t = jnp.transpose(x, (2, 0, 1))
        return (lax.dynamic_slice(t, (starts[0], starts[1], starts[2]), (2, 2, 3)),
                lax.dynamic_slice(t, (starts[3], starts[4], starts[5]), (3, 1, 2)),
                lax.dynamic_slice(jnp.transpose(x[0]), (starts[6], starts[7]), (4, 2)))

    corpus.single(
        "dst_transpose_dynamic_slice",
        "lax.dynamic_slice of jnp.transpose(x, (2,0,1)) and of x[0].T with starts in range, "
        "past the end (clamped to dim - size) and negative",
        ["transpose", "dynamic-slice", "clamp", "out_of_range"], transposed_slices,
        lambda r: [corpus.small(r, (3, 4, 5)),
                   np.array([1, 0, 1, 7, -2, 100, 3, -1], np.int32)])

    def masked_max_softmax(x, mask):
        masked = jnp.where(mask, x, -jnp.inf)
        return masked.max(axis=-1), jax.nn.softmax(masked, axis=-1)

    mask = np.array([[1, 0, 1, 1, 0, 1], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1],
                     [0, 0, 1, 0, 0, 0]], bool)
    corpus.single(
        "rmc_where_max_softmax",
        "jnp.where(mask, x, -inf) then max and softmax over the last axis; row 1 is masked "
        "everywhere (max -inf, softmax NaN)",
        ["select", "mask", "softmax", "neg_inf"], masked_max_softmax,
        lambda r: [corpus.small(r, (4, 6)), mask])

    def clamps(x):
        return (jnp.clip(x, NEG_INF, 2.0), lax.clamp(jnp.float32(NEG_INF), x, jnp.float32(2.0)),
                jnp.minimum(x, NEG_INF), jnp.minimum(x, F32_MIN),
                lax.clamp(jnp.float32(F32_MIN), x, jnp.float32(1.5)))

    corpus.single(
        "rmc_clamp_minimum",
        "jnp.clip / lax.clamp / jnp.minimum with -inf and with finfo(float32).min",
        ["clamp", "minimum", "neg_inf"], clamps,
        lambda r: [np.concatenate([corpus.small(r, (6,)),
                                   np.array([np.inf, -np.inf], np.float32)])])

    def dus_into_neg_inf(u, start):
        buffer = jnp.full((8,), -jnp.inf, jnp.float32)
        filled = lax.dynamic_update_slice(buffer, u, (start[0],))
        return filled, filled.max(), jnp.exp(filled - filled.max())

    corpus.single(
        "rmc_dus_neg_inf_buffer",
        "dynamic_update_slice of 3 values into a buffer of -inf, then max and exp(x - max)",
        ["dynamic-update-slice", "neg_inf"], dus_into_neg_inf,
        lambda r: [corpus.small(r, (3,)), np.array([2], np.int32)])

    table = jnp.asarray(TABLE)
    ids = np.array([0, 5, 15, 7, 8, 3, 12, 1, 5, 9, 10, 2, 14, 4, 6, 11], np.int32)

    corpus.single(
        "emb_take_constant_table",
        "table[ids] from a constant f32[16,3] table (row 5 holds a -0.0)",
        ["gather", "embedding"], lambda i: (table[i] * 1.0,),
        lambda r: [ids[:6]])

    corpus.spmd(
        "emb_shard_map_constant_table",
        "table[ids] from a constant f32[16,3] table in a shard_map over 8 partitions, ids "
        "sharded P('i')", ["gather", "embedding"], lambda i: table[i] * 1.0, [ids],
        mesh=(8,), axes=("i",), in_specs=P("i"), out_specs=P("i"))

    corpus.named(
        "emb_named_vocab_sharded",
        "table[ids] with the f32[16,3] table sharded P('i', None) over 8 devices and ids "
        "replicated: XLA's SPMD partitioner builds the vocabulary-parallel lookup itself",
        ["gather", "embedding"], lambda t, i: t[i], [TABLE, ids[:6]],
        mesh=(8,), axes=("i",), in_specs=(P("i", None), P()),
        reference=lambda t, i: t[i])

    corpus.named(
        "partitioned_emb_replicated_lookup",
        "table[ids] with the f32[16,3] table (row 5 holds a -0.0), the ids and the result all "
        "replicated P() over 8 devices: XLA's module right after its SPMD partitioner (every "
        "partition looks up every row)",
        ["gather", "embedding"], lambda t, i: t[i], [TABLE, ids[:6]],
        mesh=(8,), axes=("i",), in_specs=(P(None, None), P()), out_specs=P(),
        reference=lambda t, i: t[i], kind="partitioned")
