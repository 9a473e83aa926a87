"""Walks a computation for a frame of devices; the engine every backend shares.

A ``Frame`` is the set of rows a computation runs for: at the top level one row per simulated
device (``devices`` holds their flattened ids); inside device-dependent control flow a subset of
them; and when a scalar computation (a reduction, a comparator, a scatter combiner) is applied
elementwise, one row per element (``devices`` is None). Ops are vectorized over the rows, and
values identical on every row are held once (``neuron_sim.interpreter.values``).

Collectives go through ``self.transport`` (``neuron_sim.interpreter.transport``), so a backend that runs
devices in several processes reuses this evaluator and the ops and swaps only the transport.

Time limits: an evaluator with a deadline checks it before every instruction of every
computation it evaluates (so on every iteration of a while), and raises ``ExecutionTimeout``
once it has passed. Unlike an alarm signal this works off the main thread; it cannot stop one long numpy
call, only the next step after it. ``time_limit(seconds)`` sets the deadline of every evaluator
created inside it (in the current thread or task): the verifier bounds each execution so,
whatever runner executes it.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from typing import Callable, Iterator, Sequence

import numpy as np

from neuron_sim.hlo import HloComputation, HloInstruction, HloModule, Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.topology import Topology

from neuron_sim.interpreter.context import Frame, OpContext, wrap_result
from neuron_sim.interpreter.errors import ExecutionError, ExecutionTimeout, InterpreterError, Unimplemented
from neuron_sim.interpreter.float_errors import ignore_float_errors, restore_float_errors
from neuron_sim.interpreter.limits import MAX_CALL_DEPTH, require_call_depth
from neuron_sim.interpreter.module_facts import ModuleFacts, facts_of
from neuron_sim.interpreter.ops import REGISTRY
from neuron_sim.interpreter.ops.cache import ComputationCache
from neuron_sim.interpreter.ops.elementwise import direct_ufunc
from neuron_sim.interpreter.plan import Plan
from neuron_sim.interpreter.transport import Transport
from neuron_sim.interpreter.values import (PerDevice, Replicated, TupleValue, Value, batched,
                                compacted, numpy_dtype)


_Plan = list[tuple[HloInstruction, tuple[HloInstruction, ...], tuple[HloInstruction, ...], object,
                   np.ufunc | None, tuple[int, ...]]]


class Deadline:
    """A point in ``time.monotonic()`` time, and the limit in seconds it came from (for the
    message)."""

    __slots__ = ("at", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self.at = time.monotonic() + self.seconds

    def check(self) -> None:
        """Raise ExecutionTimeout if the deadline has passed."""
        if time.monotonic() > self.at:
            raise ExecutionTimeout(f"did not finish within {self.seconds:g} s")


_AMBIENT_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "interpreter_deadline", default=None)


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Every evaluator created inside stops with ExecutionTimeout after ``seconds`` (None: no
    limit; an enclosing, earlier limit still applies)."""
    if seconds is None:
        yield
        return
    token = _AMBIENT_DEADLINE.set(earliest(_AMBIENT_DEADLINE.get(), Deadline(seconds)))
    try:
        yield
    finally:
        _AMBIENT_DEADLINE.reset(token)


def earliest(*deadlines: Deadline | None) -> Deadline | None:
    """The deadline that comes first (None: no deadline)."""
    present = [d for d in deadlines if d is not None]
    return min(present, key=lambda d: d.at) if present else None


class Evaluator:
    """Executes computations of one module on one topology through one transport."""

    def __init__(self, module: HloModule, topology: Topology, transport: Transport,
                 seed: int | None = None, deadline: Deadline | None = None, *,
                 facts: ModuleFacts | None = None) -> None:
        """``facts``: ``facts_of(module)`` when the caller has just obtained them."""
        facts = self._facts = facts if facts is not None else facts_of(module)
        if facts.call_depth > MAX_CALL_DEPTH:
            require_call_depth(module)
        self.module = module
        self.deadline = earliest(deadline, _AMBIENT_DEADLINE.get())
        self.topology = topology
        self.transport = transport
        self.seed = 0 if seed is None else int(seed)
        self.rng_calls = 0  # advances every time an rng op executes (deterministic streams)
        self.rng_state: np.ndarray | None = None  # for rng-get-and-update-state
        self.instructions_executed = 0
        self.device_instructions = 0  # instructions x devices they ran for (device frames only)
        self.cache: dict[str, dict] = {}  # per-instruction facts ops compute once
        self._plans: dict[HloComputation, _Plan] = {}
        self._compiled: dict[HloComputation, Plan] = {}
        self._walk = type(self)._execute is not Evaluator._execute
        self._elementwise: dict[HloComputation, Callable[..., object]] = {}

    # -- computations ----------------------------------------------------------------------
    def run_entry(self, args: Sequence[Value], devices: np.ndarray | None = None) -> Value:
        """Evaluate the entry computation for ``devices`` (default: every device)."""
        if devices is None:
            devices = self.topology.flattened_ids
        token = ignore_float_errors()  # wrap-around and inf/NaN are semantics, not warnings
        try:
            return compacted(self.evaluate(self.module.entry, args, Frame(devices)))
        finally:
            restore_float_errors(token)

    def evaluate(self, computation: HloComputation, args: Sequence[Value], frame: Frame
                 ) -> Value:
        """The value of ``computation``'s root given its parameters' values.

        Runs the computation's compiled plan (``neuron_sim.interpreter.plan``) once the
        module's facts have one for it: a computation is walked instruction by instruction on
        its first ``WALKED_EVALUATIONS`` evaluations (``ModuleFacts.plan``). An evaluator
        whose class overrides how one instruction executes (``_execute``) always walks, so
        that override sees every instruction."""
        if self._walk:
            return self._evaluate_walking(computation, args, frame)
        plan = self._compiled.get(computation)
        if plan is None:
            plan = self._facts.plan(computation)
            if plan is None:
                return self._evaluate_walking(computation, args, frame)
            self._compiled[computation] = plan
        return plan.run(self, frame, args, self.deadline)

    def _evaluate_walking(self, computation: HloComputation, args: Sequence[Value],
                          frame: Frame) -> Value:
        """``evaluate`` one instruction at a time through ``_execute``."""
        plan = self._plans.get(computation)
        if plan is None:
            plan = self._plans[computation] = plan_of(computation)
        deadline = self.deadline
        env: dict[HloInstruction, Value] = {}
        for inst, operands, dead, implementation, direct, donors in plan:
            if deadline is not None:
                deadline.check()
            if implementation is _PARAMETER:
                number = inst.parameter_number
                if number >= len(args):
                    raise InterpreterError(
                        f"computation {computation.name} has parameter {number} but was called "
                        f"with {len(args)} arguments", inst)
                env[inst] = args[number]
                continue
            try:
                values = [env[o] for o in operands]
                result = None
                if direct is not None:
                    result = self._execute_direct(direct, values, frame, donors)
                env[inst] = result if result is not None else \
                    self._execute(inst, implementation, values, frame)
            except InterpreterError as error:
                error.attach(inst)
                raise
            except Exception as error:  # noqa: BLE001 - every failure names its instruction
                raise ExecutionError.wrapping(error, inst) from error
            for gone in dead:
                del env[gone]
        return env[computation.root]

    def execute(self, inst: HloInstruction, args: list[Value], frame: Frame) -> Value:
        """Execute one instruction on its operand values."""
        return self._execute(inst, REGISTRY.get(inst.opcode), args, frame)

    def _execute_direct(self, ufunc: np.ufunc, args: list[Value], frame: Frame,
                        donors: tuple[int, ...] = ()) -> Value | None:
        """An op that is one ufunc call (``neuron_sim.interpreter.ops.elementwise.direct_ufunc``) on array
        values, without the op table's dispatch and checks; None if an operand is not an
        array value (the general path then reports it).

        ``donors``: positions of operands whose instruction has no later user (the plan's
        liveness). The result is written into the first of them whose memory nothing else
        can reach (``reusable_buffer``), so that a large elementwise op on a value just
        produced (a gathered gigabyte, say) does not hold two copies at once."""
        result = self._direct_call(ufunc, args, donors)
        if result is not None:
            self.instructions_executed += 1
            if frame.devices is not None:
                self.device_instructions += frame.n
        return result

    def _direct_call(self, ufunc: np.ufunc, args: list[Value], donors: tuple[int, ...] = ()
                     ) -> Value | None:
        """``_execute_direct`` without counting the instruction (a plan counts its own)."""
        arrays = []
        replicated = True
        for value in args:
            kind = type(value)
            if kind is PerDevice:
                replicated = False
            elif kind is not Replicated:
                return None
            arrays.append(value.array)
        value = None  # the loop's last operand: no reference to it may outlive the loop
        out = None
        for position in donors:  # the size test here: small ops pay no call
            if arrays[position].nbytes >= IN_PLACE_MIN_BYTES:
                out = reusable_buffer(args, donors, arrays)
                break
        if out is not None:
            result = ufunc(*arrays, out=out)
        else:
            result = ufunc(*arrays)
            if type(result) is not np.ndarray:  # a 0-d operation gives a numpy scalar
                result = np.asarray(result)
        return Replicated(result) if replicated else PerDevice(result)

    def _execute(self, inst: HloInstruction, implementation, args: list[Value], frame: Frame
                 ) -> Value:
        if implementation is None:
            raise Unimplemented(inst.opcode.spelling)
        self.instructions_executed += 1
        if frame.devices is not None:
            self.device_instructions += frame.n
        ctx = OpContext(self, inst, frame)
        if implementation.values:
            return implementation.fn(ctx, *args)
        arrays = []
        replicated = True
        for value in args:
            if type(value) is Replicated:
                arrays.append(value.array[None])
            elif type(value) is PerDevice:
                arrays.append(value.array)
                replicated = False
            else:
                raise InterpreterError(f"operand {len(arrays)} is {value!r}, not an array")
        result = implementation.fn(ctx, *arrays)
        return wrap_result(inst.shape, result, replicated, frame.n)

    # -- scalar computations applied elementwise -------------------------------------------
    def elementwise(self, computation: HloComputation) -> Callable[..., object]:
        """A function applying ``computation`` elementwise to arrays of one (broadcast) shape.

        Returns an array, or a tuple of arrays when the computation returns a tuple. A
        computation that is a single elementwise op on its two parameters calls that op's
        implementation directly; any other is evaluated with one frame row per element.
        """
        fn = self._elementwise.get(computation)
        if fn is None:
            fn = self._elementwise[computation] = self._make_elementwise(computation)
        return fn

    def _make_elementwise(self, computation: HloComputation) -> Callable[..., object]:
        root = computation.root
        params = computation.parameters
        implementation = REGISTRY.get(root.opcode)
        if (implementation is not None and not implementation.values
                and root.opcode.is_elementwise and isinstance(root.shape, ArrayShape)
                and len(computation.instructions) == len(params) + 1
                and all(o.opcode is Opcode.PARAMETER for o in root.operands)):
            order = [o.parameter_number for o in root.operands]
            ctx = OpContext(self, root, Frame(None, 0))
            dtype = root.shape.element_type.numpy_dtype

            def direct(*arrays: np.ndarray) -> np.ndarray:
                try:
                    out = implementation.fn(ctx, *(np.asarray(arrays[i]) for i in order))
                except InterpreterError as error:
                    error.attach(root)
                    raise
                except Exception as error:  # noqa: BLE001
                    raise ExecutionError.wrapping(error, root) from error
                out = np.asarray(out)
                return out if out.dtype == dtype else out.astype(dtype)

            return direct

        compiled = self._compile_elementwise(computation)

        def general(*arrays: np.ndarray) -> object:
            arrays = [np.asarray(a) for a in arrays]
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
            size = int(np.prod(shape, dtype=np.int64))
            flat = [np.broadcast_to(a, shape).reshape(size) for a in arrays]
            if compiled is not None:
                return compiled(flat, shape, size)
            result = self.evaluate(computation, [PerDevice(f) for f in flat], Frame(None, size))
            return _unbatch(result, shape, size)

        return general

    def _compile_elementwise(self, computation: HloComputation):
        """A straight-line runner for a computation of array ops, constants and tuples.

        Reductions and comparators are applied once per reduced element or merge step, so
        their per-instruction cost matters: this skips the general evaluator's bookkeeping
        (value wrapping, checks) and calls the op implementations on batched arrays directly.
        None if the computation has control flow or other value-level ops.
        """
        index = {inst: i for i, inst in enumerate(computation.instructions)}
        steps = []
        for inst in computation.instructions:
            operands = tuple(index[o] for o in inst.operands)
            if inst.opcode is Opcode.PARAMETER:
                steps.append(("param", inst, inst.parameter_number, operands))
            elif inst.opcode is Opcode.CONSTANT:
                if not isinstance(inst.shape, ArrayShape) or inst.literal is None \
                        or inst.literal.is_elided:
                    return None
                value = np.asarray(inst.literal.value, numpy_dtype(inst.shape.element_type))
                steps.append(("const", inst, value.reshape(1, *inst.shape.dims), operands))
            elif inst.opcode is Opcode.TUPLE:
                steps.append(("tuple", inst, None, operands))
            elif inst.opcode is Opcode.GET_TUPLE_ELEMENT:
                steps.append(("gte", inst, inst.attrs["index"], operands))
            else:
                implementation = REGISTRY.get(inst.opcode)
                if implementation is None or implementation.values or \
                        not isinstance(inst.shape, ArrayShape):
                    return None
                ctx = OpContext(self, inst, Frame(None, 0))
                steps.append(("op", inst, (implementation.fn, ctx,
                                           numpy_dtype(inst.shape.element_type)), operands))
        root = index[computation.root]

        def run(flat: list[np.ndarray], shape: tuple[int, ...], size: int) -> object:
            values: list = [None] * len(steps)
            for position, (kind, inst, data, operands) in enumerate(steps):
                try:
                    if kind == "op":
                        fn, ctx, dtype = data
                        ctx.frame.n = size
                        out = np.asarray(fn(ctx, *(values[i] for i in operands)))
                        values[position] = out if out.dtype == dtype else out.astype(dtype)
                    elif kind == "param":
                        values[position] = flat[data]
                    elif kind == "const":
                        values[position] = data
                    elif kind == "tuple":
                        values[position] = tuple(values[i] for i in operands)
                    else:
                        values[position] = values[operands[0]][data]
                except InterpreterError as error:
                    error.attach(inst)
                    raise
                except Exception as error:  # noqa: BLE001 - every failure names its instruction
                    raise ExecutionError.wrapping(error, inst) from error
            return _unbatch_arrays(values[root], shape, size)

        return run


def _unbatch_arrays(value, shape: tuple[int, ...], size: int) -> object:
    if isinstance(value, tuple):
        return tuple(_unbatch_arrays(v, shape, size) for v in value)
    if value.shape[0] != size:
        value = np.broadcast_to(value, (size, *value.shape[1:]))
    return value.reshape(shape)


def _unbatch(value: Value, shape: tuple[int, ...], size: int) -> object:
    if isinstance(value, TupleValue):
        return tuple(_unbatch(e, shape, size) for e in value.elements)
    if isinstance(value, Replicated):
        return np.broadcast_to(value.array, shape).copy()
    if isinstance(value, PerDevice):
        return value.array.reshape(shape)
    raise InterpreterError(f"an elementwise computation returned {value!r}")


_PARAMETER = object()


def plan_of(computation: HloComputation) -> _Plan:
    """``computation``'s plan, built once and reused by every evaluator while the computation
    is unchanged (``neuron_sim.interpreter.ops.cache``)."""
    return _PLANS.get(computation)


def _make_plan(computation: HloComputation) -> _Plan:
    """Instructions in order, each with its operands, the values it is the last user of (freed
    after it runs), its implementation (looked up once), for an op that is one ufunc call that
    ufunc, and the positions of the operands it may write its result into (``donors_of``)."""
    order = computation.instructions
    last_use: dict[HloInstruction, int] = {}
    for index, inst in enumerate(order):
        for operand in inst.operands:
            last_use[operand] = index
    dead_at: dict[int, list[HloInstruction]] = {}
    for inst, index in last_use.items():
        if inst is not computation.root:
            dead_at.setdefault(index, []).append(inst)
    plan = []
    for i, inst in enumerate(order):
        dead = tuple(dead_at.get(i, ()))
        direct = direct_ufunc(inst)
        plan.append((inst, tuple(inst.operands), dead,
                     _PARAMETER if inst.opcode is Opcode.PARAMETER else REGISTRY.get(inst.opcode),
                     direct, donors_of(inst, dead) if direct is not None else ()))
    return plan


def donors_of(inst: HloInstruction, dead: Sequence[HloInstruction]) -> tuple[int, ...]:
    """Positions of ``inst``'s operands that may hold its result: values computed in this
    computation (not parameters, which the caller holds, nor constants, which the module
    holds) whose last user is ``inst``, named once among its operands, with the result's
    shape and element type. Whether the memory is really unshared is decided when it runs
    (``reusable_buffer``): a view, a tuple or an outer caller may still reach it."""
    shape = inst.shape
    operands = inst.operands
    donors = []
    for position, operand in enumerate(operands):
        if any(d is operand for d in dead) \
                and operand.opcode not in (Opcode.PARAMETER, Opcode.CONSTANT) \
                and sum(o is operand for o in operands) == 1 and operand.shape == shape:
            donors.append(position)
    return tuple(donors)


# Below this many bytes a fresh result costs less than finding out whether an operand's memory
# may be reused; small ops (a loop body's f32[64] adds) never look.
IN_PLACE_MIN_BYTES = 1 << 16


def _reference_counts(args: list, position: int) -> tuple[list[int], object]:
    """The reference counts of ``args[position]``, its array and every array on the array's
    chain of bases, and the object at the end of the chain (None for memory numpy allocated).
    Counted with no local reference to the value, so that the counts of a value and of the
    calibration below differ exactly by the references someone else holds."""
    counts = [sys.getrefcount(args[position])]
    node = args[position].array
    while isinstance(node, np.ndarray):
        counts.append(sys.getrefcount(node))
        node = node.base
    return counts, node


def _calibrate() -> tuple[int, int, int]:
    """The counts ``_reference_counts`` sees for a value held only where the evaluator holds
    an operand (its environment, the operand list, the list of operand arrays), whose array is
    a view of memory that only that view references: (value, its array, a base)."""
    owner = np.empty(2, np.float32)
    value = PerDevice(owner[:])
    del owner
    env = {0: value}
    args = [value]
    arrays = [value.array]
    del value
    counts, end = _reference_counts(args, 0)
    assert end is None and len(counts) == 3 and env and arrays
    return counts[0], counts[1], counts[2]


_VALUE_REFS, _ARRAY_REFS, _BASE_REFS = _calibrate()


def _fits(arrays: list[np.ndarray], position: int) -> bool:
    """Whether ``arrays[position]`` could hold the ufunc's result: large enough to be worth
    it, contiguous, of every operand's dtype and of their broadcast shape."""
    candidate = arrays[position]
    if candidate.nbytes < IN_PLACE_MIN_BYTES or not (
            candidate.flags.c_contiguous or candidate.flags.f_contiguous):
        return False
    dtype = candidate.dtype
    if any(a.dtype != dtype for a in arrays):
        return False
    return len(arrays) == 1 or np.broadcast_shapes(*(a.shape for a in arrays)) \
        == candidate.shape


def reusable_buffer(args: list[Value], donors: Sequence[int], arrays: list[np.ndarray]
                    ) -> np.ndarray | None:
    """The array of the first donor operand that can receive the ufunc's result on
    ``arrays`` (the operands' arrays, in ``args`` order), made writable; None if none can.

    It can when it is large enough to matter, contiguous (so no element aliases another), of
    the result's dtype and broadcast shape, and nothing but the evaluator reaches it: the value
    is referenced only by the evaluator's environment and operand list, its array only by the
    value and the operand arrays, and its memory was allocated by numpy and is referenced by
    nothing but that array (another view of it, a tuple holding the value, a caller or a cache
    would each add a reference). Writing the result there changes nothing observable: the
    operand's instruction has no later user (the plan), and elementwise, each output element
    depends only on the input element at its own position.
    """
    for position in donors:
        if not _fits(arrays, position):
            continue
        # Counted before this function holds its own reference to the array.
        counts, end = _reference_counts(args, position)
        if end is not None or counts[0] != _VALUE_REFS or counts[1] != _ARRAY_REFS \
                or any(c != _BASE_REFS for c in counts[2:]):
            continue
        candidate = arrays[position]
        owner = candidate
        while owner.base is not None:
            owner = owner.base
        if not (owner.flags.owndata and owner.flags.writeable):
            continue
        if not candidate.flags.writeable:
            candidate.flags.writeable = True  # a read-only view of memory no one else sees
        return candidate
    return None


_PLANS: ComputationCache[_Plan] = ComputationCache(_make_plan)


__all__ = ["Deadline", "Evaluator", "Frame", "OpContext", "batched", "earliest", "time_limit",
           "wrap_result"]
