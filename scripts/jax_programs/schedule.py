"""JAX programs for check-schedule (issue 14): one shard_map program compiled over a mesh of 8
devices — its psum and ppermute move data, so deleting them (DeletePermute) is unsafe — and the
same program over a mesh of 1 device, where XLA keeps the all-reduce (``replica_groups={{0}}``)
and the self-permute (``{{0,0}}``): degenerate collectives, the identity, safe to delete."""

from __future__ import annotations


def define(corpus) -> None:
    lax, P = corpus.lax, corpus.P

    def psum_ppermute(x):
        n = lax.axis_size("i")
        ring = [(k, (k + 1) % n) for k in range(n)]
        return lax.psum(x, "i") * 2 + lax.ppermute(x, "i", ring)

    for devices in (8, 1):
        corpus.spmd(
            f"spmd_schedule_psum_ppermute_{devices}",
            f"psum * 2 + a ring ppermute over a mesh of {devices} device(s): "
            + ("real collectives" if devices > 1 else "degenerate: the identity on one device"),
            ["psum", "all_reduce", "ppermute", "collective_permute", "check_schedule"],
            psum_ppermute, [corpus.small(corpus.rng_for(f"sched{devices}"), (devices * 2, 4))],
            in_specs=P("i"), out_specs=P("i"), mesh=(devices,), axes=("i",))
