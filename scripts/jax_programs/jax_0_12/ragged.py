"""ragged_all_to_all programs (JAX 0.12 corpus): the MoE token-dispatch collective.

XLA:CPU compiles ``ragged-all-to-all`` but its thunk emitter refuses to execute it, so these
cases take their text from XLA's dumps (after all optimizations, or right after the SPMD
partitioner) and their expected outputs from ``emulate_ragged``, a dense numpy emulation of the
exchange as ``jax.lax.ragged_all_to_all`` documents it: member i of a group sends rows
``input_offsets[j] : input_offsets[j] + send_sizes[j]`` of its operand to member j, where they
land at rows ``output_offsets[j] ...`` of j's output (offsets in the receiver, given by the
sender); rows nobody writes keep the output operand's values. The emulation is checked against
the expected values JAX's own tests state (``tests/ragged_collective_test.py``:
``test_ragged_all_to_all``, ``..._axis_index_groups``, ``..._degenerate_groups``) before any
case is written.
"""

from __future__ import annotations

import numpy as np

README_NOTES = """
## ragged_all_to_all (`spmd_ragged_*`, `partitioned_ragged_*`)

XLA:CPU compiles `ragged-all-to-all` but cannot execute it ("not supported by XLA:CPU
ThunkEmitter"). For these modules the text is XLA's own dump (`*.cpu_after_optimizations.txt`
for kind "compiled", the `after_spmd-partitioning` file for kind "partitioned") and the `out{j}`
arrays are **not** JAX's: they come from a dense numpy emulation of the exchange
(`scripts/jax_programs/jax_0_12/ragged.py`, `emulate_ragged`), checked first against the
expected values of JAX's own ragged_all_to_all tests. Their manifest entries say so
(`expected_outputs`).
"""


def mesh_groups(mesh: tuple[int, ...], axes: tuple[str, ...], over: tuple[str, ...]) -> list:
    """Device groups of a collective over mesh axes ``over`` (in that order, JAX's
    ``axis_index(over)`` order): device ids laid out row-major over the mesh."""
    ids = np.arange(int(np.prod(mesh))).reshape(mesh)
    rest = [axes.index(a) for a in axes if a not in over]
    moved = np.transpose(ids, rest + [axes.index(a) for a in over])
    size = int(np.prod([mesh[axes.index(a)] for a in over]))
    return moved.reshape(-1, size).tolist()


def emulate_ragged(groups, operand, output, input_offsets, send_sizes, output_offsets,
                   recv_sizes):
    """The per-device results ([D, ...]) of ragged_all_to_all from per-device operands."""
    out = np.array(output, copy=True)
    for group in groups:
        for i, src in enumerate(group):
            for j, dst in enumerate(group):
                n = int(send_sizes[src][j])
                assert int(recv_sizes[dst][i]) == n, ("recv_sizes disagree", src, dst)
                start, land = int(input_offsets[src][j]), int(output_offsets[src][j])
                out[dst][land:land + n] = operand[src][start:start + n]
    return out


def _check_emulation_against_jax_tests() -> None:
    """The expected values of JAX's ragged_all_to_all tests, reproduced by the emulation."""
    ops = [np.array([[1, 2, 2], [3, 4, 0]]), np.zeros((2, 4), int), np.array([[0, 1], [0, 1]]),
           np.array([[1, 2], [1, 1]]), np.array([[0, 0], [1, 2]]), np.array([[1, 1], [2, 1]])]
    assert emulate_ragged([[0, 1]], *ops).tolist() == [[1, 3, 0, 0], [2, 2, 4, 0]]
    four = [np.concatenate([o, o * (10 if k == 0 else 1)]) for k, o in enumerate(ops)]
    four[1] = np.zeros((4, 4), int)
    assert emulate_ragged([[0, 1], [2, 3]], *four).tolist() == [
        [1, 3, 0, 0], [2, 2, 4, 0], [10, 30, 0, 0], [20, 20, 40, 0]]
    degenerate = [np.array([[1, 0, 0, 0], [2, 3, 4, 0]]), np.zeros((2, 4), int),
                  np.array([[0], [0]]), np.array([[1], [3]]), np.array([[2], [1]]),
                  np.array([[1], [3]])]
    assert emulate_ragged([[0], [1]], *degenerate).tolist() == [[0, 0, 1, 0], [0, 2, 3, 4]]


def _moe_dispatch_reference(groups, tokens, dest, capacity):
    """numpy: every device sorts its tokens by destination member (stably) and sends each
    member its block; the receiver stacks the blocks in sender order from row 0. Returns the
    per-device received buffers (zeros beyond what arrived) and receive counts."""
    d = tokens.shape[0]
    buffers = np.zeros((d, capacity) + tokens.shape[2:], tokens.dtype)
    counts = np.zeros((d, len(groups[0])), np.int32)
    for group in groups:
        for j, dst in enumerate(group):
            rows = [tokens[src][np.argsort(dest[src], kind="stable")][
                np.sort(dest[src], kind="stable") == j] for src in group]
            counts[dst] = [len(r) for r in rows]
            block = np.concatenate(rows)
            buffers[dst][:len(block)] = block
    return buffers, counts


def define(corpus) -> None:
    _check_emulation_against_jax_tests()
    jnp, lax, P = corpus.jnp, corpus.lax, corpus.P
    r = corpus.rng_for

    # ---- JAX's own test programs (its stated results are the emulation's check) ----
    def jax_test(axis_index_groups=None):
        def fn(operand, output, io, ss, oo, rs):
            shape = lambda a: a.reshape(a.shape[1:])  # noqa: E731
            return lax.ragged_all_to_all(shape(operand), shape(output), shape(io), shape(ss),
                                         shape(oo), shape(rs), axis_name="x",
                                         axis_index_groups=axis_index_groups)[None]
        return fn

    def emulate_with(groups):
        return lambda *a: [emulate_ragged(groups, *[x.reshape(x.shape[0], *x.shape[2:])
                                                    for x in a]).reshape(a[1].shape)]

    spec6 = (P("x", None),) * 6
    base = [np.array([[1, 2, 2], [3, 4, 0]], np.int32), np.zeros((2, 4), np.int32),
            np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
            np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32)]
    corpus.spmd(
        "spmd_ragged_jax_test_x2",
        "jax's test_ragged_all_to_all: two devices exchange uneven int32 slices (expected "
        "[[1,3,0,0],[2,2,4,0]] as the JAX test states)",
        ["ragged_all_to_all", "int"], jax_test(), base, mesh=(2,), axes=("x",),
        in_specs=spec6, out_specs=P("x"), emulate=emulate_with([[0, 1]]))
    four = [np.concatenate([a, a * 10 if k == 0 else a]) for k, a in enumerate(base)]
    four[1] = np.zeros((4, 4), np.int32)
    corpus.spmd(
        "spmd_ragged_axis_index_groups_x4",
        "jax's test_ragged_all_to_all_axis_index_groups: groups {0,1},{2,3} of a 4-device mesh",
        ["ragged_all_to_all", "int", "axis_index_groups"], jax_test(((0, 1), (2, 3))), four,
        mesh=(4,), axes=("x",), in_specs=spec6, out_specs=P("x"),
        emulate=emulate_with([[0, 1], [2, 3]]))
    degenerate = [np.array([[1, 0, 0, 0], [2, 3, 4, 0]], np.int32), np.zeros((2, 4), np.int32),
                  np.array([[0], [0]], np.int32), np.array([[1], [3]], np.int32),
                  np.array([[2], [1]], np.int32), np.array([[1], [3]], np.int32)]
    corpus.spmd(
        "spmd_ragged_degenerate_x2",
        "jax's test_ragged_all_to_all_degenerate_groups: singleton groups, each device moves "
        "rows within its own buffer",
        ["ragged_all_to_all", "int", "axis_index_groups", "degenerate_groups"],
        jax_test(((0,), (1,))), degenerate, mesh=(2,), axes=("x",), in_specs=spec6,
        out_specs=P("x"), emulate=emulate_with([[0], [1]]))

    # ---- MoE token dispatch: sizes and offsets computed in the program ----
    def dispatch(axis, n, capacity):
        def fn(tokens, dest):
            dest = dest.reshape(-1)
            order = jnp.argsort(dest, stable=True)
            x = tokens[order]
            send = jnp.sum(dest[:, None] == jnp.arange(n)[None, :], axis=0).astype(jnp.int32)
            in_off = jnp.cumsum(send) - send
            recv = lax.all_to_all(send, axis, 0, 0, tiled=True)
            recv_off = jnp.cumsum(recv) - recv
            out_off = lax.all_to_all(recv_off, axis, 0, 0, tiled=True)
            buf = jnp.zeros((capacity,) + x.shape[1:], x.dtype)
            got = lax.ragged_all_to_all(x, buf, in_off, send, out_off, recv, axis_name=axis)
            return got, recv
        return fn

    def routing(key, devices, tokens_per_device, n, capacity, groups):
        rng = r(key)
        while True:
            dest = rng.integers(0, n, size=(devices, tokens_per_device)).astype(np.int32)
            load = [sum(int((dest[src] == j).sum()) for src in g) for g in groups
                    for j in range(n)]
            if max(load) <= capacity:
                return dest

    def moe_case(name, description, features, *, mesh, axes, over, tokens_shape, dtype,
                 capacity, kind="compiled"):
        groups = mesh_groups(mesh, axes, over)
        n = len(groups[0])
        devices = int(np.prod(mesh))
        t = tokens_shape[0]
        tokens = corpus.small(r(name + "x"), (devices * t,) + tokens_shape[1:], dtype)
        dest = routing(name, devices, t, n, capacity, groups).reshape(devices * t)
        spec = P(tuple(axes)) if len(axes) > 1 else P(axes[0])
        axis = over if len(over) > 1 else over[0]

        def emulate(tok, dst):
            return list(_moe_dispatch_reference(groups, tok, dst, capacity))

        corpus.spmd(name, description, ["ragged_all_to_all", "moe_dispatch", "all_to_all",
                                        *features],
                    dispatch(axis, n, capacity), [tokens, dest], mesh=mesh, axes=axes,
                    in_specs=(spec, spec), out_specs=(spec, spec), emulate=emulate, kind=kind)

    moe_case("spmd_ragged_moe_dispatch_8",
             "MoE dispatch over 8 devices: tokens sorted by destination, send sizes counted, "
             "receive sizes and output offsets exchanged with all_to_all, then "
             "ragged_all_to_all into a 16-row buffer", [],
             mesh=(8,), axes=("i",), over=("i",), tokens_shape=(6, 4), dtype=np.float32,
             capacity=16)
    moe_case("partitioned_ragged_moe_dispatch_8",
             "the 8-device MoE dispatch, XLA's module right after SPMD partitioning", [],
             mesh=(8,), axes=("i",), over=("i",), tokens_shape=(6, 4), dtype=np.float32,
             capacity=16, kind="partitioned")
    moe_case("spmd_ragged_moe_y_2x4",
             "MoE dispatch over mesh axis 'y' of a (2,4) mesh (groups {0..3},{4..7}), bf16 "
             "tokens with [2,3] rows", ["mesh2d", "bf16"],
             mesh=(2, 4), axes=("x", "y"), over=("y",), tokens_shape=(5, 2, 3), dtype=corpus.BF16,
             capacity=12)
    moe_case("spmd_ragged_moe_x_2x4",
             "MoE dispatch over mesh axis 'x' of a (2,4) mesh (groups {0,4},{1,5},{2,6},{3,7}), "
             "int32 tokens", ["mesh2d", "int"],
             mesh=(2, 4), axes=("x", "y"), over=("x",), tokens_shape=(4, 3), dtype=np.int32,
             capacity=8)
    moe_case("spmd_ragged_moe_yx_2x4",
             "MoE dispatch over ('y','x') of a (2,4) mesh: one group of 8 in the non-canonical "
             "order y-major (member k is device (k%2)*4 + k//2)", ["mesh2d", "axis_order"],
             mesh=(2, 4), axes=("x", "y"), over=("y", "x"), tokens_shape=(4, 2),
             dtype=np.float32, capacity=10)
    moe_case("partitioned_ragged_moe_yx_2x4",
             "the ('y','x') MoE dispatch, XLA's module right after SPMD partitioning",
             ["mesh2d", "axis_order"],
             mesh=(2, 4), axes=("x", "y"), over=("y", "x"), tokens_shape=(4, 2),
             dtype=np.float32, capacity=10, kind="partitioned")
    moe_case("spmd_ragged_moe_cba_2x2x2",
             "MoE dispatch over ('c','b','a') of a (2,2,2) mesh (reversed axis order)",
             ["mesh3d", "axis_order"],
             mesh=(2, 2, 2), axes=("a", "b", "c"), over=("c", "b", "a"), tokens_shape=(3, 4),
             dtype=np.float32, capacity=8)

    # ---- MoE round trip: dispatch, a per-expert computation, and the combine back ----
    def round_trip(axis, n, capacity):
        def fn(tokens, dest):
            dest = dest.reshape(-1)
            x = tokens[jnp.argsort(dest, stable=True)]
            send = jnp.sum(dest[:, None] == jnp.arange(n)[None, :], axis=0).astype(jnp.int32)
            in_off = jnp.cumsum(send) - send
            recv = lax.all_to_all(send, axis, 0, 0, tiled=True)
            recv_off = jnp.cumsum(recv) - recv
            out_off = lax.all_to_all(recv_off, axis, 0, 0, tiled=True)
            buf = jnp.zeros((capacity,) + x.shape[1:], x.dtype)
            got = lax.ragged_all_to_all(x, buf, in_off, send, out_off, recv, axis_name=axis)
            # each block goes back to its sender, landing where it left from
            back_off = lax.all_to_all(in_off, axis, 0, 0, tiled=True)
            return lax.ragged_all_to_all(got * 2.0 - 1.0, jnp.zeros_like(x), recv_off, recv,
                                         back_off, send, axis_name=axis)
        return fn

    def round_trip_case(name, description, features, *, mesh, axes, over, t, capacity):
        groups = mesh_groups(mesh, axes, over)
        n, devices = len(groups[0]), int(np.prod(mesh))
        tokens = corpus.small(r(name + "x"), (devices * t, 4))
        dest = routing(name, devices, t, n, capacity, groups).reshape(devices * t)
        spec = P(tuple(axes)) if len(axes) > 1 else P(axes[0])

        def expected(tok, dst):
            """Analytic, not emulated: every token comes back to its own device, in the order
            its device sorted them, as 2 * x - 1."""
            rows = [tok[f][np.argsort(dst[f], kind="stable")] for f in range(tok.shape[0])]
            return [np.stack(rows) * np.float32(2.0) - np.float32(1.0)]

        corpus.spmd(name, description, ["ragged_all_to_all", "moe_dispatch", "moe_combine",
                                        "all_to_all", *features],
                    round_trip(over if len(over) > 1 else over[0], n, capacity),
                    [tokens, dest], mesh=mesh, axes=axes, in_specs=(spec, spec),
                    out_specs=spec, emulate=expected)

    round_trip_case("spmd_ragged_moe_round_trip_8",
                    "MoE dispatch over 8 devices, experts compute 2x-1, and a second "
                    "ragged_all_to_all sends every block back to where it came from; expected: "
                    "the device's own tokens sorted by destination, as 2x-1", [],
                    mesh=(8,), axes=("i",), over=("i",), t=6, capacity=16)
    round_trip_case("spmd_ragged_moe_round_trip_yx_2x4",
                    "the MoE round trip over ('y','x') of a (2,4) mesh", ["mesh2d", "axis_order"],
                    mesh=(2, 4), axes=("x", "y"), over=("y", "x"), t=5, capacity=12)
