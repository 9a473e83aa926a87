"""DynamicSliceTranspose (key ``aws_neuron_dynamic_slice_transpose``): slice before transposing.

Seed: hlo-misc-cleanup-sweep.txt §3.4 (matcher @0x1ea02d0, Expand @0x1ea0570), an
OpExpanderPass. The seed's checks: the matcher accepts ``transpose(dynamic-slice(...))``; the
Expand takes ``ds = transpose->operand(0)`` and ``perm = transpose->dimensions()``, permutes
the slice sizes and start indices by ``InversePermutation(perm)`` and returns
``CreateTranspose(CreateDynamicSlice(ds->operand(0), starts, sizes), perm)``.

That pseudocode cannot type-check: the dynamic-slice's operand 0 is already in the slice's own
frame, so permuting its sizes and starts slices the wrong dimensions (and the transpose then
gives a shape the original transpose does not have). Our reading (seed status "our reading"),
the issue's: the transpose sits *under* the slice,

    dynamic-slice(transpose(x, perm), s_0 .. s_{n-1}), sizes z
      -> transpose(dynamic-slice(x, s'_0 .. s'_{n-1}), sizes z', perm)
    with s'_d = s_{inv[d]}, z'_d = z_{inv[d]}, inv = InversePermutation(perm)

so the slice runs in the operand's layout and the transpose moves only the window. Dimension
``i`` of the transposed array is dimension ``perm[i]`` of x, of the same extent, so each start
is clamped to ``[0, dim - size]`` against the same numbers before and after — the clamp is per
dimension and permuting whole dimensions keeps it (tests/passes/test_dynamic_slice_transpose.py
checks it with out-of-range and negative starts). Contract: exact.

Gates (each declines): not a dynamic-slice; operand 0 not a transpose; the old form with one
vector of start indices (no scalar start per dimension). The transpose may have other users: it
stays for them (the rewrite is still exact). Known unsafety: none known; it does not check that
the rewrite is profitable (a transpose used elsewhere is kept, so the module can grow by one
transpose).
"""

from __future__ import annotations

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloInstruction
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.passes.base import OpExpanderPass, SeedStatus


def inverse_permutation(perm: tuple[int, ...]) -> tuple[int, ...]:
    """``inv`` with ``inv[perm[i]] == i`` (XLA's InversePermutation)."""
    inv = [0] * len(perm)
    for i, d in enumerate(perm):
        inv[d] = i
    return tuple(inv)


def has_scalar_starts(ds: HloInstruction) -> bool:
    """One scalar start index per dimension (not the old single start-vector form)."""
    rank = ds.operand(0).shape.rank
    starts = ds.operands[1:]
    return len(starts) == rank and all(s.shape.rank == 0 for s in starts)


class DynamicSliceTranspose(OpExpanderPass):
    """dynamic-slice(transpose(x, perm), s) -> transpose(dynamic-slice(x, s permuted), perm)."""

    name = "aws_neuron_dynamic_slice_transpose"
    seed_status = SeedStatus.OUR_READING
    seed = "hlo-misc-cleanup-sweep.txt §3.4 DynamicSliceTranspose"
    summary = ("dynamic-slice of a transpose -> transpose of a dynamic-slice of the operand, "
               "starts and sizes permuted (the seed's matcher/Expand is read well-typed)")
    pipelines = {"neuron-closer": 55}
    seed_says = ("OpExpander; matcher `transpose(dynamic-slice(...))`; Expand: "
                 "`InversePermutation(perm)`, sizes and starts permuted, "
                 "`CreateTranspose(CreateDynamicSlice(ds->operand(0), starts, sizes), perm)` "
                 "(ill-typed as written)")
    our_reading = ("`dynamic-slice(transpose(x, perm), s)` -> `transpose(dynamic-slice(x, s'), "
                   "perm)`, `s'[perm[i]] = s[i]`, sizes likewise; declines a non-transpose "
                   "operand and the single start-vector form")
    known_unsafety = "none known; a transpose with other users is kept for them"

    def matches(self, inst: HloInstruction) -> bool:
        return (inst.opcode is Opcode.DYNAMIC_SLICE
                and inst.operand(0).opcode is Opcode.TRANSPOSE
                and has_scalar_starts(inst))

    def expand(self, inst: HloInstruction) -> HloInstruction:
        transpose = inst.operand(0)
        x = transpose.operand(0)
        perm = tuple(transpose.get("dimensions"))
        inv = inverse_permutation(perm)
        starts = inst.operands[1:]
        sizes = tuple(inst.get("dynamic_slice_sizes"))
        comp = inst.parent
        sliced = comp.add_before(make_instruction(
            comp, Opcode.DYNAMIC_SLICE, (x, *(starts[i] for i in inv)), name=inst.name,
            dynamic_slice_sizes=tuple(sizes[i] for i in inv)), inst)
        return comp.add_before(make_instruction(
            comp, Opcode.TRANSPOSE, (sliced,), shape=inst.shape, name=transpose.name,
            dimensions=perm), inst)
