"""Concrete replay of symbolic verdicts through the interpreter.

A z3 refutation names a device; running the all-reduce + dynamic-slice module and its
reduce-scatter fold on every device must show that device (and, since the witness is the
smallest, no smaller one) getting a different shard. A z3 proof must show no device at all.
The inputs make every row of the all-reduce result distinct, so reading another shard is
always visible: ``x[d, i, c] = 8*i + d % 8`` (s32; the group sums of distinct rows stay
distinct modulo 2^32 for the sizes used here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuron_sim.hlo import parse_module
from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.passes import get_pass
from neuron_sim.passes.neuron.offset_pools import POOL_READINGS
from neuron_sim.proofs.idioms import ArDsIdiom, offset_pool
from neuron_sim.proofs.pools import GroupLayout, PoolWitness

MULTIPLE_GROUPS = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"


def distinct_rows_input(module: HloModule, topology: Topology) -> np.ndarray:
    """``[D, rows, columns]`` for the entry's single rank-2 parameter (see the module docs)."""
    (parameter,) = module.entry.parameters
    rows, columns = parameter.shape.dims
    dtype = parameter.shape.element_type.numpy_dtype
    d = np.arange(topology.num_devices)[:, None, None]
    i = np.arange(rows)[None, :, None]
    c = np.zeros(columns, dtype=np.int64)[None, None, :]
    return ((8 * i + d % 8 + c) % (1 << 31)).astype(dtype)


def mismatching_devices(before: HloModule, after: HloModule, topology: Topology) -> list[int]:
    """The devices (flattened ids) whose output differs between the two modules."""
    import neuron_sim.interpreter as interpreter  # verify may use the interpreter; imported late to keep proofs light

    x = distinct_rows_input(before, topology)
    (a,) = interpreter.run(before, [x], topology)
    (b,) = interpreter.run(after, [x], topology)
    return [f for f in range(topology.num_devices) if not np.array_equal(a[f], b[f])]


def pool_witness_idiom(pool: str, layout: GroupLayout, witness: PoolWitness) -> ArDsIdiom:
    """The seed's multiple-groups idiom for the witness's G, g and s: one replica, G*g
    partitions, FlattenedID groups in ``layout``, the ``pool`` literal."""
    G, g, s = witness.groups, witness.width, witness.slice_size
    groups = tuple(tuple(group) for group in layout.groups(G, g))
    literal = POOL_READINGS[pool](G, g, s)
    return ArDsIdiom(f"pool_{pool}_{layout}_G{G}_g{g}_s{s}", 1, G * g, groups, "flattened",
                     g * s, s, offset_pool(literal, s))


@dataclass(frozen=True)
class PoolReplay:
    """A pool-theorem witness run concretely: does the seed accept it, which devices differ?"""

    seed_accepts: bool
    mismatching: tuple[int, ...]
    witness_device: int

    @property
    def agrees(self) -> bool:
        """The seed folds it, the witness device differs and no smaller device does."""
        return (self.seed_accepts and bool(self.mismatching)
                and self.mismatching[0] == self.witness_device)


def replay_pool_witness(pool: str, layout: GroupLayout, witness: PoolWitness) -> PoolReplay:
    """Build the witness's module, fold it with the seed's multiple-groups pass and execute
    both on every device."""
    idiom = pool_witness_idiom(pool, layout, witness)
    before = parse_module(idiom.text(), idiom.name)
    after = before.clone()
    accepted = get_pass(MULTIPLE_GROUPS).run(after)
    topology = Topology(1, witness.groups * witness.width)
    mismatching = mismatching_devices(before, after, topology) if accepted else []
    return PoolReplay(accepted, tuple(mismatching), witness.device)
