"""What one collective kind is, as data: the ``CollectiveDescriptor`` and the enums it uses.

A descriptor answers, for one kind (all-reduce, all-gather...), every question the layers used
to answer with their own if-chain on opcodes: which opcodes run it and what its async start
returns, how the checker derives its result shape, whether it folds with ``to_apply``, which
attribute names its dimension, how its peers are named (docs/semantics.md §2), what each device
receives (a pure numpy function of the group's operands, docs/semantics.md §3), what the
symbolic evaluator does with it, which MPI pattern the native backend runs, and what a device's
result depends on. The descriptors themselves are listed once, in ``kinds``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape, TupleShape
from neuron_sim.records import Record

__all__ = ["CollectiveArgs", "CollectiveDescriptor", "Dependence", "GroupModeRow",
           "GroupReading", "MpiPattern", "ShapeRule", "ShapeRuleError", "ShardDirection",
           "StartForm", "SymbolicForm"]


class StartForm(enum.Enum):
    """What an async ``-start`` returns, and so what its ``-done`` yields."""

    RESULT = "result"
    """The result itself; the done passes it on (all-reduce-start)."""
    WRAPPED = "wrapped"
    """``(operands, result, context...)``; the done yields element 1 (all-gather-start,
    collective-permute-start). The operand part is one operand or a tuple of several; the
    context elements are backend-defined buffers (zeros here)."""


class GroupReading(enum.Enum):
    """Which attribute names the devices a collective talks to."""

    REPLICA_GROUPS = "replica_groups"
    SOURCE_TARGET_PAIRS = "source_target_pairs"


class GroupModeRow(enum.Enum):
    """The row of the group-mode table (docs/semantics.md §2) an opcode is read by."""

    GLOBAL_DEVICE_IDS = "global device ids"
    """all-reduce(-start), all-gather(-start), reduce-scatter: no channel_id is CrossReplica,
    a channel_id CrossReplicaAndPartition, use_global_device_ids=true FlattenedID."""
    CHANNEL_ONLY = "channel only"
    """all-to-all, ragged-all-to-all, collective-permute(-start), collective-broadcast: no
    channel_id is CrossReplica, a channel_id CrossPartition; no use_global_device_ids."""


class Dependence(enum.Enum):
    """Whose operands a device's result depends on (what an exchange must bring it)."""

    WHOLE_GROUP = "whole group"
    """Every member of its participant group."""
    GROUP_ROOT = "group root"
    """Position 0 of its group (collective-broadcast)."""
    PAIR_SOURCE = "pair source"
    """The source of the pair that targets it, if any (collective-permute)."""


class SymbolicForm(enum.Enum):
    """What the symbolic evaluator does with an input-dependent operand of the kind."""

    MOVE_HANDLES = "move handles"
    """The data function runs on term handles as on numbers: data moves, no term is made."""
    FOLD_MULTISET = "fold multiset"
    """The reduction folds each group's positions into one term: a multiset term when
    ``to_apply`` is a reassociable binary op, else the computation applied to handles."""


class MpiPattern(enum.Enum):
    """The MPI operation the native MPI backend moves the kind's data with (its value names it)."""

    ALLREDUCE = "Iallreduce"
    REDUCE_SCATTER = "Ireduce_scatter"
    ALLGATHERV = "Iallgatherv"
    ALLTOALLV = "Ialltoallv"
    SEND_RECV = "Isend/Irecv"
    BCAST = "Ibcast"


class ShardDirection(enum.Enum):
    """How the dimension a collective names relates the result to the operand."""

    GATHER = "gather"
    """The result's dimension is the group size times the operand's (all-gather)."""
    SCATTER = "scatter"
    """The result's dimension is the operand's divided by the group size (reduce-scatter)."""


class ShapeRuleError(ValueError):
    """An operand shape a collective cannot take; the message says why (the checker adds which
    instruction)."""


ShapeRule = Callable[[Sequence[Shape], "int | None", int], Shape]
"""(operand shapes, dimension or None, group size) -> the synchronous result shape."""


class CollectiveArgs(Record):
    """What a data function reads besides the operands, for one call.

    ``groups`` are ordered participant groups and ``pairs`` (source, target) pairs, both in row
    indices of the stacked operands; ``dim`` is the dimension (None when the kind has none, or
    for the tuple form of all-to-all); ``combine`` is the elementwise reduction (a
    ``combine_many`` of tuples when ``variadic``), for the kinds that reduce. (A ``Record``, as
    the descriptor: a frozen dataclass's behaviour without the cost of creating one.)
    """

    __slots__ = ("groups", "pairs", "dim", "combine", "variadic")

    groups: Sequence[Sequence[int]]
    pairs: Sequence[tuple[int, int]]
    dim: int | None
    combine: Callable[..., Any] | None
    variadic: bool

    def __init__(self, groups: Sequence[Sequence[int]] = (),
                 pairs: Sequence[tuple[int, int]] = (), dim: int | None = None,
                 combine: Callable[..., Any] | None = None, variadic: bool = False) -> None:
        self._set(groups=groups, pairs=pairs, dim=dim, combine=combine, variadic=variadic)


Results = Callable[[Sequence[np.ndarray], CollectiveArgs], list[np.ndarray]]
"""(operands stacked per device, args) -> the results stacked per device, one per result leaf."""

GroupResult = Callable[[np.ndarray, Sequence[int], CollectiveArgs], np.ndarray]
"""(an operand stacked per device, one group's rows in position order, args) -> what every
member of that group receives."""


class CollectiveDescriptor(Record):
    """One collective kind: everything the layers need to know about it, in one place.

    Opcodes: ``sync`` is the synchronous opcode (the kind a transport runs); ``start`` and
    ``done`` the async pair, if any, with ``start_form`` saying what the start returns.

    Shapes (the checker): ``shape_rule`` maps (operand shapes, dimension, group size) to the
    synchronous result shape, raising ``ShapeRuleError``; ``array_operands`` are the operands
    that must be arrays (None: every one), named by ``operand_roles`` in messages;
    ``dimension_attribute`` is the attribute holding the one dimension the kind splits or
    concatenates (None: it has none), and ``tuple_form`` says that without it the operands are
    the tuple form (all-to-all); ``shard_direction`` says how that dimension grows or shrinks;
    ``uniform_groups`` whether all participant groups must have one size.

    Groups: ``group_reading`` says which attribute names the peers and ``group_mode_row`` how
    its ids are read (docs/semantics.md §2).

    Data (docs/semantics.md §3): ``results`` computes every device's results from the stacked
    operands; ``group_result``, for kinds whose group members all receive one value, computes
    that value once for one group. ``reduces`` says the kind folds with ``to_apply``;
    ``scatters`` that each position keeps only its block of the reduction. ``dependence`` says
    whose operands a device's result needs. ``results`` is None for a kind the interpreter
    does not execute yet.

    ``unexecuted`` names a form of the kind the data function does not compute (given the
    instruction; None when it computes every form).

    Elsewhere: ``symbolic`` is the symbolic evaluator's treatment, ``index_operands`` the
    operands that decide indexing (they must be concrete numbers there); ``mpi_pattern`` the
    MPI operation of the native backend (None: exact mode only); ``legalized`` whether XLA's
    DeviceAssignmentLegalization rewrites the sync op's groups or pairs to physical device ids
    (docs/passes.md: it refuses async starts, collective-broadcast and ragged-all-to-all), so
    whether a module may hold it with physical groups after that pass.

    A ``neuron_sim.records.Record``: compared and hashed field by field and read-only, as a
    frozen dataclass, whose creation cost every program with a collective about a millisecond.
    """

    __slots__ = ("name", "sync", "group_reading", "group_mode_row", "shape_rule", "results",
                 "dependence", "symbolic", "mpi_pattern", "start", "done", "start_form",
                 "uniform_groups", "reduces", "scatters", "dimension_attribute", "tuple_form",
                 "shard_direction", "group_result", "array_operands", "operand_roles",
                 "index_operands", "unexecuted", "legalized")

    name: str
    sync: Opcode
    group_reading: GroupReading
    group_mode_row: GroupModeRow
    shape_rule: ShapeRule
    results: Results | None
    dependence: Dependence
    symbolic: SymbolicForm
    mpi_pattern: MpiPattern | None
    start: Opcode | None
    done: Opcode | None
    start_form: StartForm | None
    uniform_groups: bool
    reduces: bool
    scatters: bool
    dimension_attribute: str | None
    tuple_form: bool
    shard_direction: ShardDirection | None
    group_result: GroupResult | None
    array_operands: tuple[int, ...] | None
    operand_roles: tuple[str, ...]
    index_operands: tuple[int, ...]
    unexecuted: Callable[[Any], "str | None"] | None
    legalized: bool

    def __init__(self, name: str, sync: Opcode, group_reading: GroupReading,
                 group_mode_row: GroupModeRow, shape_rule: ShapeRule, results: Results | None,
                 dependence: Dependence, symbolic: SymbolicForm,
                 mpi_pattern: MpiPattern | None, start: Opcode | None = None,
                 done: Opcode | None = None, start_form: StartForm | None = None,
                 uniform_groups: bool = True, reduces: bool = False, scatters: bool = False,
                 dimension_attribute: str | None = None, tuple_form: bool = False,
                 shard_direction: ShardDirection | None = None,
                 group_result: GroupResult | None = None,
                 array_operands: tuple[int, ...] | None = None,
                 operand_roles: tuple[str, ...] = (), index_operands: tuple[int, ...] = (),
                 unexecuted: Callable[[Any], "str | None"] | None = None,
                 legalized: bool = False) -> None:
        self._set(name=name, sync=sync, group_reading=group_reading,
                  group_mode_row=group_mode_row, shape_rule=shape_rule, results=results,
                  dependence=dependence, symbolic=symbolic, mpi_pattern=mpi_pattern,
                  start=start, done=done, start_form=start_form, uniform_groups=uniform_groups,
                  reduces=reduces, scatters=scatters, dimension_attribute=dimension_attribute,
                  tuple_form=tuple_form, shard_direction=shard_direction,
                  group_result=group_result, array_operands=array_operands,
                  operand_roles=operand_roles, index_operands=index_operands,
                  unexecuted=unexecuted, legalized=legalized)
        if (start is None) != (done is None) or (start is None) != (start_form is None):
            raise ValueError(f"{name}: start, done and start_form go together")

    @property
    def opcodes(self) -> tuple[Opcode, ...]:
        """The opcodes that run the collective: the synchronous one and the async start."""
        return (self.sync,) if self.start is None else (self.sync, self.start)

    @property
    def all_opcodes(self) -> tuple[Opcode, ...]:
        """Every opcode of the kind: sync, start and done."""
        return self.opcodes if self.done is None else (*self.opcodes, self.done)

    @property
    def executable(self) -> bool:
        """Whether the interpreter executes the kind (it has a data function)."""
        return self.results is not None

    def unexecuted_form(self, inst: Any) -> str | None:
        """What form of the kind ``inst`` takes that the data function does not compute (for
        the "does not implement" error), or None."""
        return None if self.unexecuted is None else self.unexecuted(inst)

    def wraps(self, opcode: Opcode) -> bool:
        """Whether ``opcode`` is this kind's start and returns ``(operands, result, ...)``."""
        return opcode is self.start and self.start_form is StartForm.WRAPPED

    def result_shape(self, opcode: Opcode, shape: Shape) -> Shape:
        """The part of an instruction's ``shape`` that holds the collective's result: element 1
        of a wrapped start's tuple, else the shape itself."""
        if self.wraps(opcode):
            if not isinstance(shape, TupleShape) or len(shape.elements) < 2:
                raise ValueError(f"{opcode.spelling} returns (operands, result, ...), not {shape}")
            return shape.elements[1]
        return shape

    def dimension(self, attrs: dict[str, Any]) -> int | None:
        """The dimension named by an instruction's attributes ``attrs`` (None when the kind has
        no dimension, or for the tuple form)."""
        if self.dimension_attribute is None:
            return None
        dims = attrs.get(self.dimension_attribute)
        return dims[0] if dims else None

    def __repr__(self) -> str:
        return f"CollectiveDescriptor({self.name})"
