"""Constant tables as z3 terms: ``values[index]`` for a symbolic index.

A table is a balanced multiplexer tree over the bits of the index, least significant bit at the
leaves. z3 hash-conses terms and ``If(c, t, t)`` is built as ``t``, so tables with structure
share their subtrees: the position table of 4096 devices in 512 contiguous groups of 8 is a
three-level tree, not 4096 comparisons. This is how both the position of every device in its
group and the constant offset tables (``dynamic-slice`` of a constant) are encoded.

The last ``RECENT_TABLES`` tables built are kept (keyed by the index term, the values and the
width): a campaign proving many pairs on one topology and group layout — the sweep's offset
forms — asks for the same position table again and again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

from neuron_sim.lazy import LazyModule

z3 = LazyModule("z3")

RECENT_TABLES = 64
_recent: OrderedDict[tuple, z3.BitVecRef] = OrderedDict()


def lookup(index: z3.BitVecRef, values: Sequence[int], width: int) -> z3.BitVecRef:
    """``values[index]`` as a ``width``-bit term, for ``0 <= index < len(values)``.

    Indices past the end read the last value (callers constrain or clamp the index, so this
    choice only keeps the tree small). ``index`` may be wider than needed; its high bits are
    ignored, so the caller must make sure they are zero.
    """
    if not values:
        raise ValueError("a table needs at least one value")
    bits = (len(values) - 1).bit_length()
    if bits > index.size():
        raise ValueError(f"a {len(values)}-entry table needs a {bits}-bit index, "
                         f"not a {index.size()}-bit one")
    # (the index term's id is unique while it lives, and the kept table holds it alive)
    key = (index.ctx.ref().value, index.get_id(), width, tuple(int(v) for v in values))
    found = _recent.get(key)
    if found is not None:
        _recent.move_to_end(key)
        return found
    table = _build(index, values, width, bits)
    _recent[key] = table
    if len(_recent) > RECENT_TABLES:
        _recent.popitem(last=False)
    return table


def _build(index: z3.BitVecRef, values: Sequence[int], width: int, bits: int
           ) -> z3.BitVecRef:
    """The multiplexer tree of ``lookup``."""
    mask = (1 << width) - 1
    ctx = index.ctx
    sort = z3.BitVecSort(width, ctx)
    cache: dict[int, z3.BitVecRef] = {}

    def leaf(value: int) -> z3.BitVecRef:
        value = int(value) & mask
        if value not in cache:
            cache[value] = z3.BitVecVal(value, sort)
        return cache[value]

    level = [leaf(v) for v in values]
    level += [level[-1]] * ((1 << bits) - len(level))
    ids = [node.get_id() for node in level]
    for bit in range(bits):
        selector = (z3.Extract(bit, bit, index) == 1).as_ast()
        merged: dict[tuple[int, int], tuple[z3.BitVecRef, int]] = {}
        next_level, next_ids = [], []
        for i in range(0, len(level), 2):
            key = (ids[i], ids[i + 1])
            found = merged.get(key)
            if found is None:
                if key[0] == key[1]:  # z3 hash-conses terms: equal ids, the same term
                    found = (level[i], key[0])
                else:
                    # z3.If(selector, high, low), built without its per-call type coercion
                    node = z3.BitVecRef(z3.Z3_mk_ite(ctx.ref(), selector, level[i + 1].as_ast(),
                                                     level[i].as_ast()), ctx)
                    found = (node, node.get_id())
                merged[key] = found
            next_level.append(found[0])
            next_ids.append(found[1])
        level, ids = next_level, next_ids
    return level[0]
