"""The constant-pool theorems of the seed's multiple-groups matcher, against hand derivation.

Model (pool_theorems.py): one replica, P = G*g partitions, FlattenedID groups; G groups of
width g, contiguous (group k = {k*g + j}) or strided (group k = {k + G*j}); the device at
position j of group k has partition p and must read rows from j*s; it reads from
clamp(s32(s * POOL[p]), 0, (g-1)*s). POOL[a*g + b] (0 <= b < g) is a*g + b (identity), s*b
(multiplied) or b (repeated). Domain: 1 <= G; G*g <= 4096; 1 <= s; g*s <= 2^31-1; and
g >= 2, because the matcher itself never admits g == 1: GetSliceInfo1D needs the slice to
differ from the all-reduce in exactly one dimension and step 5 needs g*s == extent there, so
g == 1 would make the "sliced" dimension whole.

Derivation, by hand:

* identity, contiguous: device (k, j) reads clamp(s*(k*g + j)). G == 1: k = 0, s*j <= (g-1)s,
  sound. G >= 2: device g (k = 1, j = 0) reads min(s*g, (g-1)s) = (g-1)s != 0. So sound
  exactly when G == 1 (the issue's fact). Smallest witness (G, g, s, device) = (2, 2, 1, 2):
  device 2 computes 2, clamped to 1, must read 0.
* identity, strided: partition p = k + G*j. G == 1 is the contiguous case. G >= 2: device 1
  (k = 1, j = 0) reads s (<= (g-1)s) but must read 0. Smallest (2, 2, 1, 1).
* repeated, contiguous: device (k, j) has p mod g = j and reads clamp(s*j) = s*j (0 <= s*j
  <= (g-1)s < 2^31): always sound — the only pool x layout that is.
* repeated, strided: reads s*(p mod g), must read s*(p div G). G == 1: p mod g = p = p div 1.
  G >= 2: device 1 reads s, must read 0. Smallest (2, 2, 1, 1).
* multiplied, contiguous: device (k, j) reads clamp(s32(s*s*j)), must read s*j. s == 1:
  reads j. g == 2: j = 1 reads min(s32(s*s), s) (or 0 if s32(s*s) < 0), which is s exactly
  when s32(s*s) >= s — true while s*s < 2^31 (s <= 46340), false at s = 46341 (s*s =
  2147488281 wraps to -2147479015). g >= 3, s >= 2: j = 1 reads clamp(s32(s*s)); without
  wrap s*s >= 2s > s and (g-1)s >= 2s > s, so it reads more than s; with wrap s32(s*s) == s
  would need 2^32 | s(s-1), impossible for 2 <= s < 2^31. So: sound exactly when s == 1 or
  (g == 2 and s32(s*s) >= s); device 1 is the witness otherwise. The issue's "sound only
  when s == 1 or g == 1" misses the g == 2 case, where the clamp to (g-1)*s = s happens to
  repair the double multiplication — until s*s wraps. Lexicographically smallest witness:
  G = 1, g = 2, s = 46341 (the first s whose square wraps below s), device 1.
* multiplied, strided: G == 1 is the contiguous case. G >= 2: device 1 (k = 1, j = 0) must
  read 0 and reads clamp(s32(s*s)) — wrong whenever s32(s*s) > 0; otherwise device G (k = 0,
  j = 1) must read s but reads 0 or clamp(s32(s*s*(G mod g))), which is never s (as above).
  Sound exactly when G == 1 and the contiguous condition holds; smallest witness
  (1, 2, 46341, 1), from the G == 1 case.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import z3

from neuron_sim.hlo import parse_module
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.passes.neuron.offset_pools import POOL_READINGS
from neuron_sim.proofs.pools import (POOLS, BitVecModel, GroupLayout, IntModel, PoolWitness,
                                           prove_characterization, prove_lemmas)
from neuron_sim.proofs.replay import (MULTIPLE_GROUPS, mismatching_devices, pool_witness_idiom,
                                    replay_pool_witness)

C, S = GroupLayout.CONTIGUOUS, GroupLayout.STRIDED

# (pool, layout) -> None (sound everywhere) or the smallest (G, g, s, device) and what that
# device computes, reads and should read.
HAND_DERIVED = {
    ("identity", "contiguous"): ((2, 2, 1, 2), (2, 1, 0)),
    ("identity", "strided"): ((2, 2, 1, 1), (1, 1, 0)),
    ("multiplied", "contiguous"): ((1, 2, 46341, 1), (46341 * 46341 - 2**32, 0, 46341)),
    ("multiplied", "strided"): ((1, 2, 46341, 1), (46341 * 46341 - 2**32, 0, 46341)),
    ("repeated", "contiguous"): None,
    ("repeated", "strided"): ((2, 2, 1, 1), (1, 1, 0)),
}


def test_lemmas_of_the_integer_model_are_proven():
    assert all(prove_lemmas().values())


def test_pool_table_verdicts_and_smallest_witnesses_match_the_derivation(pool_rows):
    assert set(pool_rows) == set(HAND_DERIVED)
    for key, expected in HAND_DERIVED.items():
        row = pool_rows[key]
        if expected is None:
            assert row.verdict.proven and row.status == "PROVEN", key
            continue
        (G, g, s, device), (offset, clamped, block) = expected
        w = row.verdict.witness
        assert row.status == "REFUTED", key
        assert (w.groups, w.width, w.slice_size, w.device) == (G, g, s, device), key
        assert (w.offset, w.clamped, w.expected) == (offset, clamped, block), key


def wraps_below_s(model):
    """s32(s*s) < s, in either encoding."""
    if isinstance(model, IntModel):
        wraps = z3.Int("w_test")
        square = model.s * model.s - 2**32 * wraps
        return [square >= -2**31, square < 2**31], square < model.s
    return [], z3.SignExt(16, model.s * model.s) < model.wide(model.s)


def one_group(m):
    side, wraps = wraps_below_s(m)
    return side, [m.s == 1, z3.And(m.g == 2, z3.Not(wraps))]


# The derivation's conditions, stated here independently of pool_theorems.CHARACTERIZATIONS:
# (integer cases, bit-vector condition, witness (group, position) as bit-vector terms).
def _bv(m, v):
    return z3.BitVecVal(v, m.ID_BITS)


def _positive_square(m):
    return z3.SignExt(16, m.s * m.s) > 0


DERIVED_CONDITIONS = {
    ("identity", C): (lambda m: ([], [m.G == 1]), lambda m: m.G == 1,
                      lambda m: (_bv(m, 1), _bv(m, 0))),
    ("identity", S): (lambda m: ([], [m.G == 1]), lambda m: m.G == 1,
                      lambda m: (_bv(m, 1), _bv(m, 0))),
    ("repeated", C): (lambda m: ([], [z3.BoolVal(True)]), lambda m: z3.BoolVal(True),
                      lambda m: (_bv(m, 0), _bv(m, 0))),
    ("repeated", S): (lambda m: ([], [m.G == 1]), lambda m: m.G == 1,
                      lambda m: (_bv(m, 1), _bv(m, 0))),
    ("multiplied", C): (one_group, lambda m: z3.Or(*one_group(m)[1]),
                        lambda m: (_bv(m, 0), _bv(m, 1))),
    ("multiplied", S): (
        lambda m: (one_group(m)[0], [z3.And(m.G == 1, c) for c in one_group(m)[1]]),
        lambda m: z3.And(m.G == 1, z3.Or(*one_group(m)[1])),
        lambda m: (z3.If(z3.And(m.G != 1, _positive_square(m)), _bv(m, 1), _bv(m, 0)),
                   z3.If(z3.And(m.G != 1, _positive_square(m)), _bv(m, 0), _bv(m, 1)))),
}


@pytest.mark.parametrize("pool, layout", list(DERIVED_CONDITIONS), ids=lambda v: str(v))
def test_the_derived_condition_is_exactly_when_the_fold_is_sound(pool, layout):
    cases, condition, witness = DERIVED_CONDITIONS[(pool, layout)]
    proof = prove_characterization(pool, layout, cases, condition, witness)
    assert proof.sufficient, proof.counterexample
    assert proof.necessary, proof.counterexample


def test_the_table_states_proven_conditions(pool_rows):
    for row in pool_rows.values():
        assert row.characterization.holds, (row.pool, row.layout)
    assert pool_rows[("identity", "contiguous")].sound_when == "G == 1"
    assert pool_rows[("multiplied", "contiguous")].sound_when == \
        "s == 1 or (g == 2 and s32(s*s) >= s)"


def program_reads(pool: str, layout: GroupLayout, G: int, g: int,
                  s: int) -> list[tuple[int, int]]:
    """(row read, row expected) per device (group k, position j), computed with numpy."""
    literal = np.array(POOL_READINGS[pool](G, g, s), dtype=np.int64)
    out = []
    for k, j in itertools.product(range(G), range(g)):
        p = k * g + j if layout is C else k + G * j
        product = (s * int(literal[p]) + 2**31) % 2**32 - 2**31   # s32 multiply
        out.append((min(max(product, 0), (g - 1) * s), j * s))
    return out


INSTANCES = [(G, g, s) for G in (1, 2, 3) for g in (2, 3, 4) for s in (1, 3)] + [
    (1, 2, 46340), (1, 2, 46341), (2, 2, 65536), (3, 2, 92681), (2, 3, 50000)]


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("layout", list(GroupLayout), ids=str)
def test_both_encodings_compute_what_the_program_computes(pool, layout):
    """Evaluate both z3 encodings at concrete instances against a numpy reading of the
    offset computation (including s32 wraparound), device by device."""
    for G, g, s in INSTANCES:
        reads = program_reads(pool, layout, G, g, s)
        for index, (k, j) in enumerate(itertools.product(range(G), range(g))):
            im = IntModel()
            kk, jj = z3.Ints("k j")
            side, offset = im.offset(pool, layout, kk, jj, "t")
            solver = z3.Solver()
            solver.add(*side, im.G == G, im.g == g, im.s == s, kk == k, jj == j)
            assert solver.check() == z3.sat
            got = solver.model().eval(im.clamped(offset)).as_long()
            assert got == reads[index][0], (pool, layout, G, g, s, k, j)

            bm = BitVecModel()
            bk, bj = z3.BitVecVal(k, bm.ID_BITS), z3.BitVecVal(j, bm.ID_BITS)
            term = z3.substitute(bm.clamped(bm.offset(pool, layout, bk, bj)),
                                 (bm.G, z3.BitVecVal(G, bm.ID_BITS)),
                                 (bm.g, z3.BitVecVal(g, bm.ID_BITS)),
                                 (bm.s, z3.BitVecVal(s, 32)))
            assert z3.simplify(term).as_long() == reads[index][0], (pool, layout, G, g, s, k, j)


def test_every_refutation_replays_through_the_interpreter(pool_rows):
    """The seed's multiple-groups pass folds each witness, and executing before and after
    shows the witness device — and no smaller one — reading another shard."""
    for (pool, layout), row in pool_rows.items():
        if row.verdict.witness is None:
            continue
        replay = replay_pool_witness(pool, GroupLayout(layout), row.verdict.witness)
        assert replay.seed_accepts, (pool, layout)
        assert replay.agrees, (pool, layout, replay)


@pytest.mark.parametrize("pool, layout, G, g, s", [
    ("repeated", C, 4, 2, 3), ("repeated", C, 2, 4, 5),
    ("identity", C, 1, 4, 3), ("identity", S, 1, 3, 2),        # G == 1
    ("multiplied", C, 2, 2, 7), ("multiplied", S, 1, 2, 46340),  # the g == 2 cases
    ("multiplied", C, 3, 4, 1),
])
def test_instances_the_derivation_calls_sound_execute_identically(pool, layout, G, g, s):
    witness_shape = PoolWitness(G, g, s, 0, 0, 0, 0, 0, 0)
    idiom = pool_witness_idiom(pool, layout, witness_shape)
    before = parse_module(idiom.text())
    after = before.clone()
    assert get_pass(MULTIPLE_GROUPS).run(after)
    assert mismatching_devices(before, after, Topology(1, G * g)) == []


@pytest.mark.parametrize("pool", POOLS)
def test_the_matcher_never_admits_groups_of_one_device(pool):
    """Why the model has g >= 2: with g == 1 the slice is the whole extent (not a 1-D shard)."""
    idiom = pool_witness_idiom(pool, C, PoolWitness(4, 1, 3, 0, 0, 0, 0, 0, 0))
    explanation = get_pass(MULTIPLE_GROUPS).explain(
        parse_module(idiom.text()).entry.root)
    assert not explanation.matched and explanation.reason == "Dynamic slice is not 1D."
