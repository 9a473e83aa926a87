"""The interpreter run on symbols: every input element a variable, every result element a term.

``SymbolicEvaluator`` is the ordinary ``neuron_sim.interpreter.evaluator.Evaluator`` with one change: an
instruction with an input-dependent (``Symbolic``) operand is executed on term handles instead
of numbers. Everything computed only from constants, iota, replica-id and partition-id stays a
concrete per-device number (the ordinary op runs), so device-dependent offsets index exactly.

- data movement (reshape, transpose, broadcast, slice, concatenate, pad, copy, reverse, a bitcast
  that keeps the element type, gather / dynamic-slice / dynamic-update-slice / scatter with
  concrete indices) runs the interpreter's own op implementation on the int64 handle arrays:
  it moves handles and creates no term;
- an elementwise op builds application terms (``TermTable.intern``), select and clamp included
  (a predicate on data is a term like any other: it decides no indexing);
- reduce, dot, all-reduce and reduce-scatter by add / multiply / min / max / and / or / xor build
  multiset terms; the collectives (``neuron_sim.proofs.symbolic.collectives``) run through the
  same transport and data functions (``neuron_sim.semantics.collectives``) as numbers do, with a
  reducer (``SymbolicReduction``) that folds a group's positions into one multiset (the
  ``fold_positions`` seam of ``reductions``);
- an input-dependent value that would decide indexing or control flow (a start index, gather
  indices, a while condition, a conditional's selector, sort keys) raises
  ``SymbolicUnsupported`` naming the instruction.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from neuron_sim.hlo import ElementType, HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.opcodes import Category
from neuron_sim.hlo.shapes import ArrayShape, Shape, TupleShape
from neuron_sim.topology import Topology

from neuron_sim.interpreter.backends.local import LocalTransport
from neuron_sim.interpreter.errors import InterpreterError
from neuron_sim.interpreter.evaluator import Deadline, Evaluator, Frame, OpContext
from neuron_sim.interpreter.ops.reduce import binary_reducer
from neuron_sim.interpreter.ops.shape import from_physical, to_physical
from neuron_sim.proofs.symbolic.arg_reduce import arg_reduce_terms
from neuron_sim.proofs.symbolic.loops import LoopBound, unroll_while
from neuron_sim.proofs.symbolic.terms import NONE, TermTable
from neuron_sim.semantics.elementwise import is_commutative, reduces_as_multiset
from neuron_sim.interpreter.transport import collective_kind
from neuron_sim.proofs.symbolic.collectives import SymbolicReduction, symbolic_collective
from neuron_sim.proofs.symbolic.values import Symbolic, SymbolicUnsupported, has_symbolic
from neuron_sim.interpreter.values import TOKEN, PerDevice, Replicated, TupleValue, Value

__all__ = ["Symbolic", "SymbolicEvaluator", "SymbolicReduction", "SymbolicUnsupported"]


# Ops whose every operand is data that moves (handles in, handles out).
_MOVE_ALL = {Opcode.BROADCAST, Opcode.RESHAPE, Opcode.TRANSPOSE, Opcode.SLICE,
             Opcode.CONCATENATE, Opcode.REVERSE, Opcode.PAD, Opcode.COPY, Opcode.DOMAIN}
# Ops whose leading operands move and whose other operands are indices (must be concrete).
_MOVE_SOME = {Opcode.DYNAMIC_SLICE: 1, Opcode.DYNAMIC_UPDATE_SLICE: 2, Opcode.GATHER: 1}
# Value-level ops that pass values through without reading them.
_PASS_THROUGH = {Opcode.TUPLE, Opcode.GET_TUPLE_ELEMENT, Opcode.OPTIMIZATION_BARRIER,
                 Opcode.ADD_DEPENDENCY, Opcode.CALL, Opcode.FUSION, Opcode.ALL_REDUCE_DONE,
                 Opcode.ALL_GATHER_DONE, Opcode.COLLECTIVE_PERMUTE_DONE, Opcode.ASYNC_START,
                 Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE, Opcode.COPY_START, Opcode.COPY_DONE}
_IGNORED_ATTRS = {"metadata", "sharding", "frontend_attributes", "backend_config",
                  "statistics", "statistics_viz", "origin", "control-predecessors"}
_UNSUPPORTED_REASONS = {
    Opcode.SORT: "the sort order depends on the inputs",
    Opcode.TOPK: "the top-k order depends on the inputs",
    Opcode.WHILE: "the while condition depends on the inputs",
    Opcode.CONDITIONAL: "the conditional's branch depends on the inputs",
}


class SymbolicEvaluator(Evaluator):
    """Executes a module on every device with term handles for input-dependent values."""

    def __init__(self, module: HloModule, topology: Topology, table: TermTable | None = None,
                 deadline: Deadline | None = None) -> None:
        super().__init__(module, topology, LocalTransport(topology.num_devices),
                         deadline=deadline)
        self.table = table if table is not None else TermTable()
        self.loop_bounds: list[LoopBound] = []  # loops on data truncated by ``unroll_while``
        self._symbolic_calls = 0  # > 0 while an op applies a computation to handles
        self._symbolic_elementwise: dict[HloComputation, Callable[..., object]] = {}

    # -- inputs and outputs -----------------------------------------------------------------
    def arguments(self, tag: str, replicated: Sequence[Sequence[bool]]) -> list[Value]:
        """A fresh variable per (parameter leaf, device, element) of the entry computation; one
        per (leaf, element) where ``replicated[param][leaf]`` holds. ``tag`` names them."""
        devices = self.topology.flattened_ids
        values = []
        for param, flags in zip(self.module.entry.parameters, replicated):
            counter = iter(range(1 << 30))
            flag_iter = iter(flags)

            def build(shape: Shape, path: tuple[int, ...]) -> Value:
                if isinstance(shape, TupleShape):
                    return TupleValue([build(s, (*path, i)) for i, s in enumerate(shape.elements)])
                if shape.is_token:
                    next(counter)
                    return TOKEN
                leaf = next(counter)
                rep = next(flag_iter, False)
                name = f"{tag}{param.parameter_number}" + "".join(f".{i}" for i in path)
                handles = self.table.variables((name, str(shape.element_type), leaf),
                                               None if rep else devices, tuple(shape.dims))
                return Symbolic(handles, bool(rep))

            values.append(build(param.shape, ()))
        return values

    def handles_of(self, value: Value, dtype: np.dtype) -> np.ndarray:
        """A leaf as batched handles (a concrete value becomes constant terms)."""
        if isinstance(value, Symbolic):
            return value.batched
        if isinstance(value, Replicated):
            return self.table.constants(value.array)[None]
        if isinstance(value, PerDevice):
            return self.table.constants(value.array)
        raise SymbolicUnsupported(f"operand {value!r} is not an array")

    # -- dispatch ----------------------------------------------------------------------------
    def _execute(self, inst: HloInstruction, implementation, args: list[Value], frame: Frame
                 ) -> Value:
        if not any(has_symbolic(a) for a in args):
            return super()._execute(inst, implementation, args, frame)
        opcode = inst.opcode
        self.instructions_executed += 1
        ctx = OpContext(self, inst, frame)
        if opcode in _PASS_THROUGH and implementation is not None:
            return implementation.fn(ctx, *args)
        if opcode is Opcode.WHILE:
            return self._while(ctx, args[0])
        if opcode is Opcode.CONDITIONAL:
            return self._conditional(ctx, args)
        if opcode in _MOVE_ALL:
            return self._move(ctx, implementation, args, len(args))
        if opcode in (Opcode.DYNAMIC_SLICE, Opcode.DYNAMIC_UPDATE_SLICE) and \
                any(has_symbolic(a) for a in args[_MOVE_SOME[opcode]:]):
            return self._dynamic_on_data(ctx, implementation, args, _MOVE_SOME[opcode])
        if opcode is Opcode.GATHER and has_symbolic(args[1]):
            return self._opaque(ctx, args, "the gather indices depend on the inputs")
        if opcode in _MOVE_SOME:
            return self._move(ctx, implementation, args, _MOVE_SOME[opcode])
        if opcode is Opcode.SELECT and not has_symbolic(args[0]):
            return self._select(ctx, implementation, args)
        if opcode is Opcode.BITCAST:
            return self._bitcast(ctx, args[0])
        if opcode is Opcode.SCATTER:
            count = (len(args) - 1) // 2
            if has_symbolic(args[count]):
                return self._opaque(ctx, args, "the scatter indices depend on the inputs")
            return self._apply_with_combiner(ctx, implementation, args)
        if opcode is Opcode.MAP:
            return self._apply_with_combiner(ctx, implementation, args)
        if opcode is Opcode.REDUCE:
            return self._reduce(ctx, args)
        if opcode is Opcode.DOT:
            return self._dot(ctx, args)
        if collective_kind_or_none(inst) is not None:
            return self._collective(ctx, args)
        if opcode is Opcode.BITCAST_CONVERT and inst.shape.rank != inst.operand(0).shape.rank:
            return self._bitcast_convert(ctx, args[0])
        if opcode.is_elementwise and isinstance(inst.shape, ArrayShape):
            return self._apply(ctx, args)
        reason = _UNSUPPORTED_REASONS.get(
            opcode, f"{opcode.spelling} of an input-dependent value has no symbolic model")
        return self._opaque(ctx, args, reason)

    @staticmethod
    def _require_concrete(value: Value, reason: str) -> None:
        if has_symbolic(value):
            raise SymbolicUnsupported(reason)

    def _result(self, ctx: OpContext, batched: np.ndarray, replicated: bool) -> Symbolic:
        batched = np.asarray(batched)
        expected = tuple(ctx.inst.shape.dims)
        if batched.shape[1:] != expected:
            raise InterpreterError(f"internal error: symbolic op produced shape "
                                   f"{list(batched.shape[1:])}, the instruction's is {expected}")
        if replicated:
            return Symbolic(batched[0], True)
        if batched.shape[0] != ctx.n:
            batched = np.broadcast_to(batched, (ctx.n, *batched.shape[1:]))
        return Symbolic(batched, False)

    @staticmethod
    def _replicated(args: Sequence[Value]) -> bool:
        return all(a.replicated if isinstance(a, Symbolic) else not isinstance(a, PerDevice)
                   for a in args)

    # -- data movement ---------------------------------------------------------------------
    def _move(self, ctx: OpContext, implementation, args: list[Value], data: int) -> Symbolic:
        arrays = []
        for position, value in enumerate(args):
            if position < data:
                arrays.append(self.handles_of(value, np.int64))
            else:
                self._require_concrete(value, f"operand {position} of "
                                              f"{ctx.inst.opcode.spelling} (an index) depends "
                                              f"on the inputs")
                arrays.append(value.array[None] if isinstance(value, Replicated)
                              else value.array)
        return self._result(ctx, implementation.fn(ctx, *arrays), self._replicated(args))

    def _dynamic_on_data(self, ctx: OpContext, implementation, args: list[Value],
                         data: int) -> Symbolic:
        """A dynamic-slice / dynamic-update-slice whose start index depends on the inputs:
        a case split over the clamped start. For every combination of clamped starts c of
        the input-dependent dimensions the op runs on handles with starts c (the others as
        given), and the result is the chain ``select(clamp(s) == c and ..., result_c, ...)``
        — exact, since the clamped start is always one of the cases. Refused past
        ``MAX_START_CASES`` combinations or ``MAX_CASE_ELEMENTS`` handles."""
        inst = ctx.inst
        starts = args[data:]
        if len(starts) != inst.operand(0).shape.rank or \
                any(inst.operand(data + d).shape.rank != 0 for d in range(len(starts))):
            raise SymbolicUnsupported(f"a start index of {inst.opcode.spelling} depends on the "
                                      "inputs (in a rank-1 start operand)")
        full = inst.operand(0).shape.dims
        sizes = inst.get("dynamic_slice_sizes") if data == 1 else inst.operand(1).shape.dims
        symbolic = [d for d, v in enumerate(starts) if has_symbolic(v)]
        ranges = [range(max(full[d] - sizes[d], 0) + 1) for d in symbolic]
        cases = int(np.prod([len(r) for r in ranges], dtype=np.int64))
        if cases > MAX_START_CASES or cases * inst.shape.element_count > MAX_CASE_ELEMENTS:
            raise SymbolicUnsupported(f"a start index of {inst.opcode.spelling} depends on the "
                                      f"inputs and its {cases} possible starts are too many "
                                      "to split")
        moved = [self.handles_of(v, np.int64) for v in args[:data]]
        table = self.table
        tests = []
        for d in symbolic:
            et = inst.operand(data + d).shape.element_type
            clamp = table.operator(("apply", Opcode.CLAMP, et, (et, et, et), ()),
                                   commutative=False)
            bounds = table.constants(np.array([0, max(full[d] - sizes[d], 0)], et.numpy_dtype))
            pair = table.operator(("pair",))
            handles = self.handles_of(starts[d], np.int64)
            clamped = table.intern(clamp, bounds[0], table.intern(pair, handles, bounds[1]))
            equal = table.operator(("apply", Opcode.COMPARE, ElementType.PRED, (et, et),
                                    (("direction", repr("EQ")),)), commutative=False)
            tests.append([table.intern(equal, clamped,
                                       table.constants(np.array([c], et.numpy_dtype)))
                          for c in ranges[symbolic.index(d)]])
        both = table.operator(("apply", Opcode.AND, ElementType.PRED,
                               (ElementType.PRED, ElementType.PRED), ()), commutative=True)
        value: Value | None = None
        for combination in reversed(list(np.ndindex(*[len(r) for r in ranges]))):
            numbers = []
            for d, start in enumerate(starts):
                if d in symbolic:
                    c = ranges[symbolic.index(d)][combination[symbolic.index(d)]]
                    numbers.append(np.array([c], np.int64))
                else:
                    numbers.append(start.array[None] if isinstance(start, Replicated)
                                   else start.array)
            result = self._result(ctx, implementation.fn(ctx, *moved, *numbers),
                                  self._replicated(args[:data]))
            if value is None:
                value = result
                continue
            test = None
            for position, choice in enumerate(combination):
                term = tests[position][choice]
                test = term if test is None else table.intern(both, test, term)
            value = self._select_values(ctx, test, result, value, inst.shape)
        return value

    def _select(self, ctx: OpContext, implementation, args: list[Value]) -> Symbolic:
        """A select on a concrete predicate moves handles."""
        pred = args[0].array[None] if isinstance(args[0], Replicated) else args[0].array
        arrays = [self.handles_of(v, np.int64) for v in args[1:]]
        return self._result(ctx, implementation.fn(ctx, pred, *arrays), self._replicated(args))

    def _bitcast(self, ctx: OpContext, value: Value) -> Symbolic:
        operand_shape, result_shape = ctx.inst.operand(0).shape, ctx.inst.shape
        if operand_shape.element_type != result_shape.element_type:
            return self._apply(ctx, [value])
        moved = from_physical(to_physical(self.handles_of(value, np.int64), operand_shape),
                              result_shape)
        return self._result(ctx, moved, self._replicated([value]))

    # -- arithmetic ----------------------------------------------------------------------------
    def _operator(self, inst: HloInstruction) -> int:
        cache = self.cache.setdefault("symbolic-operators", {})
        op = cache.get(inst)
        if op is None:
            attrs = tuple(sorted((k, repr(v)) for k, v in inst.attrs.items()
                                 if k not in _IGNORED_ATTRS))
            signature = ("apply", inst.opcode, inst.shape.element_type,
                         tuple(o.shape.element_type for o in inst.operands), attrs)
            op = cache[inst] = self.table.operator(
                signature, commutative=is_commutative(inst.opcode) and len(inst.operands) == 2)
        return op

    def _apply(self, ctx: OpContext, args: list[Value]) -> Symbolic:
        arrays = ctx.unify(*np.broadcast_arrays(*(self.handles_of(a, np.int64) for a in args)))
        op = self._operator(ctx.inst)
        table = self.table
        if len(arrays) == 1:
            out = table.intern(op, arrays[0], np.full((), NONE, np.int64))
        elif len(arrays) == 2:
            out = table.intern(op, arrays[0], arrays[1])
        else:
            rest = arrays[-1]
            pair = table.operator(("pair",))
            for array in reversed(arrays[1:-1]):
                rest = table.intern(pair, array, rest)
            out = table.intern(op, arrays[0], rest)
        return self._result(ctx, out, self._replicated(args))

    def _bitcast_convert(self, ctx: OpContext, value: Value) -> Symbolic:
        """A bitcast-convert to a narrower type: output element j of a value is the term
        ``(op, value, j)``, the j-th part of its bits (a wider type would merge parts)."""
        inst = ctx.inst
        if inst.shape.rank != inst.operand(0).shape.rank + 1:
            raise SymbolicUnsupported("a bitcast-convert to a wider type of an input-dependent "
                                      "value has no symbolic model")
        x = self.handles_of(value, np.int64)
        parts = inst.shape.dims[-1]
        out = self.table.intern(self._operator(inst), x[..., None],
                                np.arange(parts, dtype=np.int64))
        return self._result(ctx, out, self._replicated([value]))

    def _reduction_of(self, computation: HloComputation, element_type: ElementType,
                      tag: str = "") -> SymbolicReduction | None:
        opcode = binary_reducer(computation)
        if opcode is None or not reduces_as_multiset(opcode):
            return None
        return SymbolicReduction(self.table, opcode, element_type, tag)

    def _reduce(self, ctx: OpContext, args: list[Value]) -> Symbolic:
        inst = ctx.inst
        if len(args) != 2:
            closed = self._arg_reduce(ctx, args) if len(args) == 4 else None
            if closed is not None:
                return closed
            return self._opaque(ctx, args, "a variadic reduce (argmax-like) of input-dependent "
                                           "values has no symbolic model")
        reduction = self._reduction_of(inst.get("to_apply"), inst.shape.element_type)
        if reduction is None:
            return self._opaque(ctx, args, "a reduce by a computation that is not add, "
                                           "multiply, min, max, and, or or xor of its "
                                           "parameters")
        x = self.handles_of(args[0], np.int64)
        init = self.handles_of(args[1], np.int64)
        dims = sorted(inst.dimensions)
        rank = x.ndim - 1
        kept = [d for d in range(rank) if d not in dims]
        kept_sizes = [x.shape[1 + d] for d in kept]
        reduced = int(np.prod([x.shape[1 + d] for d in dims], dtype=np.int64))
        rows = max(x.shape[0], init.shape[0])
        moved = np.broadcast_to(x, (rows, *x.shape[1:])).transpose(
            0, *(1 + d for d in kept), *(1 + d for d in dims)).reshape(rows, *kept_sizes, reduced)
        inits = np.broadcast_to(init.reshape(init.shape[0], *([1] * len(kept)), 1),
                                (rows, *kept_sizes, 1))
        out = self.table.multiset(reduction.op, np.concatenate([inits, moved], axis=-1))
        return self._result(ctx, out, self._replicated(args))

    def _arg_reduce(self, ctx: OpContext, args: list[Value]) -> Value | None:
        """A recognised argmax / argmin reduce as its closed form (``arg_reduce``), else None."""
        concrete = [None if has_symbolic(a) else np.asarray(a.array) for a in args[1:]]
        found = arg_reduce_terms(self.table, ctx.inst, self.handles_of(args[0], np.int64),
                                 concrete[0], (concrete[1], concrete[2]))
        if found is None:
            return None
        replicated = self._replicated(args)
        return TupleValue([self._leaf_result(shape, handles, replicated, ctx.n)
                           for shape, handles in zip(ctx.inst.shape.elements, found)])

    def _dot(self, ctx: OpContext, args: list[Value]) -> Symbolic:
        inst = ctx.inst
        if len(args) != 2:
            raise SymbolicUnsupported("a sparse dot has no symbolic model")
        lhs, rhs = (self.handles_of(a, np.int64) for a in args)
        attrs = inst.attrs
        lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
        lc = list(attrs.get("lhs_contracting_dims", ()))
        rc = list(attrs.get("rhs_contracting_dims", ()))
        lf = [d for d in range(lhs.ndim - 1) if d not in lb and d not in lc]
        rf = [d for d in range(rhs.ndim - 1) if d not in rb and d not in rc]
        rows = max(lhs.shape[0], rhs.shape[0])

        def arrange(x, batch, free, contract, free_first: bool):
            order = [*batch, *free, *contract]
            x = np.broadcast_to(x, (rows, *x.shape[1:])).transpose(0, *(1 + d for d in order))
            b = [x.shape[1 + i] for i in range(len(batch))]
            f = int(np.prod(x.shape[1 + len(batch):1 + len(batch) + len(free)], dtype=np.int64))
            k = int(np.prod(x.shape[1 + len(batch) + len(free):], dtype=np.int64))
            return x.reshape(rows, *b, f, k), [x.shape[1 + len(batch) + i]
                                                for i in range(len(free))]

        left, left_free = arrange(lhs, lb, lf, lc, True)
        right, right_free = arrange(rhs, rb, rf, rc, False)
        products = self.table.intern(
            self._operator(inst), left[..., :, None, :], right[..., None, :, :])
        op = self.table.multiset_operator((Opcode.ADD, inst.shape.element_type, "dot"))
        summed = self.table.multiset(op, products) if products.shape[-1] > 1 \
            else products[..., 0]
        batch_sizes = list(left.shape[1:-2])
        out = summed.reshape(rows, *batch_sizes, *left_free, *right_free)
        return self._result(ctx, out, self._replicated(args))

    # -- computations applied to handles ---------------------------------------------------------
    def elementwise(self, computation: HloComputation) -> Callable[..., object]:
        if not self._symbolic_calls:
            return super().elementwise(computation)
        fn = self._symbolic_elementwise.get(computation)
        if fn is None:
            fn = self._symbolic_elementwise[computation] = self._make_symbolic(computation)
        return fn

    def _make_symbolic(self, computation: HloComputation) -> Callable[..., object]:
        root = computation.root
        reduction = self._reduction_of(computation, root.shape.element_type) \
            if isinstance(root.shape, ArrayShape) else None
        if reduction is not None:
            return reduction

        def apply(*arrays: np.ndarray) -> object:
            arrays = [np.asarray(a) for a in arrays]
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
            size = int(np.prod(shape, dtype=np.int64))
            flat = [Symbolic(np.broadcast_to(a, shape).reshape(size), False) for a in arrays]
            result = self.evaluate(computation, flat, Frame(None, size))
            return self._unbatch(result, shape, size)

        return apply

    def _unbatch(self, value: Value, shape: tuple[int, ...], size: int) -> object:
        if isinstance(value, TupleValue):
            return tuple(self._unbatch(e, shape, size) for e in value.elements)
        handles = self.handles_of(value, np.int64)
        return np.broadcast_to(handles, (size, *handles.shape[1:])).reshape(shape)

    def _apply_with_combiner(self, ctx: OpContext, implementation, args: list[Value]
                             ) -> Value:
        count = (len(args) - 1) // 2 if ctx.inst.opcode is Opcode.SCATTER else len(args)
        arrays = []
        for position, value in enumerate(args):
            if ctx.inst.opcode is Opcode.SCATTER and position == count:
                arrays.append(value.array[None] if isinstance(value, Replicated)
                              else value.array)
            else:
                arrays.append(self.handles_of(value, np.int64))
        self._symbolic_calls += 1
        try:
            result = implementation.fn(ctx, *arrays)
        finally:
            self._symbolic_calls -= 1
        replicated = self._replicated(args)
        if isinstance(ctx.inst.shape, TupleShape):
            return TupleValue([self._leaf_result(s, r, replicated, ctx.n)
                               for s, r in zip(ctx.inst.shape.elements, result)])
        return self._result(ctx, result, replicated)

    @staticmethod
    def _leaf_result(shape: Shape, result: np.ndarray, replicated: bool, n: int) -> Symbolic:
        result = np.asarray(result)
        if replicated:
            return Symbolic(result[0], True)
        return Symbolic(np.broadcast_to(result, (n, *shape.dims)), False)

    # -- control flow ---------------------------------------------------------------------------
    def _decision(self, value: Value, reason: str) -> np.ndarray:
        """A concrete selector or condition, the same on every row (else unsupported)."""
        if has_symbolic(value):
            raise SymbolicUnsupported(reason)
        raw = value.array.reshape(-1) if isinstance(value, PerDevice) else \
            value.array.reshape(1)
        if raw.size and not (raw == raw[0]).all():
            raise SymbolicUnsupported(reason.replace("depends on the inputs",
                                                     "differs between devices"))
        return raw[0]

    def _while(self, ctx: OpContext, state: Value) -> Value:
        """Iterations run symbolically while the condition is concrete and the same on every
        row; from the first iteration where it depends on the inputs, the loop is unrolled to a
        bound (``loops.unroll_while``), or where it cannot be, the rest of the loop is one
        opaque term of the state reached (``_opaque``)."""
        condition, body = ctx.attr("condition"), ctx.attr("body")
        while True:
            decision = self.evaluate(condition, [state], ctx.frame)
            if has_symbolic(decision):
                unrolled = unroll_while(self, ctx, state, decision, _fingerprint,
                                        lambda c: _effect_in(c, device_ids=True))
                if unrolled is not None:
                    return unrolled
                return self._opaque(ctx, [state], "the while condition depends on the inputs")
            if not bool(self._decision(decision, "the while condition depends on the inputs")):
                return state
            state = self.evaluate(body, [state], ctx.frame)

    def _conditional(self, ctx: OpContext, args: list[Value]) -> Value:
        inst = ctx.inst
        indexed = inst.has("branch_computations")
        branches = list(inst.get("branch_computations")) if indexed else \
            [inst.get("true_computation"), inst.get("false_computation")]
        if has_symbolic(args[0]) or _divergent(args[0]):
            return self._conditional_on_data(ctx, branches, indexed, args)
        raw = self._decision(args[0], "the conditional's branch depends on the inputs")
        if not indexed:
            index = 0 if bool(raw) else 1
        else:
            signed = int(np.asarray(raw).astype(np.int64))
            index = signed if 0 <= signed < len(branches) else len(branches) - 1
        return self.evaluate(branches[index], [args[1 + index]], ctx.frame)

    def _conditional_on_data(self, ctx: OpContext, branches: list[HloComputation],
                             indexed: bool, args: list[Value]) -> Value:
        """A conditional whose selector depends on the inputs: every branch runs on its
        operand and the result is an if-then-else term per element — ``select(p, true, false)``
        for a pred selector, ``select(i == 0, b0, select(i == 1, b1, ... b(N-1)))`` for an
        index (out of range: the last branch, as XLA runs it). Only for branches without
        effects that running an untaken branch would change: collectives, rng, infeed /
        outfeed, send / recv and custom-calls are refused by name."""
        # A selector with the same handle on every device is the same value everywhere: every
        # device takes the same branch, so a collective in a branch meets all its peers there.
        handles = self.handles_of(args[0], np.int64) if has_symbolic(args[0]) else None
        uniform = handles is not None and ctx.frame.is_device_frame and \
            bool((handles.reshape(handles.shape[0], -1) == handles.reshape(
                handles.shape[0], -1)[:1]).all())
        for branch in branches:
            effect = _effect_in(branch, collectives=not uniform)
            if effect is not None:
                why = "depends on the inputs" if has_symbolic(args[0]) else \
                    "differs between devices"
                raise SymbolicUnsupported(f"the conditional's branch {why} and "
                                          f"branch {branch.name} has a {effect.opcode.spelling} "
                                          f"(%{effect.name}), which an untaken branch must "
                                          "not run")
        results = [self.evaluate(branch, [args[1 + k]], ctx.frame)
                   for k, branch in enumerate(branches)]
        if not has_symbolic(args[0]):  # concrete, different between devices: rows choose
            rows = args[0].array.reshape(-1)
            if indexed:
                signed = rows.astype(np.int64)
                index = np.where((signed < 0) | (signed >= len(branches)), len(branches) - 1,
                                 signed)
            else:
                index = np.where(rows.astype(bool), 0, 1)
            value = results[-1]
            for k in reversed(range(len(branches) - 1)):
                value = self._choose_rows(index == k, results[k], value, ctx.inst.shape)
            return value
        selector = self.handles_of(args[0], np.int64)
        selector_type = ctx.inst.operand(0).shape.element_type
        if not indexed:
            tests = [selector]
        else:
            compare = self.table.operator(
                ("apply", Opcode.COMPARE, ElementType.PRED, (selector_type, selector_type),
                 (("direction", repr("EQ")),)), commutative=False)
            tests = [self.table.intern(compare, selector,
                                       self.table.constants(np.array([k],
                                                                     selector_type.numpy_dtype)))
                     for k in range(len(branches) - 1)]
        value = results[-1]
        for k in reversed(range(len(tests))):
            value = self._select_values(ctx, tests[k], results[k], value, ctx.inst.shape)
        return value

    def _opaque(self, ctx: OpContext, args: Sequence[Value], why: str) -> Value:
        """``ctx.inst`` as one uninterpreted term per output element: an operator named by
        the instruction's name-free fingerprint (opcode, shapes, attributes, the computations
        it calls) applied to all its operand elements and the element's position. Equal
        handles then mean the same deterministic op on the same operand values — what an
        untouched sort, argmax, gather on data, reduce-window or loop on data is in source
        and target. z3 has no model of it: where such terms differ the proof stops with
        ``why`` (``all_inputs.prove``). Refused for ops whose effects reach beyond the
        device (a collective, rng, I/O or custom-call inside)."""
        inst = ctx.inst
        # rng-bit-generator is a function of its state operand (its algorithm is fixed):
        # unlike rng it draws nothing, so it is compared as a whole like any other op.
        if inst.opcode is Opcode.CUSTOM_CALL or (inst.opcode.category in _EFFECT_CATEGORIES
                                                 and inst.opcode is not Opcode.RNG_BIT_GENERATOR):
            raise SymbolicUnsupported(why)
        for computation in inst.called_computations:
            effect = _effect_in(computation, device_ids=True)
            if effect is not None:
                raise SymbolicUnsupported(f"{why}, and %{effect.name} ({effect.opcode.spelling})"
                                          " inside it makes it more than a function of its "
                                          "operands")
        arrays = []
        for value in args:
            for leaf in _leaves(value):
                if leaf is not TOKEN:
                    handles = self.handles_of(leaf, np.int64)
                    arrays.append(handles)
        rows = max((a.shape[0] for a in arrays), default=1)
        flat = np.concatenate([np.broadcast_to(a, (rows, *a.shape[1:])).reshape(rows, -1)
                               for a in arrays], axis=1) if arrays else \
            np.zeros((rows, 0), np.int64)
        if flat.shape[1] > MAX_OPAQUE_INPUTS:
            raise SymbolicUnsupported(f"{why} (its {flat.shape[1]} operand elements are too "
                                      "many to compare as a whole)")
        whole = self._whole(flat)
        replicated = rows == 1
        base = ("opaque", inst.opcode.spelling, _fingerprint(inst))
        shapes = inst.shape.elements if isinstance(inst.shape, TupleShape) else (inst.shape,)
        results: list[Value] = []
        for number, shape in enumerate(shapes):
            if isinstance(shape, TupleShape) or shape.is_token:
                raise SymbolicUnsupported(f"{why} (a nested tuple or token result)")
            op = self.table.operator((*base, number, str(shape)))
            dims = tuple(shape.dims)
            size = int(np.prod(dims, dtype=np.int64))
            positions = self.table.constants(np.arange(size, dtype=np.int64))
            out = self.table.intern(op, whole[:, None], positions[None, :])
            out = out.reshape(rows, *dims)
            results.append(Symbolic(out[0], True) if replicated else
                           Symbolic(np.broadcast_to(out, (ctx.n, *dims)) if rows != ctx.n
                                    else out, False))
        return TupleValue(results) if isinstance(inst.shape, TupleShape) else results[0]

    def _whole(self, flat: np.ndarray) -> np.ndarray:
        """One handle per row standing for the row's whole sequence of handles (a balanced
        tree of ordered pairs)."""
        pair = self.table.operator(("opaque-pair",))
        if flat.shape[1] == 0:
            return np.broadcast_to(self.table.constants(np.zeros(1, np.int64)),
                                   (flat.shape[0],)).copy()
        while flat.shape[1] > 1:
            even = flat.shape[1] // 2 * 2
            paired = self.table.intern(pair, flat[:, 0:even:2], flat[:, 1:even:2])
            flat = np.concatenate([paired, flat[:, even:]], axis=1)
        return flat[:, 0]

    def _choose_rows(self, chosen: np.ndarray, on_true: Value, on_false: Value,
                     shape: Shape) -> Value:
        """Per row (device), ``on_true`` where ``chosen`` else ``on_false``: handles move,
        no term is made."""
        if isinstance(shape, TupleShape):
            return TupleValue([self._choose_rows(chosen, a, b, s) for a, b, s in
                               zip(on_true.elements, on_false.elements, shape.elements)])
        if shape.is_token:
            return TOKEN
        a, b = self.handles_of(on_true, np.int64), self.handles_of(on_false, np.int64)
        dims = tuple(shape.dims)
        rows = chosen.shape[0]
        a, b = (np.broadcast_to(x, (rows, *dims)) for x in (a, b))
        return Symbolic(np.where(chosen.reshape(rows, *([1] * len(dims))), a, b), False)

    def _select_values(self, ctx: OpContext, test: np.ndarray, on_true: Value,
                       on_false: Value, shape: Shape) -> Value:
        """``select(test, on_true, on_false)`` leaf by leaf (``test``: batched scalar
        handles)."""
        if isinstance(shape, TupleShape):
            return TupleValue([self._select_values(ctx, test, a, b, s) for a, b, s in
                               zip(on_true.elements, on_false.elements, shape.elements)])
        if shape.is_token:
            return TOKEN
        et = shape.element_type
        select = self.table.operator(("apply", Opcode.SELECT, et, (ElementType.PRED, et, et),
                                      ()), commutative=False)
        pair = self.table.operator(("pair",))
        a, b = self.handles_of(on_true, np.int64), self.handles_of(on_false, np.int64)
        rows = max(a.shape[0], b.shape[0], test.shape[0])
        dims = tuple(shape.dims)
        a, b = (np.broadcast_to(x, (rows, *dims)) for x in (a, b))
        t = np.broadcast_to(test.reshape(test.shape[0], *([1] * len(dims))), (rows, *dims))
        out = self.table.intern(select, t, self.table.intern(pair, a, b))
        if rows == 1:
            return Symbolic(out[0], True)
        return Symbolic(out, False)

    # -- collectives -----------------------------------------------------------------------------
    def _collective(self, ctx: OpContext, args: list[Value]) -> Value:
        """The collective on handles (``neuron_sim.proofs.symbolic.collectives``)."""
        return symbolic_collective(self, ctx, args)


MAX_OPAQUE_INPUTS = 1 << 20    # operand elements an opaque term may stand for, per row


def _leaves(value: Value) -> list[Value]:
    if isinstance(value, TupleValue):
        return [leaf for element in value.elements for leaf in _leaves(element)]
    return [value]


_FINGERPRINTS: dict[int, tuple[HloComputation, str]] = {}


def _fingerprint(inst: HloInstruction) -> str:
    """The instruction without names: opcode, shape, attributes (called computations by
    their own fingerprints), literal."""
    parts = [inst.opcode.spelling, str(inst.shape)]
    for key, value in sorted(inst.attrs.items()):
        if key in _IGNORED_ATTRS:
            continue
        if isinstance(value, HloComputation):
            parts.append(f"{key}=<{_computation_fingerprint(value)}>")
        elif isinstance(value, tuple) and value and all(isinstance(v, HloComputation)
                                                        for v in value):
            parts.append(f"{key}=<" + "|".join(_computation_fingerprint(v) for v in value)
                         + ">")
        else:
            parts.append(f"{key}={value!r}")
    if inst.literal is not None:
        parts.append(f"literal={inst.literal}")
    if inst.parameter_number is not None:
        parts.append(f"parameter={inst.parameter_number}")
    return " ".join(parts)


def _computation_fingerprint(computation: HloComputation) -> str:
    cached = _FINGERPRINTS.get(id(computation))
    if cached is not None and cached[0] is computation:
        return cached[1]
    order = computation.post_order()
    number = {inst: i for i, inst in enumerate(order)}
    text = "; ".join(f"{number[i]}{'*' if i is computation.root else ''}={_fingerprint(i)}"
                     f"({','.join(str(number[o]) for o in i.operands)})" for i in order)
    _FINGERPRINTS[id(computation)] = (computation, text)
    return text


def _divergent(selector: Value) -> bool:
    """A concrete selector that is not the same on every device."""
    if not isinstance(selector, PerDevice):
        return False
    raw = selector.array.reshape(-1)
    return bool(raw.size) and not bool((raw == raw[0]).all())


MAX_START_CASES = 512          # clamped start combinations a data-dependent slice is split into
MAX_CASE_ELEMENTS = 1 << 20    # handles the split may create


_EFFECT_CATEGORIES = (Category.COLLECTIVE, Category.RANDOM, Category.IO, Category.ASYNC)


def _effect_in(computation: HloComputation, *, device_ids: bool = False,
               collectives: bool = True) -> HloInstruction | None:
    """The first instruction of ``computation`` (or one it calls) whose running is observable
    beyond its value: a collective (unless ``collectives`` is false), rng, I/O, async op or
    custom-call — with ``device_ids`` also replica-id and partition-id, which make it depend
    on the device (None if there is none)."""
    seen: set[int] = set()
    stack = [computation]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for inst in current.instructions:
            if inst.opcode.category is Category.COLLECTIVE and not collectives:
                pass
            elif inst.opcode.category in _EFFECT_CATEGORIES or \
                    inst.opcode is Opcode.CUSTOM_CALL or \
                    (device_ids and inst.opcode in (Opcode.REPLICA_ID, Opcode.PARTITION_ID)):
                return inst
            stack.extend(inst.called_computations)
    return None


def collective_kind_or_none(inst: HloInstruction) -> Opcode | None:
    """The transport kind of a collective instruction (None for other instructions)."""
    try:
        return collective_kind(inst)
    except ValueError:
        return None
