"""Random numbers: rng-bit-generator (XLA's exact Threefry and Philox), rng and
rng-get-and-update-state (deterministic given the run's seed).

``rng-bit-generator`` reproduces XLA's RngBitGeneratorExpander bit for bit: state ``u64[2]`` is
(key, counter) for ``rng_three_fry``; for ``rng_philox`` the key is state[0] and the 128-bit
counter is state[1:3] (or, for a 2-element state, state[1] as its low word); ``rng_default`` is
Philox, the algorithm XLA:CPU expands it to. Narrow outputs take the low bits of 32-bit words.

``rng`` has no defined algorithm in XLA; ours draws from numpy's Philox generator keyed by the
run's seed and a counter that advances on every rng execution, so a run is reproducible. The
same numbers go to every device (the op's result is replicated).
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo import Opcode

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented
from neuron_sim.interpreter.ops.registry import implements

_U32 = np.uint32
_MASK32 = np.uint64(0xFFFFFFFF)
_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


def _rotate_left(v: np.ndarray, distance: int) -> np.ndarray:
    return (v << _U32(distance)) | (v >> _U32(32 - distance))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0: np.ndarray, k1: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), as XLA implements it."""
    x0, x1 = x0.astype(_U32), x1.astype(_U32)
    ks = (k0.astype(_U32), k1.astype(_U32), _U32(0x1BD11BDA) ^ k0.astype(_U32) ^ k1.astype(_U32))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for block in range(5):
        rotations = _THREEFRY_ROTATIONS[:4] if block % 2 == 0 else _THREEFRY_ROTATIONS[4:]
        for rotation in rotations:
            x0 = x0 + x1
            x1 = _rotate_left(x1, rotation)
            x1 = x0 ^ x1
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + _U32(block + 1)
    return x0, x1


_PHILOX_W = (_U32(0x9E3779B9), _U32(0xBB67AE85))
_PHILOX_M = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))


def philox4x32(counter: list[np.ndarray], key: tuple[np.ndarray, np.ndarray]
               ) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds, as XLA implements it."""
    x = [c.astype(_U32) for c in counter]
    k0, k1 = key[0].astype(_U32), key[1].astype(_U32)
    for _ in range(10):
        product0 = x[0].astype(np.uint64) * _PHILOX_M[0]
        product1 = x[2].astype(np.uint64) * _PHILOX_M[1]
        hi0, lo0 = (product0 >> np.uint64(32)).astype(_U32), (product0 & _MASK32).astype(_U32)
        hi1, lo1 = (product1 >> np.uint64(32)).astype(_U32), (product1 & _MASK32).astype(_U32)
        x = [hi1 ^ x[1] ^ k0, lo1, hi0 ^ x[3] ^ k1, lo0]
        k0, k1 = k0 + _PHILOX_W[0], k1 + _PHILOX_W[1]
    return x


def _split64(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = v.astype(np.uint64)
    return (v & _MASK32).astype(_U32), (v >> np.uint64(32)).astype(_U32)


def _join64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def _split_shape(dims: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """XLA's SplitShapeIntoHalves: the half shape and the split dimension (-1 for scalars)."""
    if not dims:
        return (1,), -1
    split = next((i for i, d in enumerate(dims) if d % 2 == 0), None)
    if split is None:
        split = max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = list(dims)
    half[split] = (dims[split] + 1) // 2
    return tuple(half), split


def threefry_bits(key: np.ndarray, counter: np.ndarray, dims: tuple[int, ...], bits: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Random bits of shape (rows, *dims) and the new counter, for per-row key and counter."""
    rows = key.shape[0]
    k0, k1 = _split64(key)
    k0, k1 = k0[:, None], k1[:, None]
    if bits == 64:
        count = int(np.prod(dims, dtype=np.int64))
        inputs = counter[:, None] + np.arange(count, dtype=np.uint64)[None, :]
        lo, hi = threefry2x32(*_split64(inputs), k0, k1)
        return _join64(lo, hi).reshape(rows, *dims), counter + np.uint64(count)
    half, split = _split_shape(dims)
    count = int(np.prod(half, dtype=np.int64))
    inputs = counter[:, None] + np.arange(count, dtype=np.uint64)[None, :]
    w0, w1 = threefry2x32(*_split64(inputs), k0, k1)
    if split < 0:
        values = w0.reshape(rows)
    else:
        w0 = w0.reshape(rows, *half)
        w1 = w1.reshape(rows, *half)
        paired = np.stack([w0, w1], axis=2 + split)  # (rows, ..., half_d, 2, ...)
        full = list(dims)
        full[split] = half[split] * 2
        values = paired.reshape(rows, *full)
        if full[split] != dims[split]:
            values = np.take(values, np.arange(dims[split]), axis=1 + split)
    return values, counter + np.uint64(count)


def _add_u128(low: np.ndarray, high: np.ndarray, delta: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    new_low = low + delta
    carry = (new_low < low).astype(np.uint64)
    return new_low, high + carry


def philox_bits(key: np.ndarray, counter_low: np.ndarray, counter_high: np.ndarray,
                dims: tuple[int, ...], bits: int):
    """Random bits (rows, *dims) and the new 128-bit counter (low, high)."""
    rows = key.shape[0]
    count = int(np.prod(dims, dtype=np.int64))
    words = count * 2 if bits == 64 else count
    blocks = -(-words // 4)
    iota = np.arange(blocks, dtype=np.uint64)[None, :]
    low, high = _add_u128(counter_low[:, None], counter_high[:, None], iota)
    counter = [*_split64(low), *_split64(high)]
    k0, k1 = _split64(key)
    out = philox4x32(counter, (k0[:, None], k1[:, None]))
    if bits == 64:
        pair = np.stack([_join64(out[0], out[1]), _join64(out[2], out[3])], axis=2)
        values = pair.reshape(rows, -1)[:, :count]
    else:
        values = np.stack(out, axis=2).reshape(rows, -1)[:, :count]
    new_low, new_high = _add_u128(counter_low, counter_high, np.uint64(blocks))
    return values.reshape(rows, *dims), (new_low, new_high)


@implements(Opcode.RNG_BIT_GENERATOR)
def rng_bit_generator(ctx, state):
    algorithm = str(ctx.attr("algorithm", "rng_default") or "rng_default")
    state_shape, data_shape = ctx.inst.shape.elements
    dtype = data_shape.element_type.numpy_dtype
    width = data_shape.element_type.bits
    bits = 64 if width == 64 else 32
    if width not in (8, 16, 32, 64):
        raise Unimplemented("rng-bit-generator", f"for {data_shape.element_type.spelling}")
    state = state.astype(np.uint64)
    key = state[:, 0]
    if algorithm == "rng_three_fry":
        if state.shape[1] < 2:
            raise InterpreterError("rng_three_fry needs a state of at least 2 words")
        values, counter = threefry_bits(key, state[:, 1], data_shape.dims, bits)
        new_state = state.copy()
        new_state[:, 1] = counter
    elif algorithm in ("rng_philox", "rng_default"):
        if state.shape[1] >= 3:
            low, high = state[:, 1], state[:, 2]
        elif state.shape[1] == 2:
            low, high = state[:, 1], state[:, 0]
        else:
            raise InterpreterError("rng_philox needs a state of at least 2 words")
        values, (new_low, new_high) = philox_bits(key, low, high, data_shape.dims, bits)
        new_state = state.copy()
        new_state[:, 1] = new_low
        if state.shape[1] >= 3:
            new_state[:, 2] = new_high
    else:
        raise Unimplemented("rng-bit-generator", f"algorithm {algorithm}")
    if width < bits:
        values = values.astype(f"u{width // 8}")
    values = np.ascontiguousarray(values.astype(f"u{dtype.itemsize}")).view(dtype)
    return [new_state.astype(state_shape.element_type.numpy_dtype), values]


def _generator(ctx) -> np.random.Generator:
    evaluator = ctx.evaluator
    evaluator.rng_calls += 1
    return np.random.Generator(np.random.Philox(key=[evaluator.seed, evaluator.rng_calls]))


@implements(Opcode.RNG)
def rng(ctx, a, b):
    distribution = str(ctx.attr("distribution", ""))
    dims = ctx.inst.shape.dims
    dtype = ctx.dtype
    generator = _generator(ctx)
    if distribution == "rng_uniform":
        if np.dtype(dtype).kind in "iu":
            low = a.astype(np.int64).reshape(a.shape[0], *([1] * len(dims)))
            high = b.astype(np.int64).reshape(b.shape[0], *([1] * len(dims)))
            span = np.maximum(high - low, 1)
            draws = generator.integers(0, 2 ** 62, size=(1, *dims), dtype=np.int64)
            return (low + draws % span).astype(dtype)
        u = generator.random(size=(1, *dims))
        low = a.astype(np.float64).reshape(a.shape[0], *([1] * len(dims)))
        high = b.astype(np.float64).reshape(b.shape[0], *([1] * len(dims)))
        values = low + (high - low) * u
        return np.minimum(values, np.nextafter(high, low)).astype(dtype) if values.size else \
            values.astype(dtype)
    if distribution == "rng_normal":
        mu = a.astype(np.float64).reshape(a.shape[0], *([1] * len(dims)))
        sigma = b.astype(np.float64).reshape(b.shape[0], *([1] * len(dims)))
        return (mu + sigma * generator.standard_normal(size=(1, *dims))).astype(dtype)
    raise Unimplemented("rng", f"distribution {distribution or '(none)'}")


@implements(Opcode.RNG_GET_AND_UPDATE_STATE)
def rng_get_and_update_state(ctx):
    evaluator = ctx.evaluator
    if evaluator.rng_state is None:
        evaluator.rng_state = np.array([evaluator.seed, 0], np.uint64)
    current = evaluator.rng_state.copy()
    delta = int(str(ctx.attr("delta", 0)))  # not a typed attribute: kept as Raw text
    evaluator.rng_state = np.array([current[0], current[1] + np.uint64(delta)], np.uint64)
    return current.reshape(1, *ctx.inst.shape.dims).astype(ctx.dtype)
