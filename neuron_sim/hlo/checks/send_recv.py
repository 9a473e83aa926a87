"""Shape rules of send, recv, send-done and recv-done: XLA's ``ShapeVerifier::HandleSend``,
``HandleSendDone``, ``HandleRecv`` and ``HandleRecvDone`` (``xla/service/hlo_verifier.cc``).

A send is ``(data, u32[] context, token[])`` with data its operand 0's shape; its operand 1 (the
token XLA's builders pass) is not looked at, so PyTorch/XLA's ``f32[]`` there is accepted. A recv
is ``(data, u32[], token[])`` with data its own declared element 0; a recv-done is
``(data of its recv, token[])``; a send-done is ``token[]``. Which devices an exchange connects
is the interpreter's business (``neuron_sim.semantics.collectives.send_recv``), not the
verifier's: XLA's verifier does not read ``_xla_send_recv_source_target_pairs``.
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape, TupleShape, scalar

RULES = RuleTable("send_recv")

_CONTEXT = scalar(ElementType.U32)


def _token() -> Shape:
    return scalar(ElementType.TOKEN)


def _first_element(shape: Shape, whose: str) -> Shape:
    if not isinstance(shape, TupleShape) or not shape.elements:
        raise Invalid(f"{whose} must be a tuple (data, u32[], token[]), not {fmt(shape)}")
    return shape.elements[0]


@RULES.rule(Opcode.SEND)
def _send(ctx: Context) -> Shape:
    ctx.require_operands(2)
    return TupleShape((ctx.shape(0), _CONTEXT, _token()))


@RULES.rule(Opcode.SEND_DONE)
def _send_done(ctx: Context) -> Shape:
    ctx.require_operands(1)
    return _token()


@RULES.rule(Opcode.RECV)
def _recv(ctx: Context) -> Shape:
    ctx.require_operands(1)
    return TupleShape((_first_element(ctx.declared(), "the recv's shape"), _CONTEXT, _token()))


@RULES.rule(Opcode.RECV_DONE)
def _recv_done(ctx: Context) -> Shape:
    ctx.require_operands(1)
    data = _first_element(ctx.shape(0), f"the operand of {ctx.name}")
    return TupleShape((data, _token()))
