"""Rules about how instructions of a module relate to each other rather than about one
instruction's shape: an asynchronous start has exactly one done (or update) consuming it, a
channel id names one kind of channel instruction, an async computation wraps one instruction,
all-reduces agree on constraining their layouts.

These are XLA's VerifyAsynchronousInstructionPairs, VerifyChannels, VerifyAsyncComputation and
VerifyLayoutConstrainedAllReduce (``xla/service/hlo_verifier.cc``).
"""

from __future__ import annotations

from neuron_sim.hlo.checks.core import HloCheckError, error_for
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.opcodes import COLLECTIVE_OPCODES, Opcode

ASYNC_OPS = (Opcode.ASYNC_START, Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE)

# Each -start (or update) and the opcodes its one user may have: XLA's list, which checks the
# all-reduce and collective-permute pairs but not all-gather's.
_SINGLE_USER = {
    Opcode.ASYNC_START: (Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE),
    Opcode.ASYNC_UPDATE: (Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE),
    Opcode.ALL_REDUCE_START: (Opcode.ALL_REDUCE_DONE,),
    Opcode.COPY_START: (Opcode.COPY_DONE,),
    Opcode.COLLECTIVE_PERMUTE_START: (Opcode.COLLECTIVE_PERMUTE_DONE,),
    Opcode.SEND: (Opcode.SEND_DONE, Opcode.TUPLE),
    Opcode.RECV: (Opcode.RECV_DONE, Opcode.TUPLE),
}

# Each -done (or update) and the opcodes its one operand may have.
_SINGLE_OPERAND = {
    Opcode.ASYNC_UPDATE: (Opcode.ASYNC_START, Opcode.ASYNC_UPDATE),
    Opcode.ASYNC_DONE: (Opcode.ASYNC_START, Opcode.ASYNC_UPDATE),
    Opcode.ALL_REDUCE_DONE: (Opcode.ALL_REDUCE_START,),
    Opcode.COPY_DONE: (Opcode.COPY_START,),
    Opcode.COLLECTIVE_PERMUTE_DONE: (Opcode.COLLECTIVE_PERMUTE_START,),
    Opcode.SEND_DONE: (Opcode.SEND, Opcode.GET_TUPLE_ELEMENT),
    Opcode.RECV_DONE: (Opcode.RECV, Opcode.GET_TUPLE_ELEMENT),
}

# XLA's HloChannelInstruction subclasses: the instructions a channel_id may name (send/recv and
# every collective's sync op and async start: COLLECTIVE_OPCODES, the collectives' descriptors'
# opcodes, as tests/neuron_sim/semantics/test_collectives_descriptors.py holds them; the
# descriptors themselves are not loaded for a module without a collective).
_SEND_RECV = frozenset({Opcode.SEND, Opcode.RECV, Opcode.SEND_DONE, Opcode.RECV_DONE})
_CHANNEL_OPS = _SEND_RECV | COLLECTIVE_OPCODES

# What an async computation made only of send/recv may hold besides them (OnlyContainsSendRecv).
_SEND_RECV_GROUP = frozenset({Opcode.SEND, Opcode.RECV, Opcode.BITCAST, Opcode.PARAMETER,
                              Opcode.TUPLE})


def async_computations(module: HloModule) -> set[HloComputation]:
    """The computations an async-start, -update or -done wraps."""
    return {called for inst in module.instructions() if inst.opcode in ASYNC_OPS
            for called in inst.called_computations}


def _names(opcodes: tuple[Opcode, ...], joiner: str) -> str:
    return joiner.join(op.spelling for op in opcodes)


def check_async_pairs(module: HloModule) -> None:
    """Every -start has one user, its -done (or an update), and every -done has one operand,
    its -start; a send or recv has one user, its -done or a tuple, unless it is the root of an
    async computation (XLA's VerifyAsynchronousInstructionPairs: "copy-start instruction
    requires one consumer, found 2")."""
    wrapped = async_computations(module)
    for inst in module.instructions():
        users = _SINGLE_USER.get(inst.opcode)
        if users is not None and not (inst.opcode in (Opcode.SEND, Opcode.RECV)
                                      and inst.is_root and inst.parent in wrapped):
            if inst.user_count != 1:
                raise error_for(inst, f"a {inst.opcode.spelling} needs exactly one user, "
                                      f"but has {inst.user_count}")
            user = next(iter(inst.users))
            if user.opcode not in users:
                raise error_for(inst, f"the user of a {inst.opcode.spelling} must be "
                                      f"{_names(users, ' or ')}, not %{user.name} "
                                      f"({user.opcode.spelling})")
        operands = _SINGLE_OPERAND.get(inst.opcode)
        if operands is not None:
            if len(inst.operands) != 1:
                raise error_for(inst, f"a {inst.opcode.spelling} needs exactly one operand, "
                                      f"but has {len(inst.operands)}")
            operand = inst.operands[0]
            if operand.opcode not in operands:
                raise error_for(inst, f"the operand of a {inst.opcode.spelling} must be a "
                                      f"{_names(operands, ' or ')}, not %{operand.name} "
                                      f"({operand.opcode.spelling})")


def check_channels(module: HloModule, *, unique_ids: bool = False) -> None:
    """A send or recv and the send-done or recv-done using it share the channel id and
    is_host_transfer; a channel id first used by a send/recv instruction names only send/recv
    instructions, and with ``unique_ids`` (XLA's verify_unique_channel_ids) one first used by
    a collective names only instructions of its opcode (XLA's VerifyChannels: "channel 1 is
    used for different types of channel instructions")."""
    wrapped = async_computations(module)
    by_channel: dict[int, list[HloInstruction]] = {}
    for inst in module.instructions():
        if inst.opcode not in _CHANNEL_OPS or inst.channel_id is None:
            continue
        by_channel.setdefault(inst.channel_id, []).append(inst)
        if inst.opcode not in (Opcode.SEND, Opcode.RECV) or (inst.is_root
                                                              and inst.parent in wrapped):
            continue
        if inst.user_count != 1:
            raise error_for(inst, f"a {inst.opcode.spelling} needs exactly one user, but has "
                                  f"{inst.user_count}")
        done = next(iter(inst.users))
        if done.opcode in (Opcode.SEND_DONE, Opcode.RECV_DONE):
            if done.channel_id != inst.channel_id:
                raise error_for(done, f"its channel id {done.channel_id} differs from the "
                                      f"channel id {inst.channel_id} of %{inst.name}")
            if bool(done.get("is_host_transfer", False)) != bool(
                    inst.get("is_host_transfer", False)):
                raise error_for(done, f"its is_host_transfer differs from %{inst.name}'s")
    for channel, members in by_channel.items():
        first = members[0]
        if first.opcode not in _SEND_RECV and not unique_ids:
            continue
        for inst in members[1:]:
            same_kind = (inst.opcode in _SEND_RECV if first.opcode in _SEND_RECV
                         else inst.opcode is first.opcode)
            if not same_kind:
                raise error_for(inst, f"channel {channel} is used by both "
                                      f"{first.opcode.spelling} %{first.name} and "
                                      f"{inst.opcode.spelling}, different kinds of channel "
                                      f"instructions")


def check_async_computations(module: HloModule) -> None:
    """An async computation holds its parameters and one root instruction, or only sends,
    recvs and the tuples and bitcasts grouping them (XLA's VerifyAsyncComputation and
    OnlyContainsSendRecv: "expected to contain only the root and parameter instructions")."""
    for comp in async_computations(module):
        if all(inst.opcode in _SEND_RECV_GROUP for inst in comp.instructions):
            continue
        extra = [inst for inst in comp.instructions
                 if inst is not comp.root and inst.opcode is not Opcode.PARAMETER]
        if extra:
            raise HloCheckError(f"async computation {comp.name} must hold only its parameters "
                                f"and its root, but also holds %{extra[0].name}",
                                computation=comp.name)


def check_layout_constrained_all_reduce(module: HloModule) -> None:
    """Either every all-reduce (and all-reduce-start) of the module constrains its layout or
    none does (XLA's VerifyLayoutConstrainedAllReduce)."""
    collectives = [inst for inst in module.instructions() if inst.opcode in COLLECTIVE_OPCODES]
    if not collectives:  # the descriptors load with a module's first collective
        return
    from neuron_sim.semantics.collectives.kinds import ALL_REDUCE

    reference: HloInstruction | None = None
    for inst in collectives:
        if inst.opcode not in ALL_REDUCE.opcodes:
            continue
        if reference is None:
            reference = inst
        elif bool(inst.get("constrain_layout", False)) != bool(
                reference.get("constrain_layout", False)):
            raise error_for(inst, f"the module mixes layout-constrained and unconstrained "
                                  f"all-reduces (%{reference.name} and %{inst.name})")
