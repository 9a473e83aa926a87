"""Random numbers: XLA's Threefry and Philox bit generators and the seeded rng op.

Known-answer vectors: Random123's kat_vectors for threefry2x32_20 and philox4x32_10 (the
algorithms XLA implements), and the rng_bit_generator example of the r-xla/anvil documentation
(state [0, 0], THREE_FRY, u32[3,2] -> 1.7973e9 2.5791e9 / 1.3515e9 3.2358e9 / 1.6886e9 4.2293e9,
new state [0, 3]).
"""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from interp_helpers import module, run
from neuron_sim.interpreter.ops.random import philox4x32, threefry2x32

U32 = np.uint32


@pytest.mark.parametrize("counter, key, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_known_answers(counter, key, expected):
    words = threefry2x32(*(np.array([c], U32) for c in counter), *(np.array([k], U32)
                                                                  for k in key))
    assert tuple(int(w[0]) for w in words) == expected


@pytest.mark.parametrize("counter, key, expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_known_answers(counter, key, expected):
    words = philox4x32([np.array([c], U32) for c in counter],
                       tuple(np.array([k], U32) for k in key))
    assert tuple(int(w[0]) for w in words) == expected


def bit_generator(algorithm: str, state, shape: str, state_shape: str = "u64[2]"):
    return run(f"""
        s = {state_shape} parameter(0)
        ROOT r = ({state_shape}, {shape}) rng-bit-generator(s), algorithm={algorithm}
        """, np.asarray(state, np.uint64))


def test_threefry_rng_bit_generator_matches_xla():
    state, bits = bit_generator("rng_three_fry", [0, 0], "u32[3,2]")
    assert state[0].tolist() == [0, 3]  # 3 counters of the half shape [3,1] were used
    assert bits[0, 0].tolist() == [0x6B200159, 0x99BA4EFE]  # counter 0: words 0 and 1
    documented = [[1.7973e9, 2.5791e9], [1.3515e9, 3.2358e9], [1.6886e9, 4.2293e9]]
    assert np.allclose(bits[0].astype(np.float64), documented, rtol=1e-4)


def test_threefry_64_bit_output_joins_the_two_words():
    state, bits = bit_generator("rng_three_fry", [0, 0], "u64[2]")
    assert state[0].tolist() == [0, 2]
    assert int(bits[0, 0]) == 0x99BA4EFE << 32 | 0x6B200159


def test_philox_rng_bit_generator_interleaves_the_four_words():
    # Two-word state: key 0, counter low word state[1] = 0, high word state[0] = 0.
    state, bits = bit_generator("rng_philox", [0, 0], "u32[5]")
    assert bits[0, :4].tolist() == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert state[0].tolist() == [0, 2]  # two 128-bit blocks for five words
    # rng_default is Philox (what XLA:CPU expands it to); three-word states carry the high word.
    state3, bits3 = bit_generator("rng_default", [0, 0, 7], "u32[4]", "u64[3]")
    assert state3[0].tolist() == [0, 1, 7]
    assert bits3[0].tolist() != bits[0, :4].tolist()


def test_narrow_outputs_keep_the_low_bits_of_32_bit_words():
    _, wide = bit_generator("rng_three_fry", [5, 9], "u32[4]")
    _, narrow = bit_generator("rng_three_fry", [5, 9], "u16[4]")
    assert narrow[0].tolist() == (wide[0] & 0xFFFF).tolist()


def test_rng_is_deterministic_given_the_seed():
    text = """
        a = f32[] constant(-1)
        b = f32[] constant(1)
        ROOT r = f32[1000] rng(a, b), distribution=rng_uniform
        """
    first = interpreter.run(module(text), [], seed=3)[0]
    again = interpreter.run(module(text), [], seed=3)[0]
    other = interpreter.run(module(text), [], seed=4)[0]
    assert first.tobytes() == again.tobytes() and first.tobytes() != other.tobytes()
    assert first.min() >= -1 and first.max() < 1
    ints = interpreter.run(module("""
        a = s32[] constant(5)
        b = s32[] constant(8)
        ROOT r = s32[100] rng(a, b), distribution=rng_uniform
        """), [], seed=0)[0]
    assert set(ints.reshape(-1).tolist()) == {5, 6, 7}
