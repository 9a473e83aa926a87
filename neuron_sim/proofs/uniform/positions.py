"""Element terms over symbolic positions: what one output element of a module is, for every
position at once, on one concrete device.

A data-movement program (the collective folds, DeletePermute, legalization, the
canonicalizers) computes every element of an output the same way: it reads some input
elements, at positions that are arithmetic in the output position and the device, and
combines them. ``PositionEvaluator`` computes that recipe — an *element term* — for a symbolic
output position (one z3 integer per dimension) on a concrete device, without ever holding an
array of the tensor's size. Its memory is the size of the recipe, not of the tensor.

Element terms are tuples:

- ``("read", param, leaf, device, index, type, dims)``: input element (``device`` None for a leaf
  declared replicated, as the sampled inputs hold it);
- ``("const", bits, value, type)``: a concrete element (bits as bytes);
- ``("index", expr, type)``: an iota element (the position along its dimension);
- ``("op", opcode, attributes, type, operands, instruction)``: an elementwise op;
- ``("reduce", opcode, type, members)``: a reassociable reduction (a collective's sum over its
  group), a multiset of terms, as ``proofs/symbolic`` treats it;
- ``("cases", ((condition, term), ...))``: exhaustive cases over the position (concatenate,
  pad, dynamic-update-slice, all-gather, a device-dependent select of sources);
- ``("call", instruction, device, leaf, index, evaluator)``: the element of ``instruction`` on
  ``device`` at ``index``, by reference: its recipe is ``evaluator.body(...)``, the element
  term at the formal position ``formal{k}``. A collective reads its members' operands this
  way, so each (instruction, device) recipe is built once however many positions read it;
- ``("dot", key, type, sizes, bound, lhs, rhs, instruction)``: a dot's element, the sum over
  its contracting positions of lhs x rhs, kept uninterpreted: ``bound`` are z3 integers (one
  per contracting dimension, in the listed order, ranging over ``sizes``) that stand for the
  contracting positions inside the ``lhs`` and ``rhs`` element terms;
- ``("fold", key, type, sizes, bound, operand, init, instruction)``: a reduce's element, the
  fold of its computation (``key``: one binary op of its two parameters) over the reduced
  dimensions, ``bound`` standing for the reduced positions in the operand's element term.

A bound variable is named by its nesting level, ``bound{L}_{k}``, where L is one more than the
deepest bound variable in the position the dot or reduce is asked at: the same computation at
the same position gets the same names in both modules (so unchanged dots compare structurally),
and a nested dot or reduce never captures an enclosing one's variable.

Values computed from constants, iota, replica-id and partition-id alone are run by the
ordinary interpreter first (small ones only), so device-dependent offsets are concrete numbers
on each device. Anything else raises ``PositionsUnsupported`` naming the instruction.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from neuron_sim.hlo import HloInstruction, HloModule, Opcode
from neuron_sim.hlo.replication import declared_replication, spmd_topology
from neuron_sim.hlo.shapes import TupleShape
from neuron_sim.interpreter.backends.local import LocalTransport
from neuron_sim.interpreter.evaluator import Evaluator, Frame
from neuron_sim.interpreter.values import PerDevice, Replicated, TupleValue
from neuron_sim.lazy import LazyModule
from neuron_sim.semantics.collectives.reading import read_collective
from neuron_sim.semantics.elementwise import definition_of, reduces_as_multiset
from neuron_sim.topology import Topology

z3 = LazyModule("z3")

__all__ = ["CONCRETE_LIMIT", "PositionEvaluator", "PositionsUnsupported", "Term", "bound_variable",
           "formals", "leaf_shape"]

Term = tuple
CONCRETE_LIMIT = 1 << 16  # elements x devices of a value the interpreter may compute concretely

_MOVE = {Opcode.RESHAPE, Opcode.TRANSPOSE, Opcode.BROADCAST, Opcode.SLICE, Opcode.COPY,
         Opcode.DYNAMIC_SLICE, Opcode.CONCATENATE, Opcode.PAD, Opcode.REVERSE,
         Opcode.DYNAMIC_UPDATE_SLICE}
_NOT_CONCRETE = {Opcode.PARAMETER, Opcode.RNG, Opcode.RNG_BIT_GENERATOR,
                 Opcode.RNG_GET_AND_UPDATE_STATE, Opcode.INFEED, Opcode.RECV, Opcode.RECV_DONE}
_IGNORED_ATTRS = {"metadata", "sharding", "frontend_attributes", "backend_config",
                  "statistics", "statistics_viz", "origin", "control-predecessors"}
# A dot's dimension numbers decide which elements meet; the element terms carry that.
_DOT_NUMBERS = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims",
                "rhs_contracting_dims"}


def _reduction(opcode: Opcode, spelling: str, members: list[Term]) -> Term:
    """A collective's reduction over its group's members; over one member it is that member
    (a collective of one participant returns its operand: no initial value is combined)."""
    if len(members) == 1:
        return members[0]
    return ("reduce", opcode, spelling, tuple(members))


class PositionsUnsupported(Exception):
    """The rewrite is not index-uniform where the proof looked: ``reason`` names the
    instruction and the construct."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_elementwise(opcode: Opcode) -> bool:
    try:
        definition_of(opcode)
    except Exception:  # noqa: BLE001 - not an elementwise op
        return False
    return True


def _attributes(inst: HloInstruction, also_ignored: frozenset[str] = frozenset()) -> str:
    """The attributes that decide what an op computes, as comparable text."""
    return repr(sorted((k, repr(v)) for k, v in inst.attrs.items()
                       if k not in _IGNORED_ATTRS and k not in also_ignored))


def formals(rank: int) -> list[Any]:
    """The formal position of a called value (``call`` terms): one z3 integer per
    dimension."""
    return [z3.Int(f"formal{k}") for k in range(rank)]


def leaf_shape(shape: Any, leaf: tuple[int, ...]) -> Any:
    """The array shape of ``shape``'s leaf ``leaf``."""
    for k in leaf:
        shape = shape.elements[k]
    return shape


def bound_variable(level: int, k: int) -> Any:
    """The ``k``-th bound variable of nesting level ``level`` (module docstring)."""
    return z3.Int(f"bound{level}_{k}")


def _as_int(expr: Any) -> int | None:
    """The integer an index expression simplifies to, or None when it depends on the
    position."""
    simple = z3.simplify(expr)
    return simple.as_long() if z3.is_int_value(simple) else None


class PositionEvaluator:
    """Element terms of one module's values on a topology (module docstring)."""

    def __init__(self, module: HloModule, topology: Topology,
                 replicated: Sequence[Sequence[bool]] | None = None) -> None:
        self.module = module
        self.topology = topology
        self.devices = topology.num_devices
        spmd = spmd_topology(topology.replica_count, topology.num_partitions)
        self.replicated = list(replicated) if replicated is not None else \
            [declared_replication(p, spmd=spmd) for p in module.entry.parameters]
        self.concrete: dict[HloInstruction, Any] = {}
        self._evaluator = Evaluator(module, topology, LocalTransport(self.devices))
        self._memo: dict[tuple, Term] = {}
        self._simple: dict[int, tuple[Any, Any]] = {}  # id -> (expression kept alive, simplified)
        self._levels: dict[int, tuple[Any, int]] = {}  # id -> (expression, its binding level)
        self._compute_concrete()

    # -- values that depend on devices and constants only ------------------------------------
    def _compute_concrete(self) -> None:
        """Run the small instructions that read no parameter on every device (as the
        interpreter does), so offsets and tables are concrete per device."""
        frame = Frame(np.arange(self.devices, dtype=np.int64))
        data: set[HloInstruction] = set()
        with np.errstate(all="ignore"):
            for inst in self.module.entry.post_order():
                if inst.opcode in _NOT_CONCRETE or any(o in data for o in inst.operands) or \
                        not inst.shape.is_array or \
                        inst.shape.element_count * self.devices > CONCRETE_LIMIT:
                    data.add(inst)
                    continue
                try:
                    value = self._evaluator.execute(
                        inst, [self.concrete[o] for o in inst.operands], frame)
                except Exception:  # noqa: BLE001 - left to the symbolic path, which names it
                    data.add(inst)
                    continue
                if isinstance(value, (Replicated, PerDevice)):
                    self.concrete[inst] = value
                else:
                    data.add(inst)

    def concrete_on(self, inst: HloInstruction, device: int) -> np.ndarray:
        """A concrete value's array on ``device``."""
        value = self.concrete[inst]
        return value.array if isinstance(value, Replicated) else value.array[device]

    def scalar(self, inst: HloInstruction, device: int, why: str) -> int:
        """A scalar index operand's value on ``device``; PositionsUnsupported when it depends
        on the inputs."""
        if inst not in self.concrete:
            raise PositionsUnsupported(f"{why} of %{inst.name} depends on the inputs")
        return int(self.concrete_on(inst, device).reshape(-1)[0])

    # -- element terms -------------------------------------------------------------------------
    def element(self, inst: HloInstruction, device: int, index: Sequence[Any],
                leaf: tuple[int, ...] = ()) -> Term:
        """The element term of ``inst`` (its leaf ``leaf``) at ``index`` on ``device``."""
        simple = [self._simplified(i) for i in index]
        key = (id(inst), device, tuple(i.get_id() for i in simple), leaf)
        term = self._memo.get(key)
        if term is None:
            term = self._memo[key] = self._element(inst, device, simple, leaf)
        return term

    def call(self, inst: HloInstruction, device: int, index: Sequence[Any],
             leaf: tuple[int, ...] = ()) -> Term:
        """A reference to ``inst``'s element on ``device`` at ``index``, by the function it
        computes (``body``) rather than inlined: a collective reads its operand on every
        member of its group at positions shifted per member, and inlining those would multiply
        the distinct (instruction, position) pairs by the group size at every collective."""
        simple = tuple(self._simplified(i) for i in index)
        key = ("call", id(inst), device, tuple(i.get_id() for i in simple), leaf)
        term = self._memo.get(key)
        if term is None:
            term = self._memo[key] = ("call", inst, device, leaf, simple, self)
        return term

    def body(self, inst: HloInstruction, device: int, leaf: tuple[int, ...]) -> Term:
        """``inst``'s element term on ``device`` at its formal position (``formal{k}``)."""
        return self.element(inst, device, formals(leaf_shape(inst.shape, leaf).rank), leaf)

    def _simplified(self, expr: Any) -> Any:
        """``expr`` simplified by z3, once per distinct expression (a collective asks for the
        same index on every member of its group)."""
        if isinstance(expr, int):
            expr = z3.IntVal(expr)
        key = expr.get_id()
        found = self._simple.get(key)
        if found is None:
            found = self._simple[key] = (expr, z3.simplify(expr))
        return found[1]

    def _element(self, inst: HloInstruction, device: int, index: list[Any],
                 leaf: tuple[int, ...]) -> Term:
        opcode = inst.opcode
        if not leaf and inst in self.concrete:
            term = self._concrete_element(inst, device, index)
            if term is not None:
                return term
            if opcode is Opcode.CONSTANT:
                raise PositionsUnsupported(f"%{inst.name}: a constant table of "
                                           f"{inst.shape.element_count} elements read at a "
                                           "symbolic position")
            # A larger table computed from iota and constants: its recipe, built from its
            # operands like any other value (below).
        if opcode is Opcode.TUPLE:
            return self.element(inst.operands[leaf[0]], device, index, leaf[1:])
        if opcode is Opcode.GET_TUPLE_ELEMENT:
            return self.element(inst.operands[0], device, index, (int(inst.get("index")), *leaf))
        if opcode is Opcode.PARAMETER:
            return self._read(inst, device, index, leaf)
        if leaf and opcode not in (Opcode.ALL_REDUCE,):
            raise PositionsUnsupported(f"%{inst.name}: a tuple-shaped {opcode.spelling}")
        if opcode is Opcode.IOTA:
            return ("index", index[int(inst.get("iota_dimension"))],
                    inst.shape.element_type.spelling)
        if opcode in _MOVE:
            return self._move(inst, device, index)
        if opcode is Opcode.DOT:
            return self._dot(inst, device, index)
        if opcode is Opcode.REDUCE:
            return self._fold(inst, device, index)
        if opcode in (Opcode.ALL_REDUCE, Opcode.REDUCE_SCATTER, Opcode.ALL_GATHER,
                      Opcode.COLLECTIVE_PERMUTE):
            return self._collective(inst, device, index, leaf)
        if _is_elementwise(opcode):
            operands = []
            for operand in inst.operands:
                # Scalar operands of clamp / select broadcast; the others have the result's
                # shape.
                at = index if operand.shape.rank == len(index) else []
                operands.append(self.element(operand, device, at))
            return ("op", opcode, _attributes(inst), inst.shape.element_type.spelling,
                    tuple(operands), inst)
        raise PositionsUnsupported(f"%{inst.name}: {opcode.spelling} has no model on symbolic "
                                   "positions")

    def _concrete_element(self, inst: HloInstruction, device: int,
                          index: list[Any]) -> Term | None:
        """A concrete value's element: a constant when it is the same everywhere or the
        position is concrete, cases over a small table; None for a larger table."""
        array = np.ascontiguousarray(self.concrete_on(inst, device))
        flat = array.reshape(-1)
        spelling = inst.shape.element_type.spelling
        if flat.size and (flat.view(np.uint8).reshape(flat.size, -1) ==
                          flat[:1].view(np.uint8)).all():
            return ("const", flat[:1].tobytes(), flat[0], spelling)
        at = [_as_int(i) for i in index]
        if all(a is not None for a in at):
            value = array[tuple(at)]
            return ("const", np.asarray(value).tobytes(), value, spelling)
        if flat.size <= 64:  # a small table read at a symbolic position: one case per entry
            cases = []
            for position in np.ndindex(*array.shape):
                condition = z3.And(*[i == p for i, p in zip(index, position)])
                value = array[position]
                cases.append((condition, ("const", np.asarray(value).tobytes(), value, spelling)))
            return ("cases", tuple(cases))
        return None

    def _read(self, inst: HloInstruction, device: int, index: list[Any],
              leaf: tuple[int, ...]) -> Term:
        shape = inst.shape
        flat_leaf = 0
        if isinstance(shape, TupleShape):
            if len(leaf) != 1 or any(isinstance(s, TupleShape) for s in shape.elements):
                raise PositionsUnsupported(f"%{inst.name}: a nested tuple parameter")
            flat_leaf = leaf[0]
            shape = shape.elements[flat_leaf]
        if shape.is_token:
            raise PositionsUnsupported(f"%{inst.name}: a token parameter read as data")
        number = inst.parameter_number
        flags = self.replicated[number] if number < len(self.replicated) else ()
        replicated = flat_leaf < len(flags) and flags[flat_leaf]
        return ("read", inst.parameter_number, flat_leaf, None if replicated else device,
                tuple(index), shape.element_type.spelling, tuple(shape.dims))

    def _move(self, inst: HloInstruction, device: int, index: list[Any]) -> Term:
        opcode = inst.opcode
        operand = inst.operands[0]
        dims = list(inst.shape.dims)
        if opcode is Opcode.COPY:
            return self.element(operand, device, index)
        if opcode is Opcode.RESHAPE:
            linear = 0
            for i, size in zip(index, dims):
                linear = linear * size + i
            out = []
            for size in reversed(operand.shape.dims):
                out.append(linear % size)
                linear = linear / size
            return self.element(operand, device, out[::-1])
        if opcode is Opcode.TRANSPOSE:
            permutation = list(inst.dimensions)
            at: list[Any] = [0] * len(permutation)
            for k, p in enumerate(permutation):
                at[p] = index[k]
            return self.element(operand, device, at)
        if opcode is Opcode.BROADCAST:
            return self.element(operand, device, [index[d] for d in inst.dimensions])
        if opcode is Opcode.REVERSE:
            reversed_dims = set(inst.dimensions)
            return self.element(operand, device,
                                [dims[k] - 1 - i if k in reversed_dims else i
                                 for k, i in enumerate(index)])
        if opcode is Opcode.SLICE:
            return self.element(operand, device, [d.start + i * d.stride
                                                  for i, d in zip(index, inst.get("slice"))])
        if opcode is Opcode.DYNAMIC_SLICE:
            starts = self._starts(inst, device, inst.operands[1:], operand.shape.dims,
                                  list(inst.get("dynamic_slice_sizes")))
            return self.element(operand, device, [i + s for i, s in zip(index, starts)])
        if opcode is Opcode.DYNAMIC_UPDATE_SLICE:
            update = inst.operands[1]
            sizes = list(update.shape.dims)
            starts = self._starts(inst, device, inst.operands[2:], dims, sizes)
            inside = z3.And(*[z3.And(i >= s, i < s + z) for i, s, z in zip(index, starts, sizes)])
            return ("cases", ((inside, self.element(update, device,
                                                    [i - s for i, s in zip(index, starts)])),
                              (z3.Not(inside), self.element(operand, device, index))))
        if opcode is Opcode.CONCATENATE:
            (dim,) = inst.dimensions
            cases, offset = [], 0
            for part in inst.operands:
                size = part.shape.dims[dim]
                at = list(index)
                at[dim] = index[dim] - offset
                cases.append((z3.And(index[dim] >= offset, index[dim] < offset + size),
                              self.element(part, device, at)))
                offset += size
            return ("cases", tuple(cases))
        if opcode is Opcode.PAD:
            config = inst.get("padding")
            inside, at = [], []
            for i, d, size in zip(index, config, operand.shape.dims):
                step = d.interior + 1
                shifted = i - d.low
                at.append(shifted / step if step > 1 else shifted)
                inside.append(z3.And(shifted >= 0, shifted < (size - 1) * step + 1))
                if step > 1:
                    inside.append(shifted % step == 0)
            condition = z3.And(*inside)
            return ("cases", ((condition, self.element(operand, device, at)),
                              (z3.Not(condition), self.element(inst.operands[1], device, []))))
        raise PositionsUnsupported(f"%{inst.name}: {opcode.spelling}")

    def _starts(self, inst: HloInstruction, device: int, operands: Sequence[HloInstruction],
                full: Sequence[int], sizes: Sequence[int]) -> list[int]:
        """Clamped start indices on ``device`` (concrete: they decide the indexing)."""
        if len(operands) == 1 and operands[0].shape.rank == 1:
            if operands[0] not in self.concrete:
                raise PositionsUnsupported(f"%{inst.name}: a start index depends on the inputs")
            raw = [int(v) for v in self.concrete_on(operands[0], device)]
        else:
            raw = [self.scalar(o, device, "a start index") for o in operands]
        return [min(max(s, 0), f - z) for s, f, z in zip(raw, full, sizes)]

    # -- dot and reduce: uninterpreted sums over bound positions ------------------------------
    def _level(self, index: Sequence[Any]) -> int:
        """One more than the deepest bound variable in ``index`` (0 when there is none)."""
        def level(expr: Any) -> int:
            key = expr.get_id()
            found = self._levels.get(key)
            if found is not None:
                return found[1]
            if z3.is_const(expr) and expr.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                name = expr.decl().name()
                value = int(name[5:].split("_")[0]) + 1 if name.startswith("bound") else 0
            else:
                value = max((level(child) for child in expr.children()), default=0)
            self._levels[key] = (expr, value)
            return value
        return max((level(i) for i in index), default=0)

    def _dot(self, inst: HloInstruction, device: int, index: list[Any]) -> Term:
        if len(inst.operands) != 2:
            raise PositionsUnsupported(f"%{inst.name}: a sparse dot")
        lhs, rhs = inst.operands
        lhs_batch = list(inst.get("lhs_batch_dims") or ())
        rhs_batch = list(inst.get("rhs_batch_dims") or ())
        lhs_contract = list(inst.get("lhs_contracting_dims") or ())
        rhs_contract = list(inst.get("rhs_contracting_dims") or ())
        level = self._level(index)
        bound = [bound_variable(level, k) for k in range(len(lhs_contract))]
        at_lhs: list[Any] = [None] * lhs.shape.rank
        at_rhs: list[Any] = [None] * rhs.shape.rank
        position = iter(index)
        for a, b in zip(lhs_batch, rhs_batch):
            at_lhs[a] = at_rhs[b] = next(position)
        for d in range(lhs.shape.rank):
            if d not in lhs_batch and d not in lhs_contract:
                at_lhs[d] = next(position)
        for d in range(rhs.shape.rank):
            if d not in rhs_batch and d not in rhs_contract:
                at_rhs[d] = next(position)
        for variable, a, b in zip(bound, lhs_contract, rhs_contract):
            at_lhs[a] = at_rhs[b] = variable
        sizes = tuple(lhs.shape.dims[d] for d in lhs_contract)
        return ("dot", _attributes(inst, frozenset(_DOT_NUMBERS)),
                inst.shape.element_type.spelling, sizes, tuple(bound),
                self.element(lhs, device, at_lhs), self.element(rhs, device, at_rhs), inst)

    def _fold_key(self, inst: HloInstruction) -> tuple:
        """What a reduce's computation is, when it is one binary op of its two parameters:
        (opcode, parameter order, the op's attributes)."""
        computation = inst.get("to_apply")
        root = computation.root
        params = list(computation.parameters)
        if len(params) != 2 or len(root.operands) != 2 or set(root.operands) != set(params) or \
                not _is_elementwise(root.opcode):
            raise PositionsUnsupported(f"%{inst.name}: its reduction computation is not one "
                                       "binary op of its two parameters")
        order = tuple(params.index(o) for o in root.operands)
        return (root.opcode.spelling, order, _attributes(root),
                root.shape.element_type.spelling)

    def _fold(self, inst: HloInstruction, device: int, index: list[Any]) -> Term:
        if len(inst.operands) != 2 or inst.shape.is_tuple:
            raise PositionsUnsupported(f"%{inst.name}: a variadic reduce")
        operand, init = inst.operands
        reduced = sorted(int(d) for d in inst.dimensions)
        level = self._level(index)
        bound = [bound_variable(level, k) for k in range(len(reduced))]
        position = iter(index)
        at = [bound[reduced.index(d)] if d in reduced else next(position)
              for d in range(operand.shape.rank)]
        sizes = tuple(operand.shape.dims[d] for d in reduced)
        return ("fold", self._fold_key(inst), inst.shape.element_type.spelling, sizes,
                tuple(bound), self.element(operand, device, at), self.element(init, device, []),
                inst)

    # -- collectives ---------------------------------------------------------------------------
    def _reducer(self, inst: HloInstruction) -> Opcode:
        computation = inst.get("to_apply")
        root = computation.root
        params = set(computation.parameters)
        if not reduces_as_multiset(root.opcode) or len(root.operands) != 2 or \
                set(root.operands) != params or len(params) != 2:
            raise PositionsUnsupported(f"%{inst.name}: its reduction computation is not one "
                                       "reassociable binary op")
        return root.opcode

    def _collective(self, inst: HloInstruction, device: int, index: list[Any],
                    leaf: tuple[int, ...]) -> Term:
        opcode = inst.opcode
        try:
            reading = read_collective(inst, self.topology)
        except ValueError as exc:
            raise PositionsUnsupported(f"%{inst.name}: {exc}") from exc
        spelling = inst.shape.element_type.spelling if not leaf else \
            inst.shape.elements[leaf[0]].element_type.spelling
        if opcode is Opcode.COLLECTIVE_PERMUTE:
            if len(inst.operands) != 1:
                raise PositionsUnsupported(f"%{inst.name}: an in-place collective-permute")
            senders = [s for s, t in reading.pairs if t == device]
            if not senders:
                zero = np.zeros((), inst.shape.element_type.numpy_dtype)
                return ("const", zero.tobytes(), zero, spelling)
            return self.call(inst.operands[0], senders[0], index)
        group = next((g for g in reading.groups if device in g), None)
        if group is None:
            raise PositionsUnsupported(f"%{inst.name}: device {device} is in no group")
        group = list(group)
        if opcode is Opcode.ALL_REDUCE:
            operand = inst.operands[leaf[0]] if leaf else inst.operands[0]
            if leaf and len(leaf) != 1:
                raise PositionsUnsupported(f"%{inst.name}: a nested tuple all-reduce")
            reducer = self._reducer(inst)
            return _reduction(reducer, spelling,
                              [self.call(operand, m, index) for m in group])
        if len(inst.operands) != 1:
            raise PositionsUnsupported(f"%{inst.name}: a tuple {opcode.spelling}")
        dim = reading.dim
        operand = inst.operands[0]
        if opcode is Opcode.REDUCE_SCATTER:
            reducer = self._reducer(inst)
            shard = inst.shape.dims[dim]
            at = list(index)
            at[dim] = index[dim] + group.index(device) * shard
            return _reduction(reducer, spelling, [self.call(operand, m, at) for m in group])
        # all-gather: block k of the result is member k's operand.
        shard = operand.shape.dims[dim]
        cases = []
        for k, member in enumerate(group):
            at = list(index)
            at[dim] = index[dim] - k * shard
            cases.append((z3.And(index[dim] >= k * shard, index[dim] < (k + 1) * shard),
                          self.call(operand, member, at)))
        return ("cases", tuple(cases))

    def output_leaves(self) -> list[tuple[tuple[int, ...], Any]]:
        """(leaf path, array shape) of the entry's result, flattened in order."""
        out: list[tuple[tuple[int, ...], Any]] = []

        def walk(shape: Any, path: tuple[int, ...]) -> None:
            if isinstance(shape, TupleShape):
                for i, element in enumerate(shape.elements):
                    walk(element, (*path, i))
            else:
                out.append((path, shape))

        walk(self.module.entry.root.shape, ())
        return out

    def output_element(self, device: int, path: tuple[int, ...], index: Sequence[Any]) -> Term:
        """The element term of the entry result's leaf ``path`` at ``index`` on ``device``."""
        root = self.module.entry.root
        while path and root.opcode is Opcode.TUPLE:
            root, path = root.operands[path[0]], path[1:]
        return self.element(root, device, index, path)
