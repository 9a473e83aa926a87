"""Shape rules of send, recv, send-done and recv-done, as XLA's parser and verifier have them.

XLA's verifier (``ShapeVerifier::HandleSend`` ... ``HandleRecvDone``) holds a send to ``(data,
u32[], token[])``, a send-done to ``token[]``, a recv to ``(data, u32[], token[])`` and a
recv-done to ``(data of its recv, token[])``. But XLA's parser never keeps the declared shape of
a send, send-done or recv-done: it builds each from its operands (``CreateSend``,
``CreateSendDone``, ``CreateRecvDone`` in ``xla/hlo/parser/hlo_parser.cc``), and of a recv's
declared shape it keeps only element 0, the data (``CreateRecv(shape->tuple_shapes(0), ...)``).
So the verifier accepts any declared shape for the first three, and XLA's own tests rely on it
(``hlo_verifier_test`` ChannelVerifierAsyncSend writes a send-done as ``(f32[16], token[])``,
``instruction_fusion_test`` a send as a bare array). We follow the text as XLA reads it: the
declared shape of a send, send-done or recv-done is taken as written, a recv's must be a tuple
whose element 0 is the data. Nor does the verifier look at the send's token operand, so
PyTorch/XLA's ``f32[]`` there is accepted. Which devices an exchange connects is the
interpreter's business (``neuron_sim.semantics.collectives.send_recv``).
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import Context, Invalid, RuleTable, fmt
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape, TupleShape

RULES = RuleTable("send_recv")


@RULES.rule(Opcode.SEND, Opcode.SEND_DONE, Opcode.RECV_DONE)
def _built_from_operands(ctx: Context) -> Shape:
    """XLA's parser builds the shape from the operands; the declared one is not checked."""
    return ctx.declared()


@RULES.rule(Opcode.RECV)
def _recv(ctx: Context) -> Shape:
    """A tuple whose element 0 is the received data (XLA's parser reads it from there)."""
    shape = ctx.declared()
    if not isinstance(shape, TupleShape) or not shape.elements:
        raise Invalid(f"a recv's shape must be a tuple (data, u32[], token[]), not {fmt(shape)}")
    return shape
