"""shard_map collectives over subsets of 2-D and 3-D mesh axes, named in non-canonical order
(JAX 0.12 corpus).

JAX 0.12 writes every shard_map collective with mesh-form groups, and a collective over
``('y','x')`` keeps that order: ``replica_groups=mesh['x'=2,'y'=4] {'y','x'}`` — the group's
members are ordered y-major, so a gather concatenates, a scatter hands out and an all-to-all
exchanges blocks in that order, and a ppermute over ``('c','a')`` numbers devices by it. Expected
outputs are JAX's (XLA:CPU executed every program).
"""

from __future__ import annotations


def define(corpus) -> None:
    lax, P = corpus.lax, corpus.P
    r = corpus.rng_for
    m24 = dict(mesh=(2, 4), axes=("x", "y"))
    m42 = dict(mesh=(4, 2), axes=("x", "y"))
    m222 = dict(mesh=(2, 2, 2), axes=("a", "b", "c"))
    xy, abc = P("x", "y"), P("a", ("b", "c"))

    # JAX 0.12 refuses a ppermute whose axes are not in mesh order unless told otherwise
    unsorted = {"jax_raise_on_ppermute_sort_diff": False}

    def both(name, description, features, fn, args, *, in_specs, out_specs, partitioned=True,
             **mesh):
        config = unsorted if "ppermute" in features else None
        corpus.spmd(f"spmd_{name}", description, ["axis_order", *features], fn, args,
                    in_specs=in_specs, out_specs=out_specs, jax_config=config, **mesh)
        if partitioned:
            corpus.spmd(f"partitioned_{name}", description + " (XLA's module right after SPMD "
                        "partitioning)", ["axis_order", *features], fn, args,
                        in_specs=in_specs, out_specs=out_specs, kind="partitioned",
                        jax_config=config, **mesh)

    both("psum_yx_2x4", "psum over ('y','x') of a (2,4) mesh: mesh['x'=2,'y'=4] {'y','x'}",
         ["psum", "all_reduce", "mesh2d"], lambda x: lax.psum(x, ("y", "x")),
         [corpus.small(r("psyx24"), (4, 12))], in_specs=xy, out_specs=P(), **m24)

    both("all_gather_yx_2x4",
         "all_gather over ('y','x') of a (2,4) mesh, tiled along axis 0 and untiled: blocks in "
         "y-major order", ["all_gather", "mesh2d"],
         lambda x: (lax.all_gather(x, ("y", "x"), axis=0, tiled=True),
                    lax.all_gather(x, ("y", "x"))),
         [corpus.small(r("agyx24"), (4, 12))], in_specs=xy, out_specs=(xy, xy), **m24)

    both("psum_scatter_yx_4x2",
         "psum_scatter over ('y','x') of a (4,2) mesh, scatter dimension 1, tiled",
         ["psum_scatter", "reduce_scatter", "mesh2d"],
         lambda x: lax.psum_scatter(x, ("y", "x"), scatter_dimension=1, tiled=True),
         [corpus.small(r("rsyx42"), (8, 32))], in_specs=xy, out_specs=xy, **m42)

    both("all_to_all_yx_2x4",
         "all_to_all over ('y','x') of a (2,4) mesh: split axis 0, concatenate axis 1",
         ["all_to_all", "mesh2d"],
         lambda x: lax.all_to_all(x, ("y", "x"), 0, 1, tiled=True),
         [corpus.small(r("a2ayx24"), (16, 12))], in_specs=xy, out_specs=xy, **m24)

    ring8 = [(k, (k + 3) % 8) for k in range(8)]
    both("ppermute_yx_2x4",
         "ppermute over ('y','x') of a (2,4) mesh, k -> (k+3)%8 in y-major numbering",
         ["ppermute", "collective_permute", "mesh2d"],
         lambda x: lax.ppermute(x, ("y", "x"), ring8),
         [corpus.small(r("ppyx24"), (4, 12))], in_specs=xy, out_specs=xy, **m24)

    both("psum_ca_2x2x2", "psum over ('c','a') of a (2,2,2) mesh: groups skip axis 'b'",
         ["psum", "all_reduce", "mesh3d"], lambda x: lax.psum(x, ("c", "a")),
         [corpus.small(r("psca222"), (4, 12))], in_specs=abc, out_specs=P(None, "b"), **m222)

    both("psum_cba_2x2x2", "psum, pmax and pmin over ('c','b','a'): every axis, reversed",
         ["psum", "pmax", "pmin", "all_reduce", "mesh3d"],
         lambda x: (lax.psum(x, ("c", "b", "a")), lax.pmax(x, ("c", "b", "a")),
                    lax.pmin(x, ("c", "b", "a"))),
         [corpus.small(r("pscba222"), (4, 12))], in_specs=abc, out_specs=(P(),) * 3,
         partitioned=False, **m222)

    both("all_gather_ca_2x2x2",
         "all_gather over ('c','a') of a (2,2,2) mesh, tiled along axis 1: c-major blocks",
         ["all_gather", "mesh3d"], lambda x: lax.all_gather(x, ("c", "a"), axis=1, tiled=True),
         [corpus.small(r("agca222"), (4, 12))], in_specs=abc, out_specs=abc, **m222)

    both("psum_scatter_ba_2x2x2",
         "psum_scatter over ('b','a') of a (2,2,2) mesh, scatter dimension 0, tiled",
         ["psum_scatter", "reduce_scatter", "mesh3d"],
         lambda x: lax.psum_scatter(x, ("b", "a"), scatter_dimension=0, tiled=True),
         [corpus.small(r("rsba222"), (16, 12))], in_specs=abc, out_specs=abc,
         partitioned=False, **m222)

    both("all_to_all_cb_2x2x2",
         "all_to_all over ('c','b') of a (2,2,2) mesh: split axis 1, concatenate axis 0",
         ["all_to_all", "mesh3d"], lambda x: lax.all_to_all(x, ("c", "b"), 1, 0, tiled=True),
         [corpus.small(r("a2acb222"), (4, 32))], in_specs=abc, out_specs=abc,
         partitioned=False, **m222)

    perm4 = [(0, 3), (3, 1), (1, 0)]
    both("ppermute_ca_2x2x2",
         "ppermute over ('c','a') of a (2,2,2) mesh, partial: 0->3, 3->1, 1->0 in c-major "
         "numbering (position 2 receives zeros)",
         ["ppermute", "collective_permute", "partial_permutation", "mesh3d"],
         lambda x: lax.ppermute(x, ("c", "a"), perm4),
         [corpus.small(r("ppca222"), (4, 12))], in_specs=abc, out_specs=abc,
         partitioned=False, **m222)

    def index_mix(x):
        lin = lax.axis_index(("c", "b", "a"))
        sub = lax.axis_index(("c", "a"))
        return lin.reshape(1, 1), sub.reshape(1, 1), x * (lin + 1).astype(x.dtype)

    both("axis_index_cba_2x2x2",
         "axis_index(('c','b','a')) and axis_index(('c','a')) on a (2,2,2) mesh",
         ["axis_index", "partition_id", "mesh3d"], index_mix,
         [corpus.small(r("aicba222"), (4, 12))], in_specs=abc,
         out_specs=(abc, abc, abc), partitioned=False, **m222)
