"""Finding "all-reduce, then each device dynamic-slices its shard" pairs in a module.

A pair is a dynamic-slice whose sliced array is an all-reduce result and which cuts exactly one
dimension (a 1-D shard, the seed's ``GetSliceInfo1D``): the shape a reduce-scatter can replace.
Compiled modules often split the pair across a fusion boundary — the dynamic-slice inside a
kLoop fusion whose parameter is the all-reduce, its offset computed inside from a partition-id
passed in from outside — so the search descends into fusions and calls and follows their
parameters back out (``CallPath``).
"""

from __future__ import annotations

from dataclasses import dataclass

from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.proofs.index.slice_info import slice_info_1d_of_dims
from neuron_sim.proofs.index.index_encoding import CallPath, resolve_through_calls


@dataclass(frozen=True)
class ArDsPair:
    """One all-reduce + dynamic-slice pair.

    ``path`` leads to the computation holding the dynamic-slice, ``all_reduce_path`` to the
    one holding the all-reduce (a prefix of ``path``). ``full`` is the all-reduce's extent along
    ``slice_dim``; the shard is ``slice_size`` long.
    """

    all_reduce: HloInstruction
    dynamic_slice: HloInstruction
    path: CallPath
    all_reduce_path: CallPath
    slice_dim: int
    slice_size: int
    full: int

    @property
    def start_index(self) -> HloInstruction:
        """The dynamic-slice's start index along the sliced dimension."""
        return self.dynamic_slice.operand(1 + self.slice_dim)

    @property
    def is_fused(self) -> bool:
        """True when the dynamic-slice sits inside a fusion or call the all-reduce feeds."""
        return len(self.path) > len(self.all_reduce_path)

    @property
    def name(self) -> str:
        """``%ds`` or ``%ds in %fusion`` and the all-reduce it slices."""
        where = "".join(f" in %{caller.name}" for caller in reversed(self.path))
        return f"%{self.dynamic_slice.name}{where} of %{self.all_reduce.name}"


def find_ar_ds_pairs(module: HloModule) -> list[ArDsPair]:
    """Every all-reduce + 1-D dynamic-slice pair, in post order of the entry computation.

    Computations reached only through while loops or conditionals are searched too, with
    their parameters left opaque.
    """
    pairs: list[ArDsPair] = []
    visited: set[tuple[HloComputation, CallPath]] = set()
    roots = [module.entry] if module.entry is not None else []
    called_by_control_flow = [c for inst in module.instructions()
                              if inst.opcode in (Opcode.WHILE, Opcode.CONDITIONAL)
                              for c in inst.called_computations]
    for computation in roots + called_by_control_flow:
        _search(computation, (), pairs, visited)
    return pairs


def _search(computation: HloComputation, path: CallPath, pairs: list[ArDsPair],
            visited: set[tuple[HloComputation, CallPath]]) -> None:
    """Every pair in ``computation`` and the fusions and calls inside it, depth first, in post
    order (an explicit stack: a call chain of any depth)."""
    stack = [(computation, path)]
    while stack:
        comp, where = stack.pop()
        if (comp, where) in visited:
            continue
        visited.add((comp, where))
        nested = []
        for inst in comp.post_order():
            if inst.opcode in (Opcode.FUSION, Opcode.CALL) and inst.called_computations:
                nested.append((inst.called_computations[0], where + (inst,)))
            elif inst.opcode is Opcode.DYNAMIC_SLICE:
                pair = pair_of(inst, where)
                if pair is not None:
                    pairs.append(pair)
        stack.extend(reversed(nested))


def pair_of(ds: HloInstruction, path: CallPath = ()) -> ArDsPair | None:
    """The pair ``ds`` (evaluated inside ``path``) forms with the all-reduce it slices, if any."""
    if ds.opcode is not Opcode.DYNAMIC_SLICE or not ds.operands:
        return None
    source, source_path = resolve_through_calls(ds.operand(0), path)
    if source.opcode is not Opcode.ALL_REDUCE or len(source.operands) != 1:
        return None
    shape = source.shape
    if not isinstance(shape, ArrayShape) or shape.is_tuple:
        return None
    info = slice_info_1d_of_dims(shape.dims, tuple(ds.get("dynamic_slice_sizes", ())))
    if not info.valid or len(ds.operands) != 1 + len(shape.dims):
        return None
    return ArDsPair(source, ds, path, source_path, info.slice_dim, info.slice_size,
                    shape.dims[info.slice_dim])
