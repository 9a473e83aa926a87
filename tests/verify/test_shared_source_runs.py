"""``sharing_source_runs`` (neuron_sim/proofs/all_inputs.py): inside the block a source is run
symbolically once for several targets, and every comparison is what it is alone."""

from __future__ import annotations

from neuron_sim import parse_module
from neuron_sim.proofs import all_inputs
from neuron_sim.proofs.all_inputs import prove, sharing_source_runs
from neuron_sim.topology import Topology

SUM = """%sum (a: s32[], b: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %add = s32[] add(%a, %b)
}
"""


def _ar_ds(offset: str) -> str:
    """all-reduce of s32[8] over 4 partitions, then 2 rows at ``offset`` (from %pid)."""
    return f"""HloModule ar_ds, num_partitions=4
{SUM}
ENTRY %main (x: s32[8]) -> s32[2] {{
  %x = s32[8]{{0}} parameter(0)
  %ar = s32[8]{{0}} all-reduce(%x), channel_id=1, replica_groups=[1,4]<=[4], use_global_device_ids=true, to_apply=%sum
  %pid = u32[] partition-id()
  %two = u32[] constant(2)
  {offset}
  ROOT %ds = s32[2]{{0}} dynamic-slice(%ar, %offset), dynamic_slice_sizes={{2}}
}}
"""


REDUCE_SCATTER = f"""HloModule rs, num_partitions=4
{SUM}
ENTRY %main (x: s32[8]) -> s32[2] {{
  %x = s32[8]{{0}} parameter(0)
  ROOT %rs = s32[2]{{0}} reduce-scatter(%x), channel_id=1, replica_groups=[1,4]<=[4], use_global_device_ids=true, dimensions={{0}}, to_apply=%sum
}}
"""


def test_targets_against_one_source_get_their_own_verdicts_and_the_source_runs_once(
        monkeypatch):
    """Device p of the source reads rows 2p, 2p+1 of the sum: the reduce-scatter (block p at
    position p) is equal; the same slice at offset 4 on every device differs, first on device
    0 (it reads rows 4, 5; its block is rows 0, 1); the source compared with itself is
    equal. Inside the block the source runs once for the three targets and every outcome is
    the one ``prove`` gives alone; after the block nothing is kept."""
    source = parse_module(_ar_ds("%offset = u32[] multiply(%pid, %two)"))
    fixed_offset = parse_module(_ar_ds("%offset = u32[] add(%two, %two)\n  "
                                       "%unused = u32[] multiply(%pid, %two)"))
    targets = [parse_module(REDUCE_SCATTER), fixed_offset, source]
    topology = Topology(1, 4)
    alone = [prove(source, t, topology) for t in targets]
    assert [p.outcome for p in alone] == ["equal", "differ", "equal"]
    assert alone[1].device == 0

    runs = []
    original = all_inputs.run_symbolic

    def counting(module, *args, **kwargs):
        runs.append(module)
        return original(module, *args, **kwargs)

    monkeypatch.setattr(all_inputs, "run_symbolic", counting)
    with sharing_source_runs():
        shared = [prove(source, t, topology) for t in targets]
    assert [p.outcome for p in shared] == [p.outcome for p in alone]
    assert (shared[1].device, shared[1].index) == (alone[1].device, alone[1].index)
    assert sum(m is source for m in runs) == 2  # once as the source, once as a target
    assert len(runs) == 4
    assert all_inputs._shared_runs is None
    runs.clear()
    prove(source, targets[0], topology)
    assert len(runs) == 2
