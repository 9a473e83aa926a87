"""z3 against execution on generated all-reduce + dynamic-slice idioms.

For every (topology, group mode, groups, offset) combination below, the fold is executed: the
all-reduce + dynamic-slice module and the reduce-scatter it should equal run through the
interpreter on every device, with inputs whose rows all differ. The proof must be PROVEN
exactly when no device differs, and a refutation's witness must be the smallest device that
differs.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.replica_groups import ReplicaGroups
from neuron_sim.topology import Topology, group_mode, participant_groups
from neuron_sim.passes.neuron.offset_pools import POOL_READINGS
from neuron_sim.proofs.index.fold_proof import FoldStatus, prove_module
from neuron_sim.proofs.idioms import (ArDsIdiom, offset_constant, offset_divmod, offset_flattened,
                                    offset_id_times, offset_jax, offset_pool, offset_table)

MODE_KEYS = {"flattened": ("all-reduce", True, True),
             "cross_replica": ("all-reduce", False, False),
             "cross_replica_and_partition": ("all-reduce", True, False)}


def contiguous(n: int, width: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(range(k * width, (k + 1) * width)) for k in range(n // width))


def strided(n: int, width: int) -> tuple[tuple[int, ...], ...]:
    count = n // width
    return tuple(tuple(k + count * j for j in range(width)) for k in range(count))


def shuffled(n: int, width: int, seed: int) -> tuple[tuple[int, ...], ...]:
    ids = list(range(n))
    random.Random(seed).shuffle(ids)
    return tuple(tuple(ids[k:k + width]) for k in range(0, n, width))


def configurations():
    """(name, replicas, partitions, mode, groups or None) covering the group modes."""
    for P in (2, 4, 6, 8, 12, 16):
        yield f"flat1x{P}_sorted", 1, P, "flattened", (tuple(range(P)),)
        yield f"flat1x{P}_reversed", 1, P, "flattened", (tuple(reversed(range(P))),)
        for width in (w for w in (2, 3, 4) if P % w == 0 and w < P):
            yield f"flat1x{P}_contig{width}", 1, P, "flattened", contiguous(P, width)
            yield f"flat1x{P}_strided{width}", 1, P, "flattened", strided(P, width)
        if P >= 4:
            yield f"flat1x{P}_shuffled", 1, P, "flattened", shuffled(P, 2, P)
    for R, P in ((2, 2), (2, 4)):
        yield f"flat{R}x{P}_contig", R, P, "flattened", contiguous(R * P, R * P // 2)
        yield f"flat{R}x{P}_strided", R, P, "flattened", strided(R * P, R * P // 2)
    for R, P in ((2, 1), (4, 1), (4, 2), (2, 3)):
        yield f"cr{R}x{P}_all", R, P, "cross_replica", None
        if R == 4:
            yield f"cr{R}x{P}_pairs", R, P, "cross_replica", ((0, 1), (2, 3))
            yield f"cr{R}x{P}_strided", R, P, "cross_replica", ((0, 2), (1, 3))
    for R, P in ((2, 2), (4, 2), (2, 1)):
        yield f"crp{R}x{P}_all", R, P, "cross_replica_and_partition", None
        if R == 4:
            yield f"crp{R}x{P}_pairs", R, P, "cross_replica_and_partition", ((1, 0), (2, 3))


def offsets(R: int, P: int, groups: list[tuple[int, ...]], s: int, full: int, fused: bool):
    """Offset computations, some right and some wrong for the configuration."""
    n = len(groups[0])
    position = {f: i for group in groups for i, f in enumerate(group)}
    yield "pid_times_s", offset_id_times(s, fused=fused)
    if R > 1:
        yield "rid_times_s", offset_id_times(s, fused=fused, source="replica-id")
        yield "flat_mod_n", offset_flattened(s, P, fused=fused, divisor=n)
        yield "flat_div_groups", offset_flattened(s, P, fused=fused, divisor=len(groups),
                                                  use_remainder=False)
    if P & (P - 1) == 0 and P > 1:
        yield "jax_masked", offset_jax(s, full, mask=P - 1, fused=fused)
    yield "pid_mod_n", offset_divmod(s, divisor=n, use_remainder=True, fused=fused)
    yield "pid_div_groups", offset_divmod(s, divisor=len(groups), use_remainder=False,
                                          fused=fused)
    if R == 1:
        table = [position[p] for p in range(P)]
        yield "position_table", offset_table(table, s, fused=fused)
        swapped = table[1:2] + table[:1] + table[2:]
        yield "swapped_table", offset_table(swapped, s, fused=fused)
        if len(groups) * n == P:
            for pool, build in POOL_READINGS.items():
                yield f"pool_{pool}", offset_pool(build(len(groups), n, s), s, fused=fused)
    else:
        flat_table = [position[f] for f in range(R * P)]
        yield "rid_table", offset_table(flat_table[::P][:R], s, fused=fused, source="replica-id")
    yield "zero", offset_constant(0, fused=fused)


def combinations():
    cases = []
    for index, (name, R, P, mode, groups) in enumerate(configurations()):
        topology = Topology(R, P)
        gm = group_mode(*MODE_KEYS[mode])
        participants = participant_groups(gm, ReplicaGroups(groups or ()), topology)
        s = 3 if index % 3 == 0 else 2
        full = len(participants[0]) * s
        fused = index % 2 == 1
        for offset_name, lines in offsets(R, P, list(participants), s, full, fused):
            idiom = ArDsIdiom(f"{name}_{offset_name}", R, P, groups, mode, full, s, lines,
                              columns=2, fused=fused)
            cases.append(pytest.param(idiom, id=idiom.name + ("_fused" if fused else "")))
    return cases


CASES = combinations()


def test_there_are_at_least_200_combinations():
    assert len(CASES) >= 200


def differing_devices(idiom: ArDsIdiom) -> list[int]:
    topology = Topology(idiom.replicas, idiom.partitions)
    D = topology.num_devices
    d = np.arange(D)[:, None, None]
    i = np.arange(idiom.full)[None, :, None]
    x = np.broadcast_to(8 * i + d % 8, (D, idiom.full, idiom.columns)).astype(np.int32)
    (sliced,) = interpreter.run(parse_module(idiom.text()), [x], topology)
    (scattered,) = interpreter.run(parse_module(idiom.reduce_scatter_text()), [x], topology)
    return [f for f in range(D) if not np.array_equal(sliced[f], scattered[f])]


VERDICTS: dict[str, bool] = {}


@pytest.mark.parametrize("idiom", CASES)
def test_proof_verdict_equals_execution_verdict(idiom: ArDsIdiom):
    topology = Topology(idiom.replicas, idiom.partitions)
    (proof,) = prove_module(parse_module(idiom.text()), topology)
    differing = differing_devices(idiom)
    VERDICTS[idiom.name] = not differing
    if differing:
        assert proof.status is FoldStatus.REFUTED, proof.describe()
        assert proof.witness.device == differing[0], (proof.describe(), differing)
    else:
        assert proof.status is FoldStatus.PROVEN, proof.describe()


def test_the_combinations_exercise_both_verdicts():
    if len(VERDICTS) < len(CASES):
        for case in CASES:
            VERDICTS.setdefault(case.values[0].name, not differing_devices(case.values[0]))
    sound = sum(VERDICTS.values())
    assert sound >= 50 and len(VERDICTS) - sound >= 50, (sound, len(VERDICTS))


def test_the_combinations_cover_modes_layouts_and_fusion():
    names = [case.id for case in CASES]
    assert len(names) == len(set(names))
    for prefix in ("flat1x", "flat2x", "cr2x", "cr4x", "crp2x", "crp4x"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert any(n.endswith("_fused") for n in names)
    assert any(not n.endswith("_fused") for n in names)
