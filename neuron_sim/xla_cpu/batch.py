"""Several modules of one topology as one module, so XLA compiles them at once.

XLA:CPU spends about a tenth of a second on any compilation, however small the module (its
pass pipeline, LLVM's set-up, the JIT), and a random module of a dozen instructions costs
little more than that. A campaign therefore compiles its modules in batches: module k's
computations are renamed ``b{k}_NAME`` (its instructions too, so a message from XLA names the
module it is about), its channel ids are moved past the previous modules', its entry becomes
an ordinary computation, and a new entry calls each of them on its own parameters and returns
every result leaf of every module in one flat tuple. Nothing flows between the modules; XLA's
call inliner makes one program of them, which computes what each computes alone.
"""

from __future__ import annotations

import re

from neuron_sim.hlo.ir import HloModule
from neuron_sim.hlo.shapes import Shape

_MODULE_MENTION = re.compile(r"\bb(\d+)_")
_MESH = re.compile(r"replica_groups=(mesh\[[^\]]*\])")


def meshes(module: HloModule) -> frozenset[str]:
    """The mesh declarations (``mesh['x'=4,'y'=2]``) the module's mesh-form replica groups
    use. XLA:CPU reads every mesh-form group of a module on one of its meshes when it has
    several (tests/data/xla_oracle/two_meshes), so only modules with the same meshes are
    batched together."""
    return frozenset(_MESH.findall(module.to_text()))


def _leaf_paths(shape: Shape, prefix: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Shape]]:
    if shape.is_tuple:
        return [path for i, element in enumerate(shape.elements)
                for path in _leaf_paths(element, (*prefix, i))]
    return [(prefix, shape)]


def batchable(module: HloModule) -> bool:
    """Array parameters and array result leaves only (what the batch entry passes on)."""
    return all(p.shape.is_array for p in module.entry.parameters) and \
        all(leaf.is_array for _, leaf in _leaf_paths(module.entry.root.shape))


def merge_modules(modules: list[HloModule], name: str = "batch") -> tuple[str, list[int]]:
    """The text of one module computing every module of ``modules`` (all of one topology),
    and how many result leaves each contributes, in order."""
    first = modules[0]
    header = f"HloModule {name}"
    if first.replica_count != 1:
        header += f", replica_count={first.replica_count}"
    if first.num_partitions != 1:
        header += f", num_partitions={first.num_partitions}"
    blocks = [header]
    params: list[str] = []
    body: list[str] = []
    leaves: list[str] = []
    counts: list[int] = []
    channel_offset = 0
    for k, original in enumerate(modules):
        module = original.clone()
        most = 0
        for comp in module.computations:
            comp.name = f"b{k}_{comp.name}"
            for inst in comp.instructions:
                inst.name = f"b{k}_{inst.name}"
                if inst.channel_id is not None:
                    most = max(most, inst.channel_id)
                    inst.set_attr("channel_id", inst.channel_id + channel_offset)
        channel_offset += most
        entry = module.entry
        entry.is_entry = False
        for comp in module.computations:
            if not comp.prints_as_syntax_sugar:
                blocks.append(comp.to_text())
        operands = []
        for p in entry.parameters:
            pname = f"p{k}_{p.parameter_number}"
            body.append(f"  %{pname} = {p.shape} parameter({len(params)})")
            params.append(f"{pname}: {p.shape.without_layout()}")
            operands.append(f"%{pname}")
        result = entry.root.shape
        body.append(f"  %call{k} = {result} call({', '.join(operands)}), to_apply=%{entry.name}")
        paths = _leaf_paths(result)
        for path, leaf in paths:
            source = f"%call{k}"
            for depth, i in enumerate(path):
                target = f"call{k}_{'_'.join(str(j) for j in path[:depth + 1])}"
                inner = _shape_at(result, path[:depth + 1])
                body.append(f"  %{target} = {inner} get-tuple-element({source}), index={i}")
                source = f"%{target}"
            leaves.append((source, leaf))
        counts.append(len(paths))
    leaf_shapes = ", ".join(str(shape) for _, shape in leaves)
    result_shape = ", ".join(str(shape.without_layout()) for _, shape in leaves)
    body.append(f"  ROOT %results = ({leaf_shapes}) tuple({', '.join(s for s, _ in leaves)})")
    blocks.append(f"ENTRY %{name} ({', '.join(params)}) -> ({result_shape}) {{\n"
                  + "\n".join(body) + "\n}")
    return "\n\n".join(blocks) + "\n", counts


def _shape_at(shape: Shape, path: tuple[int, ...]) -> Shape:
    for i in path:
        shape = shape.elements[i]
    return shape


def mentioned_module(message: str) -> int | None:
    """The index k of the module an XLA message names through an instruction ``b{k}_...``."""
    match = _MODULE_MENTION.search(message)
    return int(match.group(1)) if match else None
