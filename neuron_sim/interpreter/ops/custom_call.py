"""Custom-calls: the targets XLA:CPU itself emits for ordinary JAX programs, with XLA's semantics.

A custom-call is opaque to HLO; only its target says what it computes. The interpreter runs the
targets in ``TARGETS`` and refuses every other one with ``Unimplemented`` naming the target, so
the verifier reports ``ERROR: Unsupported`` rather than guessing. ``KNOWN_TARGETS`` are targets
users meet in JAX dumps that are deliberately not run (the SPMD partitioner's markers of lowered,
unpartitioned modules): their message says why.

- ``TopK`` (what ``lax.top_k`` compiles to on XLA:CPU, from TopkRewriter): one f32 operand of
  rank 1 or 2, result ``(f32[..., k], s32[..., k])`` with k the result's last dimension. The
  comparator in ``called_computations`` is not called: XLA:CPU's runtime
  (``__xla_cpu_runtime_TopKF32``) orders by the float's total order, descending, equal bit
  patterns by the smaller index, and so does this implementation.
"""

from __future__ import annotations

from typing import Callable


from neuron_sim.hlo import ElementType, Opcode
from neuron_sim.hlo.shapes import ArrayShape, TupleShape

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented
from neuron_sim.interpreter.ops.reduce import top_k
from neuron_sim.interpreter.ops.registry import implements
from neuron_sim.interpreter.values import PerDevice, Replicated, TupleValue, Value, batched, from_batched


def _top_k_target(ctx, *operands: Value) -> Value:
    if len(operands) != 1 or not isinstance(operands[0], (Replicated, PerDevice)):
        raise InterpreterError("the TopK custom-call takes one array operand")
    x = batched(operands[0])
    shape = ctx.inst.shape
    if not (isinstance(shape, TupleShape) and len(shape.elements) == 2
            and all(isinstance(e, ArrayShape) and e.rank for e in shape.elements)):
        raise InterpreterError("the TopK custom-call returns (values, indices), two arrays")
    values_shape, indices_shape = shape.elements
    if values_shape.element_type is not ElementType.F32 or \
            indices_shape.element_type is not ElementType.S32:
        raise Unimplemented("custom-call", "XLA:CPU's TopK runs on f32 values with s32 "
                            f"indices, not {values_shape} and {indices_shape}")
    operand_rank = x.ndim - 1
    if operand_rank not in (1, 2) or operand_rank != values_shape.rank:
        raise InterpreterError(f"the TopK custom-call takes a rank-1 or rank-2 operand of the "
                               f"result's rank, not f32{list(x.shape[1:])} for {values_shape}")
    k = values_shape.dims[-1]
    if k > x.shape[-1]:
        raise InterpreterError(f"the TopK custom-call asks for {k} elements of a dimension of "
                               f"{x.shape[-1]}")
    replicated = isinstance(operands[0], Replicated)
    return TupleValue([from_batched(a, replicated) for a in top_k(x, k, largest=True)])


TARGETS: dict[str, Callable[..., Value]] = {"TopK": _top_k_target}

KNOWN_TARGETS: dict[str, str] = {
    "Sharding": "a sharding annotation of a module before SPMD partitioning",
    "SPMDFullToShardShape": "a shard_map boundary of a module before SPMD partitioning",
    "SPMDShardToFullShape": "a shard_map boundary of a module before SPMD partitioning",
    "xla.sdy.GlobalToLocalShape": "a Shardy shard_map boundary before partitioning",
    "xla.sdy.LocalToGlobalShape": "a Shardy shard_map boundary before partitioning",
}


def unsupported_target_detail(target: str) -> str:
    """Why the interpreter does not run ``target`` (the detail of its Unimplemented error)."""
    reason = KNOWN_TARGETS.get(target)
    return (f"unsupported custom-call target: custom_call_target=\"{target}\""
            f"{' is ' + reason if reason else ''}; supported: {', '.join(sorted(TARGETS))}")


@implements(Opcode.CUSTOM_CALL, values=True)
def custom_call(ctx, *operands: Value) -> Value:
    """Run a supported target on the operand values, or refuse naming the target."""
    target = str(ctx.attr("custom_call_target", ""))
    run = TARGETS.get(target)
    if run is None:
        raise Unimplemented("custom-call", unsupported_target_detail(target))
    return run(ctx, *operands)
