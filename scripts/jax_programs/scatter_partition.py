"""Partition-assembly idioms for RewriteScatterPartition (and multi-device collectives that
DeviceAssignmentLegalization rewrites).

Each program assembles every device's shard on every device without calling ``all_gather``:
a ``ppermute`` ring inside ``fori_loop`` that writes the received shard into its slot, and
a ``psum`` of a zero buffer holding the local shard in its slot inside a loop. The compiled
forms show what the SPMD partitioner and XLA's optimizer keep of the loop.
"""

from __future__ import annotations

import numpy as np


def _ring_gather(corpus, axis: str, n: int):
    """Shard_map body: the ring of ``n`` ppermutes in a fori_loop; slot ``(i - k) % n`` of the
    buffer receives the shard that travelled k steps, so after n-1 steps slot j holds shard j."""
    jnp, lax = corpus.jnp, corpus.lax

    def fn(x):
        i = lax.axis_index(axis)
        buf = jnp.zeros((n,) + x.shape, x.dtype)
        buf = lax.dynamic_update_index_in_dim(buf, x, i, 0)

        def body(k, carry):
            b, cur = carry
            cur = lax.ppermute(cur, axis, [(j, (j + 1) % n) for j in range(n)])
            b = lax.dynamic_update_index_in_dim(b, cur, (i - k - 1) % n, 0)
            return b, cur

        buf, _ = lax.fori_loop(0, n - 1, body, (buf, x))
        return buf.reshape((n * x.shape[0],) + x.shape[1:])

    return fn


def _psum_gather(corpus, axis: str, n: int):
    """Shard_map body: a loop-carried psum of a zero buffer with the local shard in slot i
    (the all-reduce form of assembling a partition)."""
    jnp, lax = corpus.jnp, corpus.lax

    def fn(x):
        i = lax.axis_index(axis)

        def body(k, acc):
            buf = jnp.zeros((n,) + x.shape, x.dtype)
            buf = lax.dynamic_update_index_in_dim(buf, x * (k + 1).astype(x.dtype), i, 0)
            return acc + lax.psum(buf, axis)

        out = lax.fori_loop(0, 1, body, jnp.zeros((n,) + x.shape, x.dtype))
        return out.reshape((n * x.shape[0],) + x.shape[1:])

    return fn


def _check_gathered(a, o):
    """Every device holds the concatenation of all shards (global input)."""
    x = a[0]
    want = np.concatenate([x[d] for d in range(x.shape[0])], axis=0)
    for d in range(o[0].shape[0]):
        np.testing.assert_array_equal(o[0][d], want)


def define(corpus) -> None:
    r = corpus.rng_for
    P = corpus.P
    corpus.spmd("spmd_scatter_partition_ring_1d",
                "ppermute ring in fori_loop assembling all 8 shards ([2,3] each) on every "
                "device: an all-gather written as n-1 collective-permutes",
                ["ppermute", "collective_permute", "while", "scatter_partition"],
                _ring_gather(corpus, "i", 8), [corpus.small(r("spring"), (16, 3))],
                in_specs=P("i"), out_specs=P("i"), mesh=(8,), axes=("i",),
                check=_check_gathered)
    corpus.spmd("spmd_scatter_partition_ring_y_2x4",
                "ppermute ring over axis y of a (2,4) mesh in fori_loop assembling the 4 y-shards",
                ["ppermute", "collective_permute", "while", "scatter_partition", "mesh2d"],
                _ring_gather(corpus, "y", 4), [corpus.small(r("spring24"), (8, 12))],
                in_specs=P("x", "y"), out_specs=P("x", "y"), mesh=(2, 4), axes=("x", "y"))
    corpus.spmd("spmd_scatter_partition_psum_1d",
                "psum of a zero buffer holding the local shard in its slot, inside fori_loop: "
                "the all-reduce form of assembling a partition",
                ["psum", "all_reduce", "while", "scatter_partition"],
                _psum_gather(corpus, "i", 8), [corpus.small(r("sppsum"), (16, 3))],
                in_specs=P("i"), out_specs=P("i"), mesh=(8,), axes=("i",),
                check=_check_gathered)
