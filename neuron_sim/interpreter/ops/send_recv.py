"""send, recv, send-done and recv-done: the point-to-point exchange of one channel.

A ``send(data, token)`` and a ``recv(token)`` with the same ``channel_id`` in one computation
are one exchange along the pairs of their ``_xla_send_recv_source_target_pairs`` frontend
attribute (``neuron_sim.semantics.collectives.send_recv``; docs/semantics.md, "Send and recv").
Every device runs the same program, so each device both sends and receives:

- ``send`` records its data for the channel and returns ``(data, u32[] context, token)``;
- ``recv`` returns ``(zeros, u32[] context, token)``: its buffer holds nothing before its done;
- ``recv-done`` runs the exchange through the transport as the collective-permute along the
  pairs would (a target gets its source's data, a device that is no target zeros) and returns
  ``(data, token)``; ``send-done`` returns a token.

The token operand may be any value (PyTorch/XLA passes an ``f32[]`` where XLA's builders pass a
token; XLA's verifier does not look at it, and neither do we). The interpreter runs every device
in lock step through one computation, so a recv-done must come after its send in the
computation's order; a send without a recv, a recv without a send, missing pairs or pairs that
send and recv disagree on are errors naming the instruction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_sim.hlo import HloInstruction, Opcode
from neuron_sim.hlo.shapes import TupleShape

from neuron_sim.interpreter.errors import InterpreterError, Unimplemented, describe
from neuron_sim.interpreter.ops.control import zeros_value
from neuron_sim.interpreter.ops.registry import implements
from neuron_sim.interpreter.transport import CollectiveCall, Fingerprint
from neuron_sim.interpreter.values import (TOKEN, PerDevice, Replicated, TupleValue, Value,
                                           collapse_if_uniform, stacked)
from neuron_sim.semantics.collectives.groups import pair_components
from neuron_sim.semantics.collectives.send_recv import (EXCHANGE, SendRecvError,
                                                        send_recv_group_mode, send_recv_pairs,
                                                        send_recv_pairs_flattened)

_CONTEXT = Replicated(np.zeros((), np.uint32))


def _partner(inst: HloInstruction, opcode: Opcode) -> HloInstruction:
    """The one instruction of ``opcode`` with ``inst``'s channel id in its computation."""
    channel = inst.channel_id
    if channel is None:
        raise SendRecvError(f"%{inst.name}: a {inst.opcode.spelling} needs a channel_id")
    computation = inst.parent
    found = [other for other in (computation.instructions if computation is not None else ())
             if other.opcode is opcode and other.channel_id == channel]
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise SendRecvError(f"%{inst.name}: channel_id={channel} has {what} "
                            f"{opcode.spelling} in computation %"
                            f"{computation.name if computation is not None else '?'}; the "
                            f"interpreter pairs one send with one recv of a computation")
    return found[0]


def _channel_state(ctx: Any) -> dict:
    return ctx.evaluator.cache.setdefault("send_recv", {})


@implements(Opcode.SEND, values=True)
def record_send(ctx: Any, data: Value, token: Value | None = None) -> TupleValue:
    """Record the data this channel sends; the result is (data, context, token)."""
    if not isinstance(data, (Replicated, PerDevice)):
        raise Unimplemented("send", "of a tuple or token")
    state = _channel_state(ctx)
    if ctx.inst not in state:
        _partner(ctx.inst, Opcode.RECV)
    state[ctx.inst] = (ctx.frame.devices, data)
    return TupleValue([data, _CONTEXT, TOKEN])


@implements(Opcode.RECV, values=True)
def empty_recv(ctx: Any, token: Value | None = None) -> TupleValue:
    """The receive buffer before its done: zeros, context, token."""
    shape = ctx.inst.shape
    if not isinstance(shape, TupleShape) or len(shape.elements) != 3:
        raise InterpreterError(f"a recv returns (data, u32[], token[]), not {shape}")
    return TupleValue([zeros_value(shape.elements[0]), _CONTEXT, TOKEN])


@implements(Opcode.SEND_DONE, values=True)
def finish_send(ctx: Any, operand: Value) -> Value:
    return TOKEN


def _recv_of(inst: HloInstruction) -> HloInstruction:
    """The recv a recv-done completes (through a get-tuple-element of a grouped recv too)."""
    operand = inst.operands[0] if inst.operands else None
    while operand is not None and operand.opcode is Opcode.GET_TUPLE_ELEMENT:
        operand = operand.operands[0]
    if operand is None or operand.opcode is not Opcode.RECV:
        raise SendRecvError(f"%{inst.name}: a recv-done takes a recv")
    return operand


class _Exchange:
    """A recv-done's exchange, read once: its send, pairs and fingerprint fields."""

    __slots__ = ("send", "pairs", "groups", "fields", "label")

    def __init__(self, ctx: Any) -> None:
        done = ctx.inst
        recv_inst = _recv_of(done)
        self.send = _partner(recv_inst, Opcode.SEND)
        order = {inst: i for i, inst in enumerate(done.parent.instructions)}
        if order[self.send] > order[done]:
            raise SendRecvError(f"%{done.name} comes before %{self.send.name}, the send of its "
                                f"channel, in computation %{done.parent.name}; the interpreter "
                                "runs every device in lock step, so the send must come first")
        topology = ctx.evaluator.topology
        with_pairs = [i for i in (recv_inst, self.send)
                      if "_xla_send_recv_source_target_pairs" in str(i.attrs.get(
                          "frontend_attributes", ""))]
        if not with_pairs:
            send_recv_pairs(recv_inst)  # raises: names the recv and the attribute it needs
        if len(with_pairs) == 2 and send_recv_pairs(recv_inst) != send_recv_pairs(self.send):
            raise SendRecvError(
                f"%{recv_inst.name} and %{self.send.name} (channel_id={recv_inst.channel_id}) "
                f"give different pairs: {send_recv_pairs(recv_inst).to_text()} and "
                f"{send_recv_pairs(self.send).to_text()}")
        self.pairs = send_recv_pairs_flattened(with_pairs[0], topology)
        self.groups = pair_components(self.pairs)
        self.label = describe(done)
        self.fields = (
            ("instruction", f"%{done.name} in %{done.parent.name}"),
            ("opcode", "send/recv"),
            ("channel_id", str(recv_inst.channel_id)),
            ("group mode", str(send_recv_group_mode(with_pairs[0]))),
            ("source_target_pairs", send_recv_pairs(with_pairs[0]).to_text()),
        )


@implements(Opcode.RECV_DONE, values=True)
def exchange_at_recv_done(ctx: Any, operand: Value) -> TupleValue:
    """Move the send's data along the pairs; (received data, token)."""
    cache = ctx.evaluator.cache.setdefault("send_recv_exchanges", {})
    exchange = cache.get(ctx.inst)
    if exchange is None:
        exchange = cache[ctx.inst] = _Exchange(ctx)
    recorded = _channel_state(ctx).get(exchange.send)
    devices = ctx.frame.devices
    if recorded is None or recorded[0] is None or devices is None \
            or not np.array_equal(recorded[0], devices):
        raise InterpreterError(f"the send %{exchange.send.name} of this channel did not run "
                               f"for the same devices before it")
    data = recorded[1]
    rows = stacked(data, ctx.n)
    call = CollectiveCall(kind=EXCHANGE.sync, operands=[rows],
                          active=tuple(np.asarray(devices).tolist()), groups=exchange.groups,
                          pairs=exchange.pairs, label=exchange.label)
    transport = ctx.evaluator.transport
    fingerprint = None
    if getattr(transport, "uses_fingerprints", True):
        fingerprint = Fingerprint(exchange.fields + (
            ("operands", f"{np.dtype(rows.dtype).name}{list(rows.shape[1:])}"),))
    (out,) = transport.collective(call, fingerprint)
    expected = ctx.inst.shape.elements[0] if isinstance(ctx.inst.shape, TupleShape) else None
    if expected is None or tuple(rows.shape[1:]) != tuple(expected.dims):
        raise InterpreterError(f"the send's data {list(rows.shape[1:])} does not fit the "
                               f"recv-done's shape {ctx.inst.shape}")
    received = collapse_if_uniform(np.asarray(out))
    return TupleValue([received, TOKEN])
