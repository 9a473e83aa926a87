"""Hypothesis strategies for HLO modules that reach the passes: topologies, replica groups in
every group mode, random well-typed modules, the collective idioms the seed passes look for, and
inputs for them.

After ``hypothesis.extra.numpy``: plural nouns, keyword-only arguments with small defaults, and
every argument takes a value or a strategy::

    from hypothesis import given
    from neuron_sim.verify.strategies import collective_idioms, hlo_modules, topologies

    @given(hlo_modules(topology=topologies(max_devices=4), max_instructions=12))
    def test_prints_and_parses_back(module): ...

Every module is built with the HLO builder (``neuron_sim.hlo.builder``), so it is well typed
and passes the checker by construction: nothing is generated and then filtered. Each
collective's groups are drawn for the module's own topology and the collective's group mode
(docs/semantics.md §2). Structure follows the draws so that hypothesis' shrinking gives small
modules: the number of steps is drawn first and shrinks towards one, each step's kind is drawn
from a list that starts with the cheapest, and a group layout shrinks towards one sorted group.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from neuron_sim.hlo import HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.builder import ComputationBuilder, ModuleBuilder
from neuron_sim.hlo.replica_groups import (IotaReplicaGroups, MeshAxisRef, MeshReplicaGroups,
                                           ReplicaGroups)
from neuron_sim.hlo.shapes import ArrayShape, scalar
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.topology import Topology
from neuron_sim.passes.neuron.offset_pools import expected_pools
from neuron_sim.verify.inputs import InputValue, generate_inputs
from neuron_sim.proofs.idioms import (MODE_ATTRIBUTES, Offset, offset_constant, offset_divmod,
                                    offset_flattened, offset_id_times, offset_jax, offset_pool,
                                    offset_table)

__all__ = ["COLLECTIVE_OPCODES", "GROUP_MODES", "IDIOM_KINDS", "OPERATIONS", "RandomDraw",
           "collective_idioms", "compact_forms", "composite", "draw_example", "hlo_modules",
           "module_inputs", "replica_groups", "sampled", "spelled_groups", "topologies"]

Draw = Callable[[st.SearchStrategy], Any]

# (channel_id, use_global_device_ids) of each group mode; cross_partition is the channel form
# of the ops without use_global_device_ids (all-to-all, collective-permute).
GROUP_MODES: dict[str, tuple[int | None, bool]] = {**MODE_ATTRIBUTES,
                                                   "cross_partition": (1, False)}
REDUCING_MODES = ("cross_replica", "cross_replica_and_partition", "flattened")
ROUTING_MODES = ("cross_replica", "cross_partition")
COLLECTIVE_OPCODES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                      "collective-permute")
# Group layouts, simplest first (hypothesis shrinks towards the first).
LAYOUTS = ("one_sorted", "contiguous", "strided", "permuted", "one_unsorted", "singletons",
           "empty")


# The strategies the definitions below draw from, by id: what ``RandomDraw`` decides itself.
# (The cached strategies live as long as the process, so their ids are never reused.)
_PRIMITIVES: dict[int, tuple] = {}


def _primitive(strategy: st.SearchStrategy, *spec: Any) -> st.SearchStrategy:
    _PRIMITIVES[id(strategy)] = spec
    return strategy


def composite(definition: Callable[..., Any]) -> Callable[..., st.SearchStrategy]:
    """``st.composite`` that also remembers the call, so that ``RandomDraw`` can run the
    definition directly, without hypothesis' engine."""
    made = st.composite(definition)

    @functools.wraps(made)
    def accept(*args: Any, **kwargs: Any) -> st.SearchStrategy:
        strategy = made(*args, **kwargs)
        strategy.definition_call = (definition, args, kwargs)  # type: ignore[attr-defined]
        return strategy

    return accept


class RandomDraw:
    """A ``draw`` for the strategies of this module driven by ``random.Random(seed)``: no
    engine, no choice sequence, no shrinking — a few microseconds per draw where hypothesis'
    engine takes milliseconds per example. The same seed gives the same values on every run
    and machine (a string seed is hashed with SHA-512). Each choice is uniform over its
    options; a strategy not made by this module raises TypeError."""

    def __init__(self, seed: int | str) -> None:
        self.random = random.Random(seed)

    def __call__(self, strategy: st.SearchStrategy) -> Any:
        call = getattr(strategy, "definition_call", None)
        if call is not None:
            definition, args, kwargs = call
            return definition(self, *args, **kwargs)
        spec = _PRIMITIVES.get(id(strategy))
        if spec is None:
            raise TypeError(f"RandomDraw draws only neuron_sim.verify.strategies' own strategies, not "
                            f"{strategy!r}")
        kind, *params = spec
        if kind == "sampled":
            return params[0][self.random.randrange(len(params[0]))]
        if kind == "integers":
            return self.random.randint(params[0], params[1])
        order = list(range(params[0]))
        self.random.shuffle(order)
        return order


def draw_example(strategy: st.SearchStrategy, seed: int | str) -> Any:
    """One value of ``strategy`` (one of this module's) drawn by ``RandomDraw(seed)``."""
    return RandomDraw(seed)(strategy)


def sampled(options: Sequence[Any]) -> st.SearchStrategy:
    """``sampled_from(options)`` of hashable options, made once per distinct list: building
    and validating a strategy per draw is what makes generation slow."""
    return _sampled(tuple(options))


@functools.lru_cache(maxsize=None)
def _sampled(options: tuple) -> st.SearchStrategy:
    return _primitive(st.sampled_from(options), "sampled", options)


@functools.lru_cache(maxsize=None)
def _integers(low: int, high: int) -> st.SearchStrategy:
    return _primitive(st.integers(min_value=low, max_value=high), "integers", low, high)


@functools.lru_cache(maxsize=None)
def _permutation(n: int) -> st.SearchStrategy:
    return _primitive(st.permutations(range(n)), "permutation", n)


def _booleans() -> st.SearchStrategy:
    return sampled((False, True))


def _pick(draw: Draw, items: Sequence[Any]) -> Any:
    """One of ``items`` (not cached: instructions), shrinking towards the first."""
    return items[draw(_integers(0, len(items) - 1))]


def _value(draw: Draw, value: Any) -> Any:
    """``value`` drawn if it is a strategy, else itself."""
    return draw(value) if isinstance(value, st.SearchStrategy) else value


# --------------------------------------------------------------------------------------------
# Topologies and groups.


def _factor_pairs(devices: int) -> list[tuple[int, int]]:
    return [(r, devices // r) for r in range(1, devices + 1) if devices % r == 0]


@composite
def topologies(draw: Draw, *, max_devices: Any = 8, devices: Any = None) -> Topology:
    """``Topology(R, P)`` with ``R * P == devices`` if given, else ``2 <= R * P <=
    max_devices`` (fewer devices shrink first), XLA's default device assignment."""
    count = _value(draw, devices)
    if count is None:
        limit = _value(draw, max_devices)
        count = draw(_integers(min(2, limit), limit))
    replicas, partitions = draw(sampled(_factor_pairs(count)))
    return Topology(replicas, partitions)


def id_space(topology: Topology, mode: str) -> int:
    """How many ids the groups of ``mode`` cover (docs/semantics.md §2)."""
    R, P = topology.replica_count, topology.num_partitions
    return {"cross_replica": R, "cross_partition": P, "cross_replica_and_partition": R,
            "flattened": R * P}[mode]


def participant_group_size(topology: Topology, mode: str,
                           groups: Sequence[Sequence[int]]) -> int:
    """The size of every participant group: what a gather or scatter splits by."""
    if not groups:
        return topology.num_devices if mode == "cross_replica_and_partition" else \
            id_space(topology, mode)
    width = len(groups[0])
    return width * topology.num_partitions if mode == "cross_replica_and_partition" else width


def layout_groups(layout: str, n: int, width: int,
                  order: Sequence[int] | None = None) -> tuple[tuple[int, ...], ...]:
    """The groups of ``layout`` over ids ``0..n-1`` with groups of ``width`` (``order``: the
    id permutation of the permuted layouts)."""
    ids = np.arange(n)
    if layout == "empty":
        return ()
    if layout == "singletons":
        return tuple((int(i),) for i in ids)
    if layout in ("one_sorted", "one_unsorted"):
        return (tuple(int(i) for i in (order if layout == "one_unsorted" else ids)),)
    if layout == "strided":
        return tuple(tuple(int(i) for i in row) for row in ids.reshape(width, n // width).T)
    source = np.asarray(order) if layout == "permuted" else ids
    return tuple(tuple(int(i) for i in row) for row in source.reshape(n // width, width))


@composite
def replica_groups(draw: Draw, topology: Any, mode: Any, *, layouts: Any = LAYOUTS,
                   allow_empty: bool = True) -> tuple[tuple[int, ...], ...]:
    """Groups valid for ``mode`` (a key of GROUP_MODES) on ``topology``: one sorted group, equal
    contiguous or strided groups, a permutation cut in equal groups, one unsorted group,
    singletons, or ``{}`` (not in flattened mode, nor with ``allow_empty=False``)."""
    topology, mode = _value(draw, topology), _value(draw, mode)
    n = id_space(topology, mode)
    choices = [layout for layout in _value(draw, layouts)
               if (layout != "empty" or (allow_empty and mode != "flattened"))]
    layout = draw(sampled(choices))
    widths = [w for w in range(2, n) if n % w == 0] or [n]
    width = draw(sampled(widths)) if layout in ("contiguous", "strided", "permuted") \
        else n
    order = draw(_permutation(n)) if layout in ("permuted", "one_unsorted") else None
    return layout_groups(layout, n, width, order)


def compact_forms(groups: Sequence[Sequence[int]]) -> list[ReplicaGroups]:
    """The iota and mesh spellings of ``groups`` where they have one (docs/semantics.md §2):
    contiguous groups ``[G,S]<=[n]`` and ``mesh['x'=G,'y'=S] {'y'}``, strided groups
    ``[G,S]<=[S,G]T(1,0)`` and ``mesh['x'=S,'y'=G] {'x'}`` (one sorted group is both)."""
    if not groups or len({len(g) for g in groups}) != 1:
        return []
    ids = np.asarray(groups)
    count, size = ids.shape
    n = count * size
    forms = []
    if np.array_equal(ids, np.arange(n).reshape(count, size)):
        forms += [IotaReplicaGroups(count, size, (n,)),
                  MeshReplicaGroups(("x", "y"), (count, size), (MeshAxisRef(1),))]
    elif np.array_equal(ids, np.arange(n).reshape(size, count).T):
        forms += [IotaReplicaGroups(count, size, (size, count), (1, 0)),
                  MeshReplicaGroups(("x", "y"), (size, count), (MeshAxisRef(0),))]
    made = []
    for form in forms:
        value = ReplicaGroups(iota=form) if isinstance(form, IotaReplicaGroups) else \
            ReplicaGroups(mesh=form)
        if value.groups == tuple(tuple(g) for g in groups):
            made.append(value)
    return made


def spelled_groups(draw: Draw, groups: Sequence[Sequence[int]]) -> ReplicaGroups:
    """``groups`` spelled explicitly, or in an iota or mesh form that expands to them (drawn;
    XLA prints iota groups, JAX 0.10's partitioner mesh groups)."""
    return draw(sampled([ReplicaGroups.explicit(tuple(tuple(g) for g in groups)),
                         *compact_forms(groups)]))


@composite
def permute_pairs(draw: Draw, topology: Topology, mode: str) -> tuple[tuple[int, int], ...]:
    """Source-target pairs over the ids of ``mode``: a ring shift, every id to itself (the
    identity), or a partial permutation."""
    n = id_space(topology, mode)
    kind = draw(sampled(("shift", "self", "partial")))
    if kind == "self":
        return tuple((i, i) for i in range(n))
    shift = draw(_integers(1, max(1, n - 1)))
    pairs = tuple((i, (i + shift) % n) for i in range(n))
    return pairs[:max(1, n // 2)] if kind == "partial" else pairs


# --------------------------------------------------------------------------------------------
# The program being built: a pool of values and the steps that add to it.


@dataclass
class _Program:
    """An entry computation under construction and the values steps may use."""

    module: ModuleBuilder
    entry: ComputationBuilder
    topology: Topology
    element_type: str
    values: list[HloInstruction] = field(default_factory=list)
    reducers: dict[tuple[str, str], HloComputation] = field(default_factory=dict)
    channel: int = 0

    def reducer(self, opcode: str = "add", element_type: str | None = None) -> HloComputation:
        et = element_type or self.element_type
        key = (opcode, et)
        if key not in self.reducers:
            b = self.module.computation(f"{opcode}_{et}")
            a, c = b.parameter(0, f"{et}[]", "a"), b.parameter(1, f"{et}[]", "b")
            self.reducers[key] = b.build(b.binary(Opcode.from_spelling(opcode), a, c, opcode))
        return self.reducers[key]

    def next_channel(self) -> int:
        self.channel += 1
        return self.channel

    def collective_attributes(self, mode: str) -> dict[str, Any]:
        channel_id, ugdi = GROUP_MODES[mode]
        attributes: dict[str, Any] = {}
        if channel_id is not None:
            attributes["channel_id"] = self.next_channel()
        if ugdi:
            attributes["use_global_device_ids"] = True
        return attributes

    def add(self, inst: HloInstruction) -> HloInstruction:
        self.values.append(inst)
        return inst

    def size(self) -> int:
        return len(self.entry.computation.instructions)

    def finish(self) -> HloModule:
        """The module whose root is a tuple of every value nothing uses (one value: itself)."""
        unused = [v for v in self.values if not v.users]
        root = unused[0] if len(unused) == 1 else self.entry.tuple(unused, "result")
        return self.module.build(self.entry.build(root))


def _array(inst: HloInstruction) -> ArrayShape:
    return inst.shape


def _same_shape(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    peers = [v for v in program.values if v.shape.compatible(x.shape)]
    return _pick(draw, peers)


def _device_value(program: _Program, dims: tuple[int, ...], source: str) -> HloInstruction:
    """``broadcast(convert(partition-id or replica-id))`` shaped ``dims``: data that differs
    between devices."""
    b = program.entry
    ident = b.partition_id() if source == "partition" else b.replica_id()
    value = b.convert(ident, program.element_type)
    return b.broadcast(value, ArrayShape(ElementType.from_spelling(program.element_type), dims),
                       [])


BINARY = ("add", "multiply", "maximum", "subtract", "minimum")


def _elementwise(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    opcode = Opcode.from_spelling(draw(sampled(BINARY)))
    return program.entry.binary(opcode, x, _same_shape(draw, program, x))


def _unary(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    return program.entry.unary(Opcode.from_spelling(draw(sampled(("negate", "abs")))), x)


def _device_dependent(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    source = draw(sampled(("partition", "replica")))
    return program.entry.add(x, _device_value(program, _array(x).dims, source))


def _select(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    y = _same_shape(draw, program, x)
    b = program.entry
    return b.select(b.compare(x, y, draw(sampled(("LT", "GT", "EQ")))), x, y)


def _transpose(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    rank = _array(x).rank
    return program.entry.transpose(x, list(reversed(range(rank))))


def _reshape(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    dims = _array(x).dims
    target = (int(np.prod(dims)),) if len(dims) > 1 else (dims[0], 1)
    return program.entry.reshape(x, ArrayShape(_array(x).element_type, target))


def _slice(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    dims = _array(x).dims
    limits = [max(1, dims[0] // 2), *dims[1:]]
    return program.entry.slice(x, [0] * len(dims), limits)


def _concatenate(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    return program.entry.concatenate([x, _same_shape(draw, program, x)], 0)


def _reduce(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """A reduce over the last dimension broadcast back to ``x``'s shape."""
    shape = _array(x)
    b = program.entry
    opcode = draw(sampled(("add", "maximum")))
    init = b.constant(0, scalar(shape.element_type), "init")
    reduced = b.reduce([x], [init], [shape.rank - 1], program.reducer(opcode))
    return b.broadcast(reduced, shape, list(range(shape.rank - 1)))


def _dot(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction | None:
    """``x . y^T`` over the last dimension: ``[a, b] x [a, b] -> [a, a]``."""
    if _array(x).rank != 2:
        return None
    y = _same_shape(draw, program, x)
    last = _array(x).rank - 1
    return program.entry.dot(x, y, lhs_contracting_dims=[last], rhs_contracting_dims=[last])


def _branch(program: _Program, shape: ArrayShape, opcode: str, tag: str) -> HloComputation:
    b = program.module.computation(f"branch_{tag}")
    p = b.parameter(0, shape, "p")
    return b.build(b.binary(Opcode.from_spelling(opcode), p, p))


def _conditional(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """A pred conditional on ``partition-id < k``: a branch doubles, the other squares."""
    b = program.entry
    shape = _array(x)
    k = draw(_integers(0, program.topology.num_partitions))
    pred = b.compare(b.partition_id(), b.constant(k, "u32[]", "k"), "LT")
    tag = str(len(program.module.module.computations))
    return b.conditional(pred, x, x, _branch(program, shape, "add", tag + "t"),
                         _branch(program, shape, "multiply", tag + "f"))


def _indexed_conditional(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """JAX's ``lax.cond`` / ``lax.switch`` on a device-dependent index: an s32 branch index
    (``convert(partition-id < k)``, or ``clamp(0, partition-id, n - 1)`` over ``n`` branches)
    selecting among ``branch_computations`` (double, square, negate-add)."""
    b = program.entry
    shape = _array(x)
    tag = str(len(program.module.module.computations))
    count = draw(sampled((2, 3)))
    if count == 2:
        k = draw(_integers(0, program.topology.num_partitions))
        index = b.convert(b.compare(b.partition_id(), b.constant(k, "u32[]", "k"), "LT"), "s32")
    else:
        index = b.instruction(Opcode.CLAMP, [b.constant(0, "s32[]", "first"),
                                             b.convert(b.partition_id(), "s32"),
                                             b.constant(count - 1, "s32[]", "last")])
    branches = [_branch(program, shape, opcode, f"{tag}_{i}")
                for i, opcode in enumerate(("add", "multiply", "subtract")[:count])]
    return b.instruction(Opcode.CONDITIONAL, [index, *([x] * count)],
                         branch_computations=tuple(branches))


def _call(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    tag = str(len(program.module.module.computations))
    return program.entry.call(_branch(program, _array(x), "add", tag), [x])


def _while(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """``for i in range(trips): x = x + x`` as a while over ``(s32[] i, x)``."""
    b, m = program.entry, program.module
    shape = _array(x)
    trips = draw(_integers(0, 3))
    state = f"(s32[], {shape})"
    tag = str(len(m.module.computations))
    cond = m.computation(f"cond_{tag}")
    s = cond.parameter(0, state, "s")
    cond.build(cond.compare(cond.get_tuple_element(s, 0), cond.constant(trips, "s32[]", "n"),
                            "LT"))
    body = m.computation(f"body_{tag}")
    s = body.parameter(0, state, "s")
    i, v = body.get_tuple_element(s, 0), body.get_tuple_element(s, 1)
    body.build(body.tuple([body.add(i, body.constant(1, "s32[]", "one")), body.add(v, v)]))
    loop = b.while_loop(b.tuple([b.constant(0, "s32[]", "zero"), x]), cond.computation,
                        body.computation)
    return b.get_tuple_element(loop, 1)


def _collective(opcode: str) -> Callable[[Draw, _Program, HloInstruction], HloInstruction | None]:
    def step(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction | None:
        return add_collective(draw, program, x, opcode)
    return step


def add_collective(draw: Draw, program: _Program, x: HloInstruction,
                   opcode: str) -> HloInstruction | None:
    """``opcode`` on ``x`` with groups drawn for a drawn group mode; None where no group mode
    fits ``x``'s leading dimension (a scatter or all-to-all splits it)."""
    b, topology = program.entry, program.topology
    if opcode == "collective-permute":
        mode = draw(sampled(ROUTING_MODES))
        attributes = program.collective_attributes(mode)
        return b.collective_permute(x, source_target_pairs=draw(permute_pairs(topology, mode)),
                                    **attributes)
    modes = ROUTING_MODES if opcode == "all-to-all" else REDUCING_MODES
    mode = draw(sampled(modes))
    groups = draw(replica_groups(topology, mode))
    n = participant_group_size(topology, mode, groups)
    rows = _array(x).dims[0] if _array(x).rank else 0
    if opcode in ("reduce-scatter", "all-to-all") and (not rows or rows % n):
        return None
    if opcode == "all-gather" and not rows:
        return None
    attributes = dict(program.collective_attributes(mode),
                      replica_groups=spelled_groups(draw, groups))
    if opcode == "all-reduce":
        return b.all_reduce(x, to_apply=program.reducer(
            draw(sampled(("add", "maximum")))), **attributes)
    if opcode == "reduce-scatter":
        return b.reduce_scatter(x, dimension=0, to_apply=program.reducer("add"), **attributes)
    if opcode == "all-gather":
        return b.all_gather(x, dimension=0, **attributes)
    attributes.pop("use_global_device_ids", None)
    return b.all_to_all(x, dimension=0, **attributes)


# Step kinds, cheapest first; ``opcodes=`` selects among them by these names.
OPERATIONS: dict[str, Callable[[Draw, _Program, HloInstruction], HloInstruction | None]] = {
    "elementwise": _elementwise,
    "unary": _unary,
    "device-dependent": _device_dependent,
    "select": _select,
    "transpose": _transpose,
    "reshape": _reshape,
    "slice": _slice,
    "concatenate": _concatenate,
    "reduce": _reduce,
    "dot": _dot,
    "call": _call,
    "conditional": _conditional,
    "while": _while,
    **{opcode: _collective(opcode) for opcode in COLLECTIVE_OPCODES},
}
SHAPE_PRESERVING = ("elementwise", "unary", "device-dependent", "select", "reduce", "call",
                    "conditional", "while", "all-reduce", "collective-permute", "all-to-all")
MAX_ELEMENTS = 4096


def _grow(draw: Draw, program: _Program, operations: Sequence[str], steps: int,
          start: HloInstruction, max_instructions: int) -> HloInstruction:
    """Up to ``steps`` drawn operations, each on a drawn value (the first on ``start``), while
    the entry holds fewer than ``max_instructions``; the last value made."""
    current = start
    for index in range(steps):
        if program.size() >= max_instructions:
            break
        x = current if index == 0 else _pick(draw, [v for v in program.values
                                                     if _array(v).rank])
        name = draw(sampled(operations))
        made = OPERATIONS[name](draw, program, x)
        if made is None or _array(made).element_count > MAX_ELEMENTS:
            continue
        current = program.add(made)
    return current


def _begin(draw: Draw, topology: Any, dtypes: Any, name: str) -> _Program:
    topology = _value(draw, topology)
    element_type = draw(sampled(_value(draw, dtypes)))
    module = ModuleBuilder(name, replica_count=topology.replica_count,
                           num_partitions=topology.num_partitions)
    program = _Program(module, None, topology, element_type)  # type: ignore[arg-type]
    program.entry = module.computation("main")
    return program


@composite
def hlo_modules(draw: Draw, *, topology: Any = topologies(), opcodes: Any = None,
                dtypes: Any = ("f32", "s32"), max_instructions: Any = 16,
                collectives: Any = True) -> HloModule:
    """A random well-typed module on ``topology``: one or two parameters, then a drawn number of
    steps (``OPERATIONS``: elementwise, shape, reduce, dot, call / conditional / while, and with
    ``collectives`` every collective in every group mode), each applied to a drawn value; the
    root is a tuple of the values nothing uses. ``opcodes`` restricts the steps (names of
    ``OPERATIONS``); the entry holds at most about ``max_instructions`` instructions."""
    program = _begin(draw, topology, dtypes, "fuzz")
    limit = _value(draw, max_instructions)
    allowed = list(_value(draw, opcodes) or OPERATIONS)
    if not _value(draw, collectives):
        allowed = [name for name in allowed if name not in COLLECTIVE_OPCODES]
    rows = draw(sampled((8, 4, 16)))
    cols = draw(sampled((2, 1, 3)))
    shape = f"{program.element_type}[{rows},{cols}]"
    first = program.add(program.entry.parameter(0, shape, "x"))
    if draw(_booleans()):
        program.add(program.entry.parameter(1, shape, "y"))
    steps = draw(_integers(1, max(1, limit)))
    _grow(draw, program, allowed, steps, first, limit)
    return program.finish()


# --------------------------------------------------------------------------------------------
# The idioms.


def _ar_ds(draw: Draw, program: _Program, x: HloInstruction, groups: Sequence[Sequence[int]],
           mode: str, slice_size: int, offset: Offset) -> HloInstruction:
    """``dynamic-slice(all-reduce(x), offset, 0)`` with ``slice_size`` rows; for a fused
    ``offset``, the dynamic-slice and the offset computation in a kLoop fusion whose parameters
    are the all-reduce, partition-id and replica-id, as XLA's compiler emits it."""
    b = program.entry
    attributes = dict(program.collective_attributes(mode),
                      replica_groups=spelled_groups(draw, groups))
    reduced = program.add(b.all_reduce(x, to_apply=program.reducer("add"), **attributes))
    sizes = [slice_size, _array(x).dims[1]]
    if not offset.fused:
        return _offset_slice(b, reduced, offset.build(b, {}), sizes)
    f = program.module.computation(f"fused_slice_{len(program.module.module.computations)}")
    operand = f.parameter(0, _array(x), "p0")
    ids = {"partition-id": f.parameter(1, "u32[]", "partition-id"),
           "replica-id": f.parameter(2, "u32[]", "replica-id")}
    fused = f.build(_offset_slice(f, operand, offset.build(f, ids), sizes))
    return b.fusion(fused, [reduced, b.partition_id(), b.replica_id()])


def _offset_slice(b: ComputationBuilder, x: HloInstruction, start: HloInstruction,
                  sizes: Sequence[int]) -> HloInstruction:
    zero = b.constant(0, scalar(start.shape.element_type), "zero")
    return b.dynamic_slice(x, [start, zero], sizes)


def _single_group(draw: Draw, program: _Program, mode: str, fused: bool = False) -> tuple:
    """One group over the mode's ids (sorted or not), offset ``pid * s``: the single-group
    matcher's form."""
    n = id_space(program.topology, mode)
    layout = draw(sampled(("one_sorted", "one_unsorted")))
    order = draw(_permutation(n)) if layout == "one_unsorted" else None
    groups = layout_groups(layout, n, n, order)
    slice_size = draw(sampled((1, 2)))
    index_type = draw(sampled(("u32", "s32")))
    return groups, slice_size, len(groups[0]) * slice_size, \
        offset_id_times(slice_size, index_type=index_type, fused=fused)


def _pool_groups(draw: Draw, program: _Program, mode: str, fused: bool = False) -> tuple:
    """Equal groups (contiguous, strided or permuted), offset ``s * POOL[pid]`` with one of the
    pools the multiple-groups matcher accepts: its form."""
    n = id_space(program.topology, mode)
    layout = draw(sampled(("contiguous", "strided", "permuted", "one_sorted")))
    widths = [w for w in range(2, n + 1) if n % w == 0 and (layout == "one_sorted") == (w == n)]
    width = draw(sampled(widths or [n]))
    order = draw(_permutation(n)) if layout == "permuted" else None
    groups = layout_groups(layout, n, width, order)
    slice_size = draw(sampled((1, 2)))
    pools = expected_pools(len(groups), width, slice_size)
    pool = pools[draw(sampled(sorted(pools, key=("repeated", "identity",
                                                         "multiplied").index)))]
    return groups, slice_size, width * slice_size, offset_pool(pool, slice_size, fused=fused)


def _other_offset(draw: Draw, program: _Program, mode: str, fused: bool = False) -> tuple:
    """Groups of any layout with the offset forms JAX and XLA emit (neither seed matcher's)."""
    topology = program.topology
    groups = draw(replica_groups(topology, mode, allow_empty=False,
                                 layouts=("one_sorted", "contiguous", "strided", "permuted")))
    width = len(groups[0])
    slice_size = draw(sampled((1, 2)))
    full = width * slice_size
    P = topology.num_partitions
    form = draw(sampled(("jax", "divmod", "flattened", "table", "constant")))
    if form == "jax":
        offset = offset_jax(slice_size, full, fused=fused)
    elif form == "divmod":
        offset = offset_divmod(slice_size, divisor=width, use_remainder=draw(_booleans()),
                                fused=fused)
    elif form == "flattened":
        offset = offset_flattened(slice_size, P, divisor=width, fused=fused)
    elif form == "table":
        positions = {device: i for group in groups for i, device in enumerate(group)}
        offset = offset_table([positions.get(p, 0) for p in range(P)], slice_size,
                              fused=fused)
    else:
        offset = offset_constant(draw(_integers(0, full - slice_size)), fused=fused)
    return groups, slice_size, full, offset


AR_DS_FORMS = {"ar_ds_single": _single_group, "ar_ds_pool": _pool_groups,
               "ar_ds_other": _other_offset}
FUSED_FORMS = ("ar_ds_single", "ar_ds_pool", "ar_ds_other")


def _argmax_comparator(program: _Program) -> HloComputation:
    """JAX's argmax comparator over (value, s32 index) pairs (neuron_sim.hlo.arg_reducers)."""
    et = program.element_type
    b = program.module.computation(f"argmax_{len(program.module.module.computations)}")
    params = {name: b.parameter(i, f"{t}[]", name) for i, (name, t) in
              enumerate((("va", et), ("ia", "s32"), ("vb", et), ("ib", "s32")))}
    nan_check = ["%nan = pred[] compare(%va, %va), direction=NE",
                 "%pick = pred[] or(%gt, %nan)"] if et.startswith("f") else \
        ["%pick = pred[] or(%gt, %gt)"]
    lines = ["%gt = pred[] compare(%va, %vb), direction=GT", *nan_check,
             f"%value = {et}[] select(%pick, %va, %vb)",
             "%eq = pred[] compare(%va, %vb), direction=EQ",
             "%lower = pred[] compare(%ia, %ib), direction=LT",
             "%tie = pred[] and(%eq, %lower)",
             "%keep = pred[] or(%pick, %tie)",
             "%index = s32[] select(%keep, %ia, %ib)",
             "%pair = (" + et + "[], s32[]) tuple(%value, %index)"]
    added = b.instructions_from_text(lines, params)
    return b.build(added["pair"])


def _argmax(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """JAX's argmax over the last dimension: a variadic reduce of (x, iota)."""
    b = program.entry
    shape = _array(x)
    last = shape.rank - 1
    indices = b.iota(ArrayShape(ElementType.S32, shape.dims), last)
    lowest = -np.inf if program.element_type.startswith("f") else \
        int(np.iinfo(np.dtype(program.element_type.replace("s", "int"))).min)
    inits = [b.constant(lowest, scalar(shape.element_type), "lowest"),
             b.constant(0, "s32[]", "zero_index")]
    pair = b.reduce([x, indices], inits, [last], _argmax_comparator(program))
    index = b.get_tuple_element(pair, 1)
    return b.broadcast(b.convert(index, program.element_type), shape, list(range(last)))


def _minus_inf_mask(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """``where(x > 0, x, -inf)`` then a max-reduce broadcast back (a masked softmax's start)."""
    b = program.entry
    shape = _array(x)
    fill = b.broadcast(b.constant(-np.inf, scalar(shape.element_type), "minus_inf"), shape, [])
    positive = b.compare(x, b.broadcast(b.constant(0, scalar(shape.element_type), "zero"),
                                        shape, []), "GT")
    masked = b.select(positive, x, fill)
    consumer = draw(sampled(("select", "maximum")))
    if consumer == "maximum":
        return b.maximum(masked, x)
    return masked


def _collective_pair(draw: Draw, program: _Program, x: HloInstruction) -> HloInstruction:
    """An all-reduce or collective-permute that is the identity (singleton groups, self pairs)
    or real: what DeletePermute and StripTrivialCollectives decide between."""
    b, topology = program.entry, program.topology
    opcode = draw(sampled(("all-reduce", "collective-permute")))
    degenerate = draw(_booleans())
    if opcode == "collective-permute":
        mode = draw(sampled(ROUTING_MODES))
        n = id_space(topology, mode)
        pairs = tuple((i, i) for i in range(n)) if degenerate else draw(
            permute_pairs(topology, mode))
        return b.collective_permute(x, source_target_pairs=pairs,
                                    **program.collective_attributes(mode))
    mode = draw(sampled(REDUCING_MODES))
    groups = layout_groups("singletons", id_space(topology, mode), 1) if degenerate else \
        draw(replica_groups(topology, mode))
    return b.all_reduce(x, to_apply=program.reducer("add"),
                        replica_groups=spelled_groups(draw, groups),
                        **program.collective_attributes(mode))


# Idiom kinds, in shrinking order, and how often each is drawn: the two forms the seed fold
# matchers accept are drawn most (most idioms should make a fold pass fire).
IDIOM_KINDS = ("ar_ds_single", "ar_ds_pool", "collective", "ar_ds_other", "ar_ds_fused",
               "conditional", "indexed_conditional", "argmax", "minus_inf_mask")
IDIOM_WEIGHTS = {"ar_ds_single": 8, "ar_ds_pool": 8}
IDIOM_STEPS = {"collective": _collective_pair, "conditional": _conditional,
               "indexed_conditional": _indexed_conditional, "argmax": _argmax,
               "minus_inf_mask": _minus_inf_mask}


@composite
def collective_idioms(draw: Draw, *, topology: Any = topologies(), kinds: Any = IDIOM_KINDS,
                      dtypes: Any = ("s32", "f32"), surrounding: Any = 3) -> HloModule:
    """A module holding one idiom a seed pass looks for, in random surrounding code (up to
    ``surrounding`` shape-preserving steps before it and after it): all-reduce + dynamic-slice
    with the single-group, pool and other offset forms in every reducing group mode (sorted,
    unsorted, contiguous and strided groups, spelled explicitly or in iota or mesh form), also
    fused as XLA emits it (the dynamic-slice in a kLoop fusion whose parameter is the
    all-reduce), degenerate and real all-reduces and collective-permutes, a pred conditional
    and an s32-indexed one (JAX's lax.cond / lax.switch), JAX's variadic argmax reduce, a -inf
    mask (f32 modules)."""
    kind = draw(sampled([name for name in _value(draw, kinds)
                                 for _ in range(IDIOM_WEIGHTS.get(name, 1))]))
    program = _begin(draw, topology, ("f32",) if kind == "minus_inf_mask" else dtypes,
                     kind)
    around = _value(draw, surrounding)
    before = draw(_integers(0, around))
    after = draw(_integers(0, around))
    if kind in AR_DS_FORMS or kind == "ar_ds_fused":
        # A mode over one id (cross-replica on 1 x P) slices nothing: the matchers' check 3.
        mode = draw(sampled([m for m in REDUCING_MODES
                             if id_space(program.topology, m) > 1] or REDUCING_MODES))
        form = draw(sampled(FUSED_FORMS)) if kind == "ar_ds_fused" else kind
        groups, slice_size, full, offset = AR_DS_FORMS[form](draw, program, mode,
                                                             fused=kind == "ar_ds_fused")
        cols = draw(sampled((1, 2)))
        x = program.add(program.entry.parameter(0, f"{program.element_type}[{full},{cols}]",
                                                "x"))
        x = _grow(draw, program, SHAPE_PRESERVING[:4], before, x, 64)
        made = _ar_ds(draw, program, x, groups, mode, slice_size, offset)
    else:
        rows = draw(sampled((4, 8)))
        x = program.add(program.entry.parameter(0, f"{program.element_type}[{rows},2]", "x"))
        x = _grow(draw, program, SHAPE_PRESERVING[:4], before, x, 64)
        made = IDIOM_STEPS[kind](draw, program, x)
    made = program.add(made)
    _grow(draw, program, SHAPE_PRESERVING[:4], after, made, 64)
    return program.finish()


# --------------------------------------------------------------------------------------------
# Inputs.


@composite
def module_inputs(draw: Draw, module: Any, topology: Any = None, *,
                  styles: Any = None) -> list[InputValue]:
    """One input set for ``module``'s entry parameters on ``topology`` (default: the module
    header's), drawn as the verifier draws them (neuron_sim.verify.inputs: distinct per device, ties,
    -0, NaN and infinities where the dtype has them), from a drawn seed and trial style."""
    module = _value(draw, module)
    topology = _value(draw, topology) or Topology(module.replica_count, module.num_partitions)
    seed = draw(_integers(0, 2 ** 16))
    trial = draw(_integers(0, 7)) if styles is None else \
        draw(sampled(_value(draw, styles)))
    return generate_inputs(module, topology, seed=seed, trial=trial)
