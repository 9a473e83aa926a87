"""Execution plans: each computation compiled once into one Python function.

The evaluator used to walk a computation instruction by instruction, looking up each op's
implementation, building an ``OpContext``, checking and wrapping every result. For the small
modules XLA's corpus is made of (a few dozen scalar or ``f32[8]`` instructions) that dispatch
cost several times what the numpy calls themselves cost. A plan is the same walk written out
once as straight-line Python source and compiled:

- parameters, tuples and get-tuple-elements are local variable moves; a constant is its kept
  value; fusions and calls are inlined (their instructions become steps of the caller's plan,
  their parameters the caller's operands), so a fused computation costs no call at all;
- ops that are one exact numpy call (``ops.elementwise.direct_ufunc``) run in *groups*: a run
  of consecutive such instructions unwraps its inputs once, calls the ufuncs on the raw arrays
  (replicated ones unbatched, per-device ones ``[n, *dims]``, so broadcasting lines them up)
  and writes each result into the buffer of an intermediate of the group that has no later
  use (``out=``) when it has the result's shape. A ufunc writes the same bits into a fresh
  array or into ``out=``, element by element: nothing changes but the allocations;
- every other op calls its registered implementation directly (no registry lookup), and its
  result is checked and wrapped against the shape bound when the plan was built;
- what is computed from constants alone is computed once and kept between runs (``_Kept``),
  and what is computed from constants and the device ids (partition-id, replica-id: a
  shard_map's axis index, the branch index of a device-dependent conditional) once per frame
  of devices (``_PerFrame``);
- values die where their last user runs (``del``), so large intermediates are freed as early
  as before, and an elementwise op on a large dead operand still writes into it
  (``evaluator.reusable_buffer``);
- the deadline is checked before every step, so a while loop still stops between iterations.

A plan is cached per computation and rebuilt when the computation, a computation inlined into
it, or an attribute the plan read has changed (``current``). Errors name the instruction they
happened in, the innermost first, as before. A frame's kind (device rows or elements) is read
at run time (the counts of device instructions); everything else is the same for both.
"""

from __future__ import annotations

import functools
import time
from types import CodeType
from typing import Any, Callable

import numpy as np

from neuron_sim.hlo import HloComputation, HloInstruction, Opcode
from neuron_sim.hlo.shapes import ArrayShape
from neuron_sim.semantics.element_kinds import NotDefined

from neuron_sim.interpreter.context import OpContext, wrap_array, wrap_result
from neuron_sim.interpreter.errors import ExecutionError, InterpreterError, Unimplemented
from neuron_sim.interpreter.ops import REGISTRY
from neuron_sim.interpreter.ops.elementwise import bound_kernel, direct_ufunc, not_defined
from neuron_sim.interpreter.ops.shape import bound_movement
from neuron_sim.interpreter.values import (TOKEN, PerDevice, Replicated, TupleValue, leaves,
                                           numpy_dtype)

# Inlining stops growing a plan past this many steps (a call tree of huge fusions is then
# called instead of copied).
INLINE_LIMIT = 4000


class _Node:
    """One step of a plan before it is written out: ``inst`` computes variable ``out`` from the
    variables ``ins`` (operand order). (A plain class: a dataclass would be created at every
    start-up that imports the plans.)"""

    __slots__ = ("inst", "out", "ins", "kind", "data", "group", "donors")

    def __init__(self, inst: HloInstruction, out: int, ins: list[int], kind: str,
                 data: Any = None) -> None:
        self.inst = inst
        self.out = out
        self.ins = ins
        # "const", "tuple", "gte", "direct", "kernel", "movement", "bound", "array", ...
        self.kind = kind
        self.data = data
        self.group = -1  # direct ops: the group (run of consecutive direct ops) they belong to
        self.donors: tuple[int, ...] = ()  # "donor" ops: operand positions it may write into


class _Builder:
    """State while a computation (and what it inlines) is turned into nodes."""

    __slots__ = ("nodes", "variables", "computed", "parameters", "read", "bound", "counted")

    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.variables = 0
        self.computed: set[int] = set()  # variables computed by the plan itself
        self.parameters: dict[int, HloInstruction] = {}  # var -> parameter
        # Computations besides its own whose structure the plan was built from: the ones it
        # inlines and those a bound op read (an argmax reduce's comparator).
        self.read: list[HloComputation] = []
        self.bound: list[tuple[HloInstruction, str, Any]] = []
        self.counted = 0  # instructions the plan executes, as the walk counted them

    def variable(self) -> int:
        self.variables += 1
        return self.variables - 1


_INLINED = {Opcode.FUSION: "calls", Opcode.CALL: "to_apply"}
_IDENTITY = (Opcode.COPY, Opcode.DOMAIN)


def _add_computation(builder: _Builder, computation: HloComputation, arguments: list[int] | None
                     ) -> int:
    """Nodes for ``computation`` with its parameters bound to ``arguments`` (None: the plan's
    own parameters); returns the variable of its root."""
    var_of: dict[HloInstruction, int] = {}
    for inst in computation.instructions:
        opcode = inst.opcode
        if opcode is Opcode.PARAMETER:
            number = inst.parameter_number
            if arguments is None:
                var = var_of[inst] = builder.variable()
                builder.parameters[var] = inst
            else:
                var_of[inst] = arguments[number]
            continue
        ins = [var_of[o] for o in inst.operands]
        builder.counted += 1
        if opcode in _IDENTITY and len(ins) == 1 and _same_array_type(inst, inst.operands[0]):
            # copy (between layouts, docs/semantics.md §5) and domain are the identity: the
            # result is the operand's value itself.
            var_of[inst] = ins[0]
            continue
        attribute = _INLINED.get(opcode)
        if attribute is not None:
            called = inst.attrs.get(attribute)
            if isinstance(called, HloComputation) and \
                    len(builder.nodes) + len(called.instructions) <= INLINE_LIMIT and \
                    len(called.parameters) == len(ins) and \
                    all(p.parameter_number < len(ins) for p in called.parameters):
                builder.bound.append((inst, attribute, called))
                builder.read.append(called)
                var_of[inst] = _add_computation(builder, called, ins)
                continue
        out = var_of[inst] = builder.variable()
        builder.computed.add(out)
        builder.nodes.append(_node(builder, inst, out, ins))
    return var_of[computation.root]


def _same_array_type(a: HloInstruction, b: HloInstruction) -> bool:
    """Both array-shaped, of one element type and the same dimensions (layouts aside)."""
    x, y = a.shape, b.shape
    return isinstance(x, ArrayShape) and isinstance(y, ArrayShape) and x.is_array and \
        y.is_array and x.element_type is y.element_type and x.dims == y.dims


def _node(builder: _Builder, inst: HloInstruction, out: int, ins: list[int]) -> _Node:
    opcode = inst.opcode
    if opcode is Opcode.CONSTANT:
        return _Node(inst, out, ins, "const")
    if opcode is Opcode.TUPLE:
        return _Node(inst, out, ins, "tuple")
    if opcode is Opcode.GET_TUPLE_ELEMENT and isinstance(inst.attrs.get("index"), int):
        builder.bound.append((inst, "index", inst.attrs["index"]))
        return _Node(inst, out, ins, "gte", inst.attrs["index"])
    ufunc = direct_ufunc(inst)
    if ufunc is not None:
        return _Node(inst, out, ins, "direct", ufunc)
    bound = bound_kernel(inst)
    if bound is not None:
        kernel, attributes = bound
        builder.bound.extend((inst, name, value) for name, value in attributes)
        return _Node(inst, out, ins, "kernel", (kernel, numpy_dtype(inst.shape.element_type)))
    moved = bound_movement(inst)
    if moved is not None:
        function, attributes = moved
        builder.bound.extend((inst, name, value) for name, value in attributes)
        return _Node(inst, out, ins, "movement",
                     (function, numpy_dtype(inst.shape.element_type), tuple(inst.shape.dims)))
    implementation = REGISTRY.get(opcode)
    if implementation is None:
        return _Node(inst, out, ins, "missing")
    if implementation.values:
        return _Node(inst, out, ins, "value", implementation.fn)
    shape = inst.shape
    leaves = _array_leaves(shape)
    if implementation.bind is not None and leaves is not None:
        op = implementation.bind(inst)
        if op is not None:
            builder.bound.extend(op.attributes)
            builder.read.extend(op.computations)
            return _Node(inst, out, ins, "bound", (op.fn, leaves, shape.is_tuple))
    if isinstance(shape, ArrayShape) and shape.is_array:
        return _Node(inst, out, ins, "array",
                     (implementation.fn, numpy_dtype(shape.element_type), tuple(shape.dims)))
    return _Node(inst, out, ins, "array_any", implementation.fn)


def _array_leaves(shape: Any) -> list[tuple[np.dtype, tuple[int, ...]]] | None:
    """The dtype and dimensions of an array shape, or of each element of a tuple of arrays;
    None for any other shape (tokens, nested tuples)."""
    elements = shape.elements if shape.is_tuple else [shape]
    if not all(isinstance(e, ArrayShape) and e.is_array for e in elements):
        return None
    return [(numpy_dtype(e.element_type), tuple(e.dims)) for e in elements]


class Plan:
    """A computation compiled (module docstring). ``run(evaluator, frame, args, deadline)``
    returns the root's value."""

    __slots__ = ("computation", "run", "source", "_structure", "bound", "__weakref__")

    def __init__(self, computation: HloComputation, run: Callable, source: str,
                 structure: list[tuple], bound: list[tuple[HloInstruction, str, Any]]) -> None:
        self.computation = computation
        self.run = run
        self.source = source
        self._structure = structure
        self.bound = bound

    def current(self) -> bool:
        """Whether every computation the plan was built from is unchanged (instructions,
        their opcodes, shapes and operands) and every attribute it read still holds the same
        object."""
        for computation, instructions, opcodes, shapes, operands in self._structure:
            order = computation.instructions
            if instructions != order or opcodes != [i.opcode for i in order] \
                    or shapes != [i.shape for i in order] \
                    or operands != [i.operands for i in order]:
                return False
        for inst, name, value in self.bound:
            if inst.attrs.get(name) is not value:
                return False
        return True


def _structure(computation: HloComputation) -> tuple:
    order = computation.instructions
    return (computation, list(order), [i.opcode for i in order], [i.shape for i in order],
            [list(i.operands) for i in order])


def plan_for(computation: HloComputation) -> Plan:
    """``computation``'s plan: the kept one while it is current, else a new one. Kept in the
    computation's own ``derived`` caches: a plan refers to its computation, so a global table
    keyed by the computation would keep every computation ever run alive."""
    plan = computation.derived.get(Plan)
    if plan is None or not plan.current():
        plan = computation.derived[Plan] = compile_plan(computation)
    return plan


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, filename: str) -> CodeType:
    """Python's bytecode of a plan's ``source``, kept by its text: the source names no
    instruction (values are ``v<number>``, the instructions ``INSTS[<i>]`` of the namespace it
    runs in), so computations of the same structure share it; compiling is most of a plan's
    cost, and most plans run only once or twice (a fuzz campaign's modules, a sweep's cases)."""
    return compile(source, filename, "exec")


def compile_plan(computation: HloComputation) -> Plan:
    """Build ``computation``'s plan (module docstring)."""
    builder = _Builder()
    root = _add_computation(builder, computation, None)
    source, namespace = _write(computation, builder, root)
    code = _compiled(source, "<plan>")
    exec(code, namespace)  # noqa: S102 - source written above from the computation's structure
    structure = [_structure(computation)] + [_structure(c) for c in dict.fromkeys(
        builder.read)]
    return Plan(computation, namespace["run"], source, structure, builder.bound)


# ---------------------------------------------------------------------------------------------
# Writing the source.

_GROUPED = ("direct", "kernel")

# A direct op whose result is smaller than this per device runs in its group, whatever its
# operands: looking for a reusable operand (``evaluator.reusable_buffer``, above 64 KiB) pays
# only for large arrays, and 1 KiB per device reaches 64 KiB only from 64 devices up.
DONOR_MIN_ROW_BYTES = 1 << 10


def _row_bytes(inst: HloInstruction) -> int:
    shape = inst.shape
    count = 1
    for d in shape.dims:
        count *= d
    return count * numpy_dtype(shape.element_type).itemsize


def _groups(nodes: list[_Node], builder: _Builder, kept: set[int], boundary: int = 0) -> None:
    """Give each run of consecutive elementwise ops (direct ufuncs and bound kernels) a group
    number, no run crossing position ``boundary`` (the end of the device ids' block); a
    direct op that may write into
    a dead operand computed by a step that is not a direct op becomes a "donor" step of its
    own (the evaluator's call decides, by reference counts, whether it does)."""
    shape_of = {node.out: node.inst.shape for node in nodes}
    kind_of = {node.out: node.kind for node in nodes}
    last_use: dict[int, int] = {}
    for position, node in enumerate(nodes):
        for var in node.ins:
            last_use[var] = position
    for position, node in enumerate(nodes):
        if node.kind != "direct":
            continue
        if _row_bytes(node.inst) < DONOR_MIN_ROW_BYTES:
            continue
        donors = tuple(
            index for index, var in enumerate(node.ins)
            if var in builder.computed and var not in kept
            and kind_of.get(var) not in ("direct", "const")
            and last_use.get(var) == position and node.ins.count(var) == 1
            and shape_of.get(var) == node.inst.shape)
        if donors:
            node.kind, node.donors = "donor", donors
    group = -1
    previous_direct = False
    for position, node in enumerate(nodes):
        if node.kind in _GROUPED:
            if not previous_direct or position == boundary:
                group += 1
            node.group = group
            previous_direct = True
        else:
            previous_direct = False


def _write(computation: HloComputation, builder: _Builder, root: int
           ) -> tuple[str, dict[str, Any]]:
    """The plan's source and the namespace it runs in."""
    # Constants depend on nothing: first, so that runs of elementwise ops they feed are not
    # cut by them.
    nodes = [n for n in builder.nodes if n.kind == "const"] + \
        [n for n in builder.nodes if n.kind != "const"]
    folded, per_frame = _foldable(nodes)
    kept: list[int] = []
    prologue: list[str] = []
    extra: dict[str, Any] = {}
    if folded:
        used = {v for n in nodes if n.out not in folded for v in n.ins} | {root}
        kept = [n.out for n in nodes if n.out in folded and n.out in used]
        fold_nodes = [n for n in nodes if n.out in folded]
        nodes = [n for n in nodes if n.out not in folded]
        source, namespace = _write_function(computation, fold_nodes, builder, kept, {}, None,
                                            [], {}, set())
        exec(_compiled(source, "<constants>"),  # noqa: S102
             namespace)
        extra["KEPT"] = _Kept(namespace["run"],
                              [n.inst for n in fold_nodes if n.kind == "const"])
        targets = "".join(f"v{v}, " for v in kept)  # none when every folded value is dead
        prologue.append(f"{targets}= KEPT.get(ev, frame, dl)" if targets else
                        "KEPT.get(ev, frame, dl)")
    framed = None
    if per_frame:
        # Written in the plan's own function, first, in a block that runs only when the frame's
        # values are not kept yet (``_PerFrame``): a function of their own would cost a second
        # compile, which most plans, run a few times, never win back.
        frame_nodes = [n for n in nodes if n.out in per_frame]
        rest = [n for n in nodes if n.out not in per_frame]
        used = {v for n in rest for v in n.ins} | {root}
        results = [n.out for n in frame_nodes if n.out in used]
        inputs = list(dict.fromkeys(v for n in frame_nodes for v in n.ins
                                    if v not in per_frame))  # kept values they read
        extra["FRAMED"] = _PerFrame()
        nodes = frame_nodes + rest
        framed = (len(frame_nodes), inputs, results)
        kept = kept + results
    return _write_function(computation, nodes, builder, [root], builder.parameters,
                           builder.counted, prologue, extra, set(kept), framed)


# Ops whose result on constants is a constant: kept between runs (``_Kept``).
_FOLDABLE = frozenset({Opcode.BROADCAST, Opcode.RESHAPE, Opcode.TRANSPOSE, Opcode.SLICE,
                       Opcode.CONCATENATE, Opcode.IOTA, Opcode.REVERSE, Opcode.PAD,
                       Opcode.BITCAST})


# Ops whose result is the device's id: the same on every run for the same rows of the same
# topology (``_PerFrame``).
_DEVICE_IDS = frozenset({Opcode.PARTITION_ID, Opcode.REPLICA_ID})


def _foldable(nodes: list[_Node]) -> tuple[set[int], set[int]]:
    """Variables computed by ops that read nothing but their operands (not the evaluator's
    state, not a random state, not another device's data) from constants alone — the same on
    every run while the constants' literals hold — and from constants and the device ids
    (partition-id, replica-id) — the same on every run for the same frame of devices."""
    folded: set[int] = set()
    per_frame: set[int] = set()
    for node in nodes:
        if node.kind == "const":
            folded.add(node.out)
        elif node.kind == "value" and node.inst.opcode in _DEVICE_IDS:
            per_frame.add(node.out)
        elif (node.kind in ("direct", "kernel", "movement") or
              (node.kind == "array" and node.inst.opcode in _FOLDABLE)):
            if all(v in folded for v in node.ins):
                folded.add(node.out)
            elif all(v in folded or v in per_frame for v in node.ins):
                per_frame.add(node.out)
    return folded, per_frame


class _Kept:
    """The values a plan computes from constants alone, computed on its first run and kept
    while every constant has the literal (and the literal the value) it was computed from.
    Their arrays are read-only: nothing may write into a value shared between runs."""

    __slots__ = ("fold", "constants", "values", "literals")

    def __init__(self, fold: Callable, constants: list[HloInstruction]) -> None:
        self.fold = fold
        self.constants = constants
        self.values: tuple | None = None
        self.literals: list[tuple[Any, Any]] = []

    def get(self, evaluator: Any, frame: Any, deadline: Any) -> tuple:
        values = self.values
        if values is not None:
            for inst, (literal, value) in zip(self.constants, self.literals):
                if inst.literal is not literal or literal.value is not value:
                    break
            else:
                return values
        values = self.fold(evaluator, frame, (), deadline)
        _read_only(values)
        self.literals = [(i.literal, i.literal.value) for i in self.constants]
        self.values = values
        return values


def _read_only(values: tuple) -> None:
    """Mark the arrays of values kept between runs read-only: nothing may write into them."""
    for value in values:
        if type(value) in (Replicated, PerDevice) and value.array.flags.writeable:
            value.array.flags.writeable = False


class _PerFrame:
    """The values a plan computes from constants and the device ids alone (``_foldable``),
    kept per frame: the rows' device ids and the topology's replica and partition counts are
    all that the id ops read. The plan asks ``find`` and, when nothing is kept, computes them
    and hands them to ``keep``. The last frame is recognised by identity (a while loop's body
    runs for one frame on every iteration), the others by their ids' bytes; a few frames are
    kept (the branches of a device-dependent conditional run for subsets of the rows), and
    values larger than ``PER_FRAME_MAX_BYTES`` are computed on every run instead of being held
    after it. Kept arrays are read-only, as ``_Kept``'s."""

    __slots__ = ("frames", "last")

    FRAMES = 8

    def __init__(self) -> None:
        self.frames: dict[tuple, tuple[tuple, tuple]] = {}
        self.last: tuple | None = None

    def find(self, evaluator: Any, frame: Any, inputs: tuple) -> tuple | None:
        """The values kept for this frame and these kept inputs, or None."""
        devices = frame.devices
        if devices is None:  # rows of elements: the id ops report that they have no device
            return None
        topology = evaluator.topology
        last = self.last
        if last is not None and last[0] is devices and last[1] is topology and \
                _same_objects(last[2], inputs):
            return last[3]
        entry = self.frames.get(_frame_key(topology, devices))
        if entry is None or not _same_objects(entry[0], inputs):
            return None
        self.last = (devices, topology, inputs, entry[1])
        return entry[1]

    def keep(self, evaluator: Any, frame: Any, inputs: tuple, values: tuple) -> tuple:
        """Keep ``values``, just computed for this frame (unless too large); returns them."""
        devices = frame.devices
        if devices is None or sum(_nbytes(v) for v in values) > PER_FRAME_MAX_BYTES:
            return values
        _read_only(values)
        if len(self.frames) >= self.FRAMES:
            try:  # the oldest frame; another thread may have just removed it
                del self.frames[next(iter(self.frames))]
            except (KeyError, RuntimeError, StopIteration):
                pass
        topology = evaluator.topology
        self.frames[_frame_key(topology, devices)] = (inputs, values)
        self.last = (devices, topology, inputs, values)
        return values


def _frame_key(topology: Any, devices: np.ndarray) -> tuple:
    return (topology.replica_count, topology.num_partitions, devices.tobytes())


# Values computed from the device ids held between runs, at most this many bytes per frame.
PER_FRAME_MAX_BYTES = 1 << 20


def _same_objects(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _nbytes(value: Any) -> int:
    return sum(leaf.array.nbytes for leaf in leaves(value)
               if type(leaf) in (Replicated, PerDevice))


def _write_function(computation: HloComputation, nodes: list[_Node], builder: _Builder,
                    returns: list[int], parameters: dict[int, HloInstruction],
                    counted: int | None, prologue: list[str], extra: dict[str, Any],
                    kept: set[int], framed: tuple[int, list[int], list[int]] | None = None
                    ) -> tuple[str, dict[str, Any]]:
    """Source of ``run(ev, frame, args, dl)`` executing ``nodes`` and returning the variable
    ``returns[0]`` (with ``counted``: the plan, counting its instructions), or the tuple of
    ``returns`` (without: the constants' part, ``_Kept``'s). ``framed``: the first ``count``
    nodes compute the values of the device ids (``_PerFrame``), from the kept ``inputs`` to
    the ``results`` the rest reads; they run only when those are not kept for the frame."""
    _groups(nodes, builder, kept, framed[0] if framed else 0)
    namespace: dict[str, Any] = {
        "R": Replicated, "P": PerDevice, "TV": TupleValue, "TOKEN": TOKEN, "ndarray": np.ndarray,
        "asarray": np.asarray, "mono": time.monotonic, "InterpreterError": InterpreterError,
        "ExecutionError": ExecutionError, "wrap": wrap_array, "wrap_any": _wrap_any,
        "unbatched": _unbatched_args, "donate": _donating_call, "gte_error": _gte_error,
        "params_error": _parameters_error, "COMP": computation, "OpContext": OpContext,
        "unimplemented": _missing, "RP": (Replicated, PerDevice), "NotDefined": NotDefined,
        "not_defined": not_defined, "named": _named, "general": _general,
        "wrong_count": _wrong_count,
        "KERNELS": frozenset(p for p, node in enumerate(nodes) if node.kind == "kernel"),
        **extra}
    insts = [node.inst for node in nodes]
    namespace["INSTS"] = insts

    last_use: dict[int, int] = {}
    for position, node in enumerate(nodes):
        for var in node.ins:
            last_use[var] = position
    # Variables used after their group by a step outside it must exist as values.
    group_of = {node.out: node.group for node in nodes if node.kind in _GROUPED}
    needed_as_value: set[int] = set(returns)
    for node in nodes:
        for var in node.ins:
            if var in group_of and (node.kind not in _GROUPED or node.group != group_of[var]):
                needed_as_value.add(var)
    dead_after: dict[int, list[int]] = {}
    for var, position in last_use.items():
        if var not in returns:
            dead_after.setdefault(position, []).append(var)

    parameter_count = 1 + max((p.parameter_number for p in parameters.values()), default=-1)
    lines = ["def run(ev, frame, args, dl):"]
    add = lines.append
    if parameter_count:
        add(f"    if len(args) < {parameter_count}: params_error(COMP, args)")
    for var, inst in parameters.items():
        add(f"    v{var} = args[{inst.parameter_number}]")
    if counted is not None:
        add(f"    ev.instructions_executed += {counted}")
        add(f"    if frame.devices is not None: ev.device_instructions += {counted} * frame.n")
    lines.extend("    " + line for line in prologue)
    result = f"v{returns[0]}" if counted is not None else \
        "(" + "".join(f"v{v}, " for v in returns) + ")"
    if not nodes:
        add(f"    return {result}")
        return "\n".join(lines) + "\n", namespace
    add("    at = dl.at if dl is not None else None")
    add("    n = frame.n")
    add("    s = 0")
    add("    try:")
    body: list[str] = []
    position = 0
    if framed:
        count, inputs, results = framed
        kept_inputs = "(" + "".join(f"v{v}, " for v in inputs) + ")"
        targets = "".join(f"v{v}, " for v in results)  # none when every such value is dead
        # The inputs are held from the start: the block deletes each at its last use.
        body.append(f"fi = {kept_inputs}")
        body.append("f = FRAMED.find(ev, frame, fi)")
        body.append("if f is None:")
        block: list[str] = []
        _write_steps(block, namespace, nodes, 0, count, builder, last_use, needed_as_value,
                     dead_after)
        position = count
        block.append(f"f = FRAMED.keep(ev, frame, fi, ({targets}))")
        body.extend("    " + line for line in block)
        if targets:
            body.append(f"{targets}= f")
        body.append("del f, fi")
    _write_steps(body, namespace, nodes, position, len(nodes), builder, last_use,
                 needed_as_value, dead_after)
    lines.extend("        " + line for line in body)
    add("    except InterpreterError as error:")
    add("        if s >= 0: error.attach(INSTS[s])")
    add("        raise")
    add("    except NotDefined as undefined:")
    add("        if s in KERNELS: "
        "raise named(not_defined(INSTS[s], undefined), INSTS[s]) from None")
    add("        raise ExecutionError.wrapping(undefined, INSTS[s]) from undefined")
    add("    except Exception as error:")
    add("        raise ExecutionError.wrapping(error, INSTS[s]) from error")
    add(f"    return {result}")
    return "\n".join(lines) + "\n", namespace


def _write_steps(body: list[str], namespace: dict[str, Any], nodes: list[_Node], start: int,
                 end: int, builder: _Builder, last_use: dict[int, int],
                 needed_as_value: set[int], dead_after: dict[int, list[int]]) -> None:
    """The source of ``nodes[start:end]`` (groups of elementwise ops as one run)."""
    position = start
    while position < end:
        node = nodes[position]
        if node.kind in _GROUPED:
            stop = position
            while stop < end and nodes[stop].kind in _GROUPED and \
                    nodes[stop].group == node.group:
                stop += 1
            _write_group(body, namespace, nodes, position, stop, builder, last_use,
                         needed_as_value, dead_after)
            position = stop
            continue
        _write_step(body, namespace, node, position, builder, last_use)
        for var in dead_after.get(position, ()):
            body.append(f"del v{var}")
        position += 1


def _check(body: list[str], position: int) -> None:
    body.append(f"s = {position}")
    body.append("if at is not None and mono() > at: s = -1; dl.check()")


def _write_step(body: list[str], namespace: dict[str, Any], node: _Node, position: int,
                builder: _Builder, last_use: dict[int, int]) -> None:
    i = position
    _check(body, i)
    ins = ", ".join(f"v{v}" for v in node.ins)
    out = f"v{node.out}"
    kind = node.kind
    if kind == "const":
        namespace[f"C{i}"] = OpContextless(node.inst)
        namespace[f"F{i}"] = REGISTRY[Opcode.CONSTANT].fn
        body.append(f"{out} = F{i}(C{i})")
    elif kind == "tuple":
        body.append(f"{out} = TV([{ins}])")
    elif kind == "gte":
        (var,) = node.ins
        body.append(f"{out} = v{var}.elements[{node.data}] if type(v{var}) is TV else "
                    f"gte_error()")
    elif kind == "value":
        namespace[f"F{i}"] = node.data
        body.append(f"{out} = F{i}(OpContext(ev, INSTS[{i}], frame){', ' if ins else ''}{ins})")
    elif kind == "missing":
        body.append(f"{out} = unimplemented(INSTS[{i}])")
    elif kind == "donor":
        # A direct op on an operand it may write into (its donors): the evaluator's call, which
        # looks at reference counts; nothing here may hold another reference to the operands.
        namespace[f"U{i}"] = node.data
        namespace[f"D{i}"] = node.donors
        body.append(f"{out} = donate(ev, U{i}, [{ins}], frame, D{i}, INSTS[{i}])")
    elif kind == "movement":
        fn, dtype, dims = node.data
        namespace[f"B{i}"] = fn
        namespace[f"T{i}"] = dtype
        namespace[f"S{i}"] = dims
        (var,) = node.ins
        body.append(f"o = v{var}")
        body.append(f"if type(o) is R: {out} = wrap(B{i}(o.array[None]), True, n, T{i}, S{i})")
        body.append(f"elif type(o) is P: {out} = wrap(B{i}(o.array), False, n, T{i}, S{i})")
        body.append(f"else: {out} = general(ev, INSTS[{i}], [o], frame)")
        body.append("del o")
    elif kind == "array":
        fn, dtype, dims = node.data
        namespace[f"F{i}"] = fn
        namespace[f"T{i}"] = dtype
        namespace[f"S{i}"] = dims
        body.append(f"r, rep = unbatched([{ins}])")
        body.append(f"{out} = wrap(F{i}(OpContext(ev, INSTS[{i}], frame), *r), rep, n, T{i}, "
                    f"S{i})")
    elif kind == "bound":
        # An op bound when the plan was built (``BoundOp``): its batched results wrapped
        # against the bound shape, one per element of a tuple.
        fn, leaves, is_tuple = node.data
        namespace[f"F{i}"] = fn
        for k, (dtype, dims) in enumerate(leaves):
            namespace[f"T{i}_{k}"] = dtype
            namespace[f"S{i}_{k}"] = dims
        _write_operands(body, node.ins)
        if is_tuple:
            body.append(f"o = F{i}(*r)")
            body.append(f"if len(o) != {len(leaves)}: o = wrong_count(o, {len(leaves)})")
            wrapped = ", ".join(f"wrap(o[{k}], rep, n, T{i}_{k}, S{i}_{k})"
                                for k in range(len(leaves)))
            body.append(f"{out} = TV([{wrapped}])")
            body.append("del o")
        else:
            body.append(f"{out} = wrap(F{i}(*r), rep, n, T{i}_0, S{i}_0)")
    else:  # array op with a tuple or token shape
        namespace[f"F{i}"] = node.data
        body.append(f"r, rep = unbatched([{ins}])")
        body.append(f"{out} = wrap_any(INSTS[{i}], F{i}(OpContext(ev, INSTS[{i}], frame), "
                    f"*r), rep, n)")


def _write_operands(body: list[str], variables: list[int]) -> None:
    """``r, rep = unbatched([...])`` of a bound op's operands, with the values held once (a
    reduce's operands and inits are often all replicated) taken without the call: their
    arrays with a row axis, in one tuple."""
    names = [f"v{v}" for v in variables]
    if not names:
        body.append("r, rep = [], True")
        return
    held_once = " and ".join(f"type({name}) is R" for name in names)
    rows = "".join(f"{name}.array[None], " for name in names)
    body.append(f"if {held_once}: r = ({rows}); rep = True")
    body.append(f"else: r, rep = unbatched([{', '.join(names)}])")


def _write_group(body: list[str], namespace: dict[str, Any], nodes: list[_Node], start: int,
                 end: int, builder: _Builder, last_use: dict[int, int],
                 needed_as_value: set[int], dead_after: dict[int, list[int]]) -> None:
    """A run of elementwise ops: one type test per outside input, then the ufuncs and kernels
    on batched arrays (``[1, *dims]`` for a replicated value, ``[n, *dims]`` per device, what
    the registered ops receive), a value made only of a result read after the run."""
    members = [(start + offset, node) for offset, node in enumerate(nodes[start:end])]
    produced = {node.out for _, node in members}
    inputs: list[int] = []
    for _, node in members:
        for var in node.ins:
            if var not in produced and var not in inputs:
                inputs.append(var)
    # support[var]: the outside inputs a member's value depends on (replicated iff all are)
    support: dict[int, frozenset[int]] = {var: frozenset((var,)) for var in inputs}
    for _, node in members:
        support[node.out] = frozenset().union(*(support[v] for v in node.ins))
    fresh: set[int] = set()  # results of ufuncs: new arrays no one else holds
    alive = set(produced)
    first = members[0][0]
    _check(body, first)
    test = " and ".join(f"type(v{v}) in RP" for v in inputs) or "True"
    body.append(f"if {test}:")
    inner: list[str] = []
    for var in inputs:
        inner.append(f"r{var} = type(v{var}) is R")
        inner.append(f"a{var} = v{var}.array[None] if r{var} else v{var}.array")
    for position, node in members:
        i = position
        if position != first:
            inner.append(f"s = {i}")  # the run is one step: one deadline check before it
        args = ", ".join(f"a{v}" for v in node.ins)
        flag = _flag(support[node.out])
        out = f"a{node.out}"
        if node.kind == "kernel":
            kernel, dtype = node.data
            namespace[f"K{i}"] = kernel
            namespace[f"T{i}"] = dtype
            inner.append(f"{out} = K{i}({args})")
            inner.append(f"if {out}.dtype != T{i}: {out} = {out}.astype(T{i})")
        else:
            namespace[f"U{i}"] = node.data
            # An intermediate of this run that dies here and has this result's shape takes it.
            target = condition = None
            for var in node.ins:
                if var in fresh and last_use.get(var) == position and \
                        var not in needed_as_value:
                    if support[var] == support[node.out]:
                        target, condition = var, None
                        break
                    if target is None:
                        # The same shape unless it is replicated and the result is not.
                        target, condition = var, f"not {_flag(support[var])} or {flag}"
            if target is None:
                inner.append(f"{out} = U{i}({args})")
            elif condition is None:
                inner.append(f"{out} = U{i}({args}, out=a{target})")
            else:
                inner.append(f"{out} = U{i}({args}, out=a{target}) if {condition} else "
                             f"U{i}({args})")
            fresh.add(node.out)
        if node.out in needed_as_value:
            inner.append(f"v{node.out} = R({out}[0]) if {flag} else P({out})")
        for var in dead_after.get(position, ()):
            if var in produced:
                inner.append(f"del a{var}")
                alive.discard(var)
            if var not in produced or var in needed_as_value:
                inner.append(f"del v{var}")
    # No raw array outlives the run: the values hold what later steps read.
    for var in inputs + sorted(alive):
        inner.append(f"del a{var}")
    body.extend("    " + line for line in inner)
    # Not every input is an array value: each op by the registered implementation, which
    # reports it.
    body.append("else:")
    slow: list[str] = []
    for position, node in members:
        slow.append(f"s = {position}")
        ins = ", ".join(f"v{v}" for v in node.ins)
        slow.append(f"v{node.out} = general(ev, INSTS[{position}], [{ins}], frame)")
    for position, node in members:
        for var in dead_after.get(position, ()):
            slow.append(f"del v{var}")
    body.extend("    " + line for line in slow)


def _flag(support: frozenset[int]) -> str:
    return "(" + " and ".join(f"r{v}" for v in sorted(support)) + ")" if support else "True"


# ---------------------------------------------------------------------------------------------
# Helpers the plans call.

class OpContextless:
    """What the constant op reads of its context: the instruction only."""

    __slots__ = ("inst",)

    def __init__(self, inst: HloInstruction) -> None:
        self.inst = inst


def _unbatched_args(values: list) -> tuple[list[np.ndarray], bool]:
    """The operands as batched arrays, and whether all are replicated."""
    arrays = []
    replicated = True
    for value in values:
        kind = type(value)
        if kind is Replicated:
            arrays.append(value.array[None])
        elif kind is PerDevice:
            arrays.append(value.array)
            replicated = False
        else:
            raise InterpreterError(f"operand {len(arrays)} is {value!r}, not an array")
    return arrays, replicated


def _wrap_any(inst: HloInstruction, result: Any, replicated: bool, n: int):
    return wrap_result(inst.shape, result, replicated, n)


def _donating_call(evaluator: Any, ufunc: Any, args: list, frame: Any,
                   donors: tuple[int, ...], inst: HloInstruction):
    """A direct op by the evaluator's donating call (not counted again); the general path of
    the op if an operand is not an array value."""
    result = evaluator._direct_call(ufunc, args, donors)
    if result is None:
        evaluator.instructions_executed -= 1  # _execute counts it again
        if frame.devices is not None:
            evaluator.device_instructions -= frame.n
        return evaluator._execute(inst, REGISTRY.get(inst.opcode), args, frame)
    return result


def _general(evaluator: Any, inst: HloInstruction, args: list, frame: Any):
    """``inst`` by its registered implementation (not counted again)."""
    evaluator.instructions_executed -= 1  # _execute counts it again
    if frame.devices is not None:
        evaluator.device_instructions -= frame.n
    return evaluator._execute(inst, REGISTRY.get(inst.opcode), args, frame)


def _named(error: InterpreterError, inst: HloInstruction) -> InterpreterError:
    error.attach(inst)
    return error


def _wrong_count(result: Any, count: int) -> Any:
    raise InterpreterError(f"internal error: op returned {len(result)} results for a tuple of "
                           f"{count}")


def _gte_error() -> Any:
    raise InterpreterError("get-tuple-element of a non-tuple value")


def _missing(inst: HloInstruction) -> Any:
    raise Unimplemented(inst.opcode.spelling)


def _parameters_error(computation: HloComputation, args: Any) -> None:
    for inst in computation.parameters:
        if inst.parameter_number >= len(args):
            raise InterpreterError(
                f"computation {computation.name} has parameter {inst.parameter_number} but "
                f"was called with {len(args)} arguments", inst)


__all__ = ["INLINE_LIMIT", "Plan", "compile_plan", "plan_for"]
