"""ReplaceMinimumConstant (key ``aws_neuron_replace_minimum_constant``): the -inf sentinel of a
min, clamp or mask fill becomes the dtype's lowest finite value.

Seed: hlo-misc-cleanup-sweep.txt §3.7 (Run @0x1f62990, gate ``shouldReplaceConstant``,
value ``hlo_utils::GetMinNonInfValue``, applied with CreateConstant + ReplaceInstruction), and
its CORRECTION (B32-4): the replaced instruction is the scalar constant operand of a
min / clamp / dynamic-update-slice, never the min op itself. The seed gives no more of
``shouldReplaceConstant`` than that, so the gate below is our reading (seed status
"our reading"):

* a **sentinel** is a rank-0 constant of a float type that has infinities whose value is -inf
  (``constant(-inf)``), used directly or through ``broadcast(constant(-inf))`` with
  ``dimensions={}`` — what JAX emits for ``jnp.full(..., -inf)`` and ``jnp.where(m, x, -inf)``;
* it is replaced where it is an operand of a **consumer**: ``minimum`` (either operand),
  ``clamp`` (any operand), ``dynamic-update-slice`` (the buffer or the update: a fill into a
  -inf buffer) and ``select`` (either branch: the mask fill of ``where``). The mask fill is the
  seed's word; reading it as select too is ours;
* ``GetMinNonInfValue`` is XLA's ``MinFiniteValue``: ``numeric_limits<T>::lowest()``
  (``-finfo.max``) for floats, ``numeric_limits<T>::min()`` for integers. For integers and for
  a constant that already is ``finfo.min`` (``jnp.finfo(x.dtype).min``) the value does not
  change, so nothing is rewritten (the seed's "lowest" sentinel is left as it is).

A sentinel used only by consumers is itself replaced (the seed's ReplaceInstruction). One that
also has other users — XLA's CSE shares one ``constant(-inf)`` between a ``where`` fill and a
``reduce``'s init value — keeps them: the consumers get a new constant (and broadcast), so a
reduce-max still starts from -inf. The walk covers every computation, fusion computations
included (the compiled forms keep the sentinel inside the fusion).

Contract: ``neuron_sim.passes.contracts.INFINITY_TO_FINITE``: the outputs are equal except where the
source's element is an infinity (the target may hold a finite value of the same sign: the
sentinel itself, or arithmetic on it such as ``lowest * 0.5``) or a NaN (the target may hold any
value: ``-inf - -inf`` is NaN in the source and ``lowest - lowest == 0`` in the target, which
is how a softmax over a fully masked row turns NaN into ``1/n``). Known unsafety: a program
that turns the sentinel into a *finite* result changes results outside that contract
(``1 / (x - -inf) == 0`` but ``1 / (x - lowest)`` is a nonzero denormal; ``exp(-inf) == 0``
stays exact); the verifier reports those as UNSOUND. A ``-inf`` that reaches the consumer
from a *parameter* is of course untouched.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from neuron_sim.hlo.builder import make_instruction
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal, LiteralError
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.passes.base import HloPass, SeedStatus
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.contracts import INFINITY_TO_FINITE

# consumer opcode -> the operand positions where a sentinel is replaced
CONSUMER_OPERANDS: dict[Opcode, tuple[int, ...]] = {
    Opcode.MINIMUM: (0, 1),
    Opcode.CLAMP: (0, 1, 2),
    Opcode.DYNAMIC_UPDATE_SLICE: (0, 1),
    Opcode.SELECT: (1, 2),
}


def min_non_inf_value(shape: ArrayShape) -> np.generic:
    """``GetMinNonInfValue``: the lowest finite value of the element type (``-finfo.max`` for
    floats, ``iinfo.min`` for integers)."""
    dtype = shape.element_type.numpy_dtype
    info = ml_dtypes.finfo(dtype) if shape.element_type.is_float else np.iinfo(dtype)
    return dtype.type(info.min)


def is_sentinel_constant(inst: HloInstruction) -> bool:
    """A rank-0 constant of a float type with infinities holding -inf."""
    shape = inst.shape
    if (inst.opcode is not Opcode.CONSTANT or not isinstance(shape, ArrayShape)
            or shape.rank != 0 or not shape.element_type.is_float
            or not shape.element_type.has_inf):
        return False
    try:
        value = np.asarray(inst.literal.value).astype(np.float64)
    except LiteralError:
        return False
    return bool(value == -np.inf)


Callers = dict[HloComputation, list[HloInstruction]]
PARAMETER_BINDERS = (Opcode.CALL, Opcode.FUSION)


def is_sentinel_value(inst: HloInstruction, callers: Callers) -> bool:
    """A sentinel constant, or a parameter of a called or fused computation that every call
    site binds to one (JAX's lowered ``jnp.where`` passes its -inf into ``call(_where)``)."""
    if inst.opcode is not Opcode.PARAMETER:
        return is_sentinel_constant(inst)
    sites = callers.get(inst.parent, []) if inst.parent is not None else []
    number = inst.parameter_number
    return bool(sites) and all(
        site.opcode in PARAMETER_BINDERS and number is not None
        and number < len(site.operands) and site.operand(number) is not inst
        and is_sentinel_value(site.operand(number), callers) for site in sites)


def sentinel_of(operand: HloInstruction, callers: Callers) -> HloInstruction | None:
    """The sentinel behind ``operand`` (itself, or under a scalar broadcast), or None."""
    if (operand.opcode is Opcode.BROADCAST and not tuple(operand.get("dimensions", ()))
            and is_sentinel_value(operand.operand(0), callers)):
        return operand.operand(0)
    return operand if is_sentinel_value(operand, callers) else None


def sentinel_uses(comp: HloComputation, callers: Callers) -> list[tuple[HloInstruction, int]]:
    """Every (consumer, operand position) of ``comp`` where a sentinel is used."""
    return [(inst, i) for inst in comp.post_order()
            for i in CONSUMER_OPERANDS.get(inst.opcode, ())
            if i < len(inst.operands) and sentinel_of(inst.operand(i), callers) is not None]


class ReplaceMinimumConstant(HloPass):
    """constant(-inf) feeding min / clamp / dynamic-update-slice / select -> constant(lowest)."""

    name = "aws_neuron_replace_minimum_constant"
    contract = INFINITY_TO_FINITE
    seed_status = SeedStatus.OUR_READING
    seed = "hlo-misc-cleanup-sweep.txt §3.7 ReplaceMinimumConstant (and CORRECTION B32-4)"
    summary = ("a scalar constant(-inf) (or its broadcast) feeding minimum, clamp, "
               "dynamic-update-slice or a select fill -> the dtype's lowest finite value")
    pipelines = {"neuron-closer": 52}
    seed_says = ("the scalar -inf / lowest constant feeding a min / clamp / dynamic-update-slice "
                 "mask fill -> `GetMinNonInfValue` (CreateConstant + ReplaceInstruction); the min "
                 "op is not rewritten (CORRECTION B32-4)")
    our_reading = ("a rank-0 float `constant(-inf)`, direct, under `broadcast(..., "
                   "dimensions={})`, or a call / fusion parameter every call site binds to one; "
                   "consumers `minimum`, `clamp`, `dynamic-update-slice`, `select` (branches); "
                   "other users (a reduce's init) keep -inf; value = lowest finite "
                   "(`-finfo.max`); integers and `finfo.min` unchanged; every computation, "
                   "fusions included")
    known_unsafety = ("a finite result (the contract is `INFINITY_TO_FINITE`) computed from the "
                      "sentinel changes outside the contract (`1/(x - -inf)`: 0 vs a denormal); a "
                      "fully masked softmax turns NaN into `1/n` (inside the contract)")

    def run_on_module(self, module: HloModule, context: PassContext) -> bool:
        callers = module.callers()
        uses = {comp: sentinel_uses(comp, callers) for comp in module.computations}
        for comp, comp_uses in uses.items():
            self._rewrite_uses(comp, comp_uses)
        return any(uses.values())

    def _rewrite_uses(self, comp: HloComputation,
                      uses: list[tuple[HloInstruction, int]]) -> None:
        replacements: dict[HloInstruction, HloInstruction] = {}
        for consumer, position in uses:
            old = consumer.operand(position)
            if old not in replacements:
                replacements[old] = self._finite_copy(comp, old, replacements)
            consumer.set_operand(position, replacements[old])
        for old in list(replacements):
            if (old.parent is comp and old.opcode is not Opcode.PARAMETER and not old.users
                    and not old.is_root):
                comp.remove_with_dead_operands(old)

    def _finite_copy(self, comp: HloComputation, old: HloInstruction,
                     replacements: dict[HloInstruction, HloInstruction]) -> HloInstruction:
        """The finite counterpart of ``old`` (a sentinel or its broadcast), made once."""
        if old.opcode is Opcode.BROADCAST:
            constant = old.operand(0)
            if constant not in replacements:
                replacements[constant] = self._finite_copy(comp, constant, replacements)
            return comp.add_before(make_instruction(
                comp, Opcode.BROADCAST, (replacements[constant],), shape=old.shape,
                name=old.name, dimensions=()), old)
        value = min_non_inf_value(old.shape)
        new = comp.add_before(make_instruction(
            comp, Opcode.CONSTANT, (), shape=old.shape,
            name=old.name if old.opcode is Opcode.CONSTANT else "constant",
            literal=Literal.from_array(old.shape, value)), old)
        what = ("parameter bound to constant(-inf) at every call site"
                if old.opcode is Opcode.PARAMETER else "constant(-inf)")
        self.record(f"%{old.name} -> %{new.name} ({what} -> constant({new.literal.text}))")
        return new
