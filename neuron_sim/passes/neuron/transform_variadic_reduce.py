"""TransformVariadicReduce (key ``aws_neuron_transform_variadic_reduce``).

Seed: hlo-misc-cleanup-sweep.txt §3.5. ``maxArgMax`` (@0x1f6c890) recognises, with nested
``match::AllOf`` patterns, a variadic reduce computing a max value and its arg-max index over a
2-tuple, and lowers it to ``MakeReduceHlo(kMax)`` for the value plus an iota / compare / select
chain for the index (``MakeCompareHlo``, ``MakeSelectHlo``, ``MakeBroadcastHlo`` and a
``LiteralUtil::MaxValue`` sentinel), re-tupled and put in place with ``ReplaceInstruction``.
The seed names the comparator's tie-break a GAP.

Our reading (seed status "our reading"). The comparators rewritten are exactly those
``neuron_sim.hlo.arg_reducers`` recognises — JAX's argmax / argmin (ties to the lower index, a
NaN wins) — the one recogniser the interpreter also runs them by. The checks, in order:

1. the reduce has two inputs and two inits and a tuple result;
2. its ``to_apply`` is a recognised argmax / argmin comparator;
3. it reduces one dimension, of size >= 1;
4. its index input is an iota along that dimension (or a broadcast of a 1-D iota to it), so
   index order is fold order: the first NaN in fold order is the NaN of smallest index;
5. its inits are the neutral pair: the value init the lowest (argmax: -inf, or the type's
   minimum for integers) or highest value, the index init the constant 0.

The rewrite, for argmax (argmin mirrors it)::

    m     = reduce(values, init_value), to_apply=maximum          # the seed's MakeReduceHlo
    hit   = compare(values, broadcast(m), EQ)  [or compare(values, values, NE) for floats]
    index = reduce(select(hit, indices, broadcast(MAX)), MAX), to_apply=minimum
    tuple(m, index)

so the index is the smallest index holding the maximum, or the first NaN's: the comparator's.

Known unsafety (kept, as the seed writes it): the value leaf is a plain reduce-max. Where the
maximum is a zero and zeros of both signs occur, the comparator keeps the sign of the *last*
zero in fold order, ``maximum`` gives +0 — a module that uses the value leaf differs there (the
verifier shows it); JAX's argmax uses only the index leaf. The pass also rewrites reduces
inside fusion computations (unlike XLA's OpExpanderPass), because XLA's compiled dumps hold the
idiom only inside fusions.
"""

from __future__ import annotations

import numpy as np

from neuron_sim.hlo.arg_reducers import ArgReducer, increases_along, recognise_arg_reducer
from neuron_sim.hlo.builder import ComputationBuilder, make_instruction
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal, LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape, TupleShape
from neuron_sim.passes.base import OpExpanderPass, SeedStatus

SEED = "hlo-misc-cleanup-sweep.txt §3.5 TransformVariadicReduce (maxArgMax)"


def _constant_value(inst: HloInstruction) -> float | int | None:
    if inst.opcode is not Opcode.CONSTANT or not isinstance(inst.shape, ArrayShape) \
            or inst.shape.rank:
        return None
    try:
        return np.asarray(inst.literal.value).item()
    except LiteralError:
        return None


def _neutral_value(et: ElementType, direction: str) -> float | int:
    """The value init that never wins: argmax's lowest value, argmin's highest."""
    if et.is_float:
        return -np.inf if direction == "max" else np.inf
    info = np.iinfo(et.numpy_dtype)
    return int(info.min) if direction == "max" else int(info.max)


def _scalar_computation(module: HloModule, name: str, opcode: Opcode,
                        et: ElementType) -> HloComputation:
    """``opcode(a, b)`` on two ``et`` scalars, added to ``module``."""
    builder = ComputationBuilder(name)
    a = builder.parameter(0, f"{et.spelling}[]", "lhs")
    b = builder.parameter(1, f"{et.spelling}[]", "rhs")
    return module.add_computation(builder.build(builder.binary(opcode, a, b)))


class TransformVariadicReduce(OpExpanderPass):
    """(max, argmax) / (min, argmin) variadic reduce -> reduce-max (min) + an index chain."""

    name = "aws_neuron_transform_variadic_reduce"
    seed_status = SeedStatus.OUR_READING
    seed = SEED
    summary = ("JAX's argmax/argmin variadic reduce -> reduce-max/min + compare/select + "
               "reduce-min of the indices; value leaf a plain max (signed zeros)")
    pipelines = {"neuron-closer": 66}
    seed_says = ("a variadic (max, argmax) reduce -> `MakeReduceHlo(kMax)` + an iota / compare / "
                 "select index chain with a `MaxValue` sentinel; tie-break a GAP")
    our_reading = ("only the comparators `neuron_sim.hlo.arg_reducers` recognises (JAX's argmax / "
                   "argmin: NaN wins, ties to the lower index); one reduced dim, iota indices, "
                   "neutral inits; index = reduce-min of `select(v == max or v != v, index, "
                   "MAX)`; also inside fusions")
    known_unsafety = ("the value leaf is a plain reduce-max: where the max is a zero and both "
                      "signs occur it is +0, the comparator keeps the last zero's sign (JAX's "
                      "argmax uses only the index)")

    def candidates(self, module: HloModule) -> list[HloInstruction]:
        return [inst for comp in module.post_order_computations()
                for inst in comp.post_order() if self.matches(inst)]

    def matches(self, inst: HloInstruction) -> bool:
        return self.reducer_of(inst) is not None

    @staticmethod
    def reducer_of(inst: HloInstruction) -> ArgReducer | None:
        """The recognised comparator of ``inst`` if every check of the docstring holds."""
        if inst.opcode is not Opcode.REDUCE or len(inst.operands) != 4 \
                or not isinstance(inst.shape, TupleShape):
            return None
        reducer = recognise_arg_reducer(inst.to_apply)
        if reducer is None:
            return None
        values, indices, init_value, init_index = inst.operands
        dims = tuple(inst.dimensions)
        if len(dims) != 1 or values.shape.dims[dims[0]] < 1:
            return None
        if not increases_along(indices, dims[0]):
            return None
        neutral = _neutral_value(values.shape.element_type, reducer.direction)
        if _constant_value(init_value) != neutral or _constant_value(init_index) != 0:
            return None
        return reducer

    def expand(self, inst: HloInstruction) -> HloInstruction:
        reducer = self.reducer_of(inst)
        comp = inst.parent
        module = comp.parent
        values, indices, init_value, _ = inst.operands
        (dim,) = inst.dimensions
        value_type = values.shape.element_type
        index_type = indices.shape.element_type
        kept = tuple(d for d in range(values.shape.rank) if d != dim)
        largest = reducer.direction == "max"
        extreme_op = Opcode.MAXIMUM if largest else Opcode.MINIMUM
        extreme_fn = _scalar_computation(module, f"{inst.name}.{reducer.direction}",
                                         extreme_op, value_type)
        min_fn = _scalar_computation(module, f"{inst.name}.min_index", Opcode.MINIMUM,
                                     index_type)

        def add(opcode: Opcode, operands, **attributes) -> HloInstruction:
            return comp.add_before(make_instruction(comp, opcode, operands, **attributes), inst)

        extreme = add(Opcode.REDUCE, (values, init_value), dimensions=(dim,),
                      to_apply=extreme_fn)
        spread = add(Opcode.BROADCAST, (extreme,), shape=values.shape,
                     dimensions=kept)
        hit = add(Opcode.COMPARE, (values, spread), direction="EQ")
        if reducer.nan_first:
            nan = add(Opcode.COMPARE, (values, values), direction="NE")
            hit = add(Opcode.OR, (hit, nan))
        sentinel_shape = ArrayShape(index_type, ())
        sentinel = add(Opcode.CONSTANT, (), shape=sentinel_shape, literal=Literal.from_array(
            sentinel_shape, np.iinfo(index_type.numpy_dtype).max))
        sentinels = add(Opcode.BROADCAST, (sentinel,), shape=indices.shape,
                        dimensions=())
        candidates = add(Opcode.SELECT, (hit, indices, sentinels))
        index = add(Opcode.REDUCE, (candidates, sentinel), dimensions=(dim,), to_apply=min_fn)
        return make_instruction(comp, Opcode.TUPLE, (extreme, index))
