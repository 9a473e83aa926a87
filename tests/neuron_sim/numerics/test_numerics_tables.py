"""The committed constant tables agree with mpmath (an independent computation of pi, ln 2...)."""

from __future__ import annotations

import mpmath as mp

from neuron_sim.numerics import _tables as T


def _f(h):
    return mp.mpf(float.fromhex(h))


def test_two_over_pi_bits():
    n = len(T.TWO_OVER_PI_LIMBS)
    with mp.workprec(24 * n + 64):
        want = int(mp.floor(2 / mp.pi * mp.mpf(2) ** (24 * n)))
    got = 0
    for limb in T.TWO_OVER_PI_LIMBS:
        assert 0 <= limb < 2**24
        got = (got << 24) | limb
    assert got == want


def test_pi_over_two_pieces():
    with mp.workprec(300):
        pieces = [_f(h) for h in T.PIO2_CW]
        assert abs(sum(pieces) - mp.pi / 2) < mp.mpf(2) ** -155
        for p in pieces[:3]:  # 33 significant bits: n * piece exact for n < 2**20
            man, _ = mp.frexp(p)
            assert (man * 2**33) == int(man * 2**33)


def test_exp_and_log_tables():
    with mp.workprec(200):
        for j, (h, l) in enumerate(zip(T.EXP_T_HI, T.EXP_T_LO)):
            assert abs(_f(h) + _f(l) - mp.mpf(2) ** (mp.mpf(j) / T.EXP_N)) < mp.mpf(2) ** -104
        for c, s, h, l in zip(T.LOG_C, T.LOG_SHIFT, T.LOG_T_HI, T.LOG_T_LO):
            assert abs(_f(h) + _f(l) + mp.log(_f(c) * 2**s)) < mp.mpf(2) ** -104
        ln2 = _f(T.LN2_HI) + _f(T.LN2_LO) + _f(T.LN2_LL)
        assert abs(ln2 - mp.log(2)) < mp.mpf(2) ** -150
        for i, (h, l) in enumerate(zip(T.ATAN_T_HI, T.ATAN_T_LO)):
            assert abs(_f(h) + _f(l) - mp.atan(mp.mpf(i) / T.ATAN_N)) < mp.mpf(2) ** -104
