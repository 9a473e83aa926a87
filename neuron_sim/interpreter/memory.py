"""How much memory a run will need, estimated from the module before anything is allocated.

A module with a huge shape, or a modest one on a million simulated devices, would otherwise be
found out by a MemoryError deep inside numpy (or by the kernel's OOM killer). The estimate is a
static upper bound on the values the evaluator holds, following its own rules
(``neuron_sim.interpreter.values`` and ``evaluator._make_plan``):

- a value is held once when it is the same on every device, and once per device (x D) when it
  is downstream of a parameter or of a device-dependent op (replica-id, partition-id, the
  collectives, the rng ops, or a call into a computation that contains one);
- values live from the instruction that makes them to their last use in the same computation;
  the estimate is the peak of the live bytes along the schedule, where an instruction that
  calls a computation adds that computation's own peak while it runs — once per frame for
  fusion, call, while, conditional and async-start, once per element for the scalar
  computations applied elementwise (reductions, comparators, scatter combiners, map);
- the result leaves are copied out as ``[D, *shape]`` arrays at the end.

Numpy's temporaries inside one op are not counted: the estimate is what the interpreter keeps,
so a limit should leave room (the default is half of the memory available).
"""

from __future__ import annotations

import numpy as np

from neuron_sim.errors import UserError
from neuron_sim.records import Record
from neuron_sim.sizes import default_memory_limit, format_bytes
from neuron_sim.hlo import HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.opcodes import COLLECTIVE_OPCODES
from neuron_sim.hlo.shapes import Shape
from neuron_sim.topology import Topology

from neuron_sim.interpreter.limits import require_call_depth

__all__ = ["MemoryEstimate", "MemoryLimitExceeded", "default_memory_limit", "estimate_memory",
           "format_bytes", "leaf_bytes", "require_memory", "shape_bytes"]


# Ops that evaluate their called computations for the whole frame (the others apply them
# elementwise, one frame row per element).
_FRAME_CALLERS = frozenset({Opcode.FUSION, Opcode.CALL, Opcode.WHILE, Opcode.CONDITIONAL,
                            Opcode.ASYNC_START})
_DEVICE_DEPENDENT = COLLECTIVE_OPCODES | {
    Opcode.REPLICA_ID, Opcode.PARTITION_ID, Opcode.RNG, Opcode.RNG_BIT_GENERATOR,
    Opcode.RNG_GET_AND_UPDATE_STATE}


class MemoryLimitExceeded(UserError):
    """A run would need more memory than the limit allows (nothing was allocated)."""


class MemoryEstimate(Record):
    """The estimated peak bytes of one run on ``num_devices`` devices. (A ``Record``, a frozen
    dataclass's behaviour: every run creates the class, and the dataclass cost more than the
    estimate.)"""

    __slots__ = ("peak_bytes", "num_devices")

    peak_bytes: int
    num_devices: int

    def __init__(self, peak_bytes: int, num_devices: int) -> None:
        self._set(peak_bytes=peak_bytes, num_devices=num_devices)

    def __str__(self) -> str:
        count = self.num_devices
        return f"about {format_bytes(self.peak_bytes)} for {count} device{'s' * (count != 1)}"


def estimate_memory(module: HloModule, topology: Topology, *,
                    executed: int | None = None) -> MemoryEstimate:
    """The peak bytes the interpreter holds to run ``module`` on every device of ``topology``
    (an upper bound, see the module docstring); with ``executed``, on that many of its devices
    only (``interpreter.execute``'s ``devices``)."""
    require_call_depth(module)
    devices = topology.num_devices if executed is None else executed
    estimator = _Estimator(module, devices)
    entry = module.entry
    peak = estimator.peak(entry, per_device_parameters=True, rows=devices)
    outputs = devices * sum(leaf_bytes(leaf) for leaf in entry.root.shape.leaves())
    return MemoryEstimate(peak + outputs, devices)


def require_memory(module: HloModule, topology: Topology, limit: int | None,
                   *, what: str | None = None, executed: int | None = None) -> MemoryEstimate:
    """The estimate; raises MemoryLimitExceeded (one sentence with the numbers) when it exceeds
    ``limit`` bytes (None: no limit). ``what`` names the module in the message (a file name);
    ``executed``: as ``estimate_memory``'s."""
    estimate = estimate_memory(module, topology, executed=executed)
    if limit is not None and estimate.peak_bytes > limit:
        raise MemoryLimitExceeded(
            f"{what or module.name}: running it on topology {topology} needs {estimate}, more "
            f"than the limit of {format_bytes(limit)} (--max-memory)")
    return estimate


# --------------------------------------------------------------------------------------------


def leaf_bytes(shape: Shape) -> int:
    """What numpy holds for an array leaf (0 for a token)."""
    if not shape.is_array:
        return 0
    # What numpy holds: sub-byte types (s4, u4, f4...) take a byte each.
    return shape.element_count * np.dtype(shape.element_type.numpy_dtype).itemsize


def shape_bytes(shape: Shape) -> int:
    """What numpy holds for every leaf of ``shape``."""
    return sum(leaf_bytes(leaf) for leaf in shape.leaves())


class _Estimator:
    """Peaks of computations, memoized; a computation that calls itself counts once."""

    def __init__(self, module: HloModule, num_devices: int) -> None:
        self.module = module
        self.num_devices = num_devices
        self._peaks: dict[tuple[HloComputation, bool, int], int] = {}
        self._dependent: dict[HloComputation, bool] = {}

    def device_dependent(self, computation: HloComputation) -> bool:
        """Does ``computation`` (or anything it calls) contain a device-dependent op?"""
        known = self._dependent.get(computation)
        if known is not None:
            return known
        self._dependent[computation] = False  # a cycle adds nothing new
        found = any(inst.opcode in _DEVICE_DEPENDENT or
                    any(self.device_dependent(c) for c in inst.called_computations)
                    for inst in computation.instructions)
        self._dependent[computation] = found
        return found

    def peak(self, computation: HloComputation, *, per_device_parameters: bool,
             rows: int) -> int:
        """Peak live bytes of one evaluation of ``computation`` for ``rows`` frame rows."""
        key = (computation, per_device_parameters, rows)
        known = self._peaks.get(key)
        if known is not None:
            return known
        self._peaks[key] = 0  # recursion: the inner call is not counted again
        order = computation.instructions
        last_use: dict[HloInstruction, int] = {}
        for index, inst in enumerate(order):
            for operand in inst.operands:
                last_use[operand] = index
        per_device: dict[HloInstruction, bool] = {}
        held: dict[HloInstruction, int] = {}
        live = peak = 0
        for index, inst in enumerate(order):
            varies = per_device_parameters if inst.opcode is Opcode.PARAMETER else (
                inst.opcode in _DEVICE_DEPENDENT
                or any(per_device.get(o, True) for o in inst.operands)
                or any(self.device_dependent(c) for c in inst.called_computations))
            per_device[inst] = varies
            size = shape_bytes(inst.shape) * (rows if varies else 1)
            running = self._called_peak(inst, varies, rows)
            peak = max(peak, live + running + size)
            held[inst] = size
            live += size
            for operand in set(inst.operands):
                if last_use.get(operand) == index and operand is not computation.root:
                    live -= held.pop(operand, 0)
        self._peaks[key] = peak
        return peak

    def _called_peak(self, inst: HloInstruction, per_device: bool, rows: int) -> int:
        """What ``inst``'s called computations hold at most while it runs."""
        called = inst.called_computations
        if not called:
            return 0
        if inst.opcode in _FRAME_CALLERS:
            return max(self.peak(c, per_device_parameters=per_device, rows=rows)
                       for c in called)
        elements = max([_largest_leaf_elements(o.shape) for o in inst.operands] +
                       [_largest_leaf_elements(inst.shape)])
        element_rows = max(1, elements) * (rows if per_device else 1)
        return max(self.peak(c, per_device_parameters=True, rows=element_rows)
                   for c in called)


def _largest_leaf_elements(shape: Shape) -> int:
    return max((leaf.element_count for leaf in shape.leaves() if leaf.is_array), default=0)
