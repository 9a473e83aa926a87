"""Building HLO in code: instructions whose shapes the checker's rules infer.

After XLA's ``HloComputation::Builder`` and ``XlaBuilder``, in Python::

    m = ModuleBuilder("fold", replica_count=1, num_partitions=4)
    s = m.computation("sum")
    a, b = s.parameter(0, "f32[]", "a"), s.parameter(1, "f32[]", "b")
    total = s.build(s.add(a, b))
    e = m.computation("main")
    x = e.parameter(0, "f32[8,4]", "x")
    e.all_reduce(x, to_apply=total, replica_groups=[[0, 1, 2, 3]], channel_id=1,
                 use_global_device_ids=True)
    module = m.build(e.build())

Every instruction's shape comes from the same rule ``neuron_sim.hlo.checker`` verifies it with
(``neuron_sim.hlo.checks``): inferring gives the shape, checking compares a declared shape with
it. A shape is given only where the instruction alone can tell it (parameters, constants,
reshape and broadcast dims, convert's element type, iota, custom-calls); a given shape must
agree with what the rule infers. Shapes get XLA's default layout unless one is written, so a
built module prints as XLA dumps it, and the parser reads the text back to an equal module.

``make_instruction`` is the same for passes: a new instruction for an existing computation,
shape inferred, ready for ``HloComputation.replace_instruction`` or ``add_before``.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from neuron_sim.hlo.attributes import PadDim, SliceDim
from neuron_sim.hlo.checker import HloCheckError, check_module, check_operand_count, infer_shape
from neuron_sim.hlo.dtypes import ElementType
from neuron_sim.hlo.ir import HloComputation, HloError, HloInstruction, HloModule, unique_name
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.parser import parse_module, parse_shape
from neuron_sim.hlo.replica_groups import ReplicaGroups, SourceTargetPairs
from neuron_sim.hlo.shapes import ArrayShape, Layout, Shape, TupleShape
from neuron_sim.topology import Topology

__all__ = ["ComputationBuilder", "ModuleBuilder", "make_instruction"]

ShapeLike = Shape | str
Operands = Sequence[HloInstruction]


def as_shape(shape: ShapeLike) -> Shape:
    """``shape`` itself, or parsed from text such as ``"f32[8,4]"``; arrays without a written
    layout get XLA's default one (the last dimension most minor)."""
    return with_layouts(parse_shape(shape) if isinstance(shape, str) else shape)


def with_layouts(shape: Shape) -> Shape:
    """``shape`` with the default layout on every array leaf that has none."""
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(with_layouts(s) for s in shape.elements))
    if shape.layout is None and shape.rank and shape.is_array:
        return ArrayShape(shape.element_type, shape.dims, Layout.default(shape.rank),
                          shape.dynamic)
    return shape


def _typed_attribute(name: str, value: Any) -> Any:
    """The IR's typed form of an attribute given in a convenient Python form (lists of ints,
    lists of groups or pairs)."""
    if name == "replica_groups" and not isinstance(value, ReplicaGroups):
        return ReplicaGroups.explicit(value)
    if name == "source_target_pairs" and not isinstance(value, SourceTargetPairs):
        return SourceTargetPairs(tuple(tuple(pair) for pair in value))
    if isinstance(value, list):
        return tuple(value)
    return value


def _operand_text(opcode: Opcode, operands: Operands) -> str:
    return f"{opcode.spelling}({', '.join('%' + op.name for op in operands)})"


def new_instruction(opcode: Opcode, operands: Operands, *, name: str, topology: Topology,
                    shape: Shape | None = None, computation: str | None = None,
                    check: bool = True, literal: Literal | None = None,
                    parameter_number: int | None = None,
                    attributes: dict[str, Any] | None = None) -> HloInstruction:
    """An instruction not yet in any computation, its shape inferred by the checker's rule for
    ``opcode`` (with the default layout), or ``shape`` as given, which must match the inferred
    one unless ``check`` is False. Raises HloCheckError naming ``computation`` and the
    instruction being built."""
    declared = shape
    attrs = {key: _typed_attribute(key, value) for key, value in (attributes or {}).items()}
    inst = HloInstruction(name, opcode, declared, operands, attrs, literal=literal,
                          parameter_number=parameter_number)
    if declared is not None and not check:
        return inst
    text = f"building %{name} = {_operand_text(opcode, operands)}"
    try:
        check_operand_count(inst)
        inferred = infer_shape(inst, topology)
    except HloCheckError as exc:
        inst.drop_operands()
        raise HloCheckError(exc.reason, computation=computation, instruction=name,
                            instruction_text=text) from None
    if declared is not None and not inferred.compatible(declared):
        inst.drop_operands()
        raise HloCheckError(f"the given shape {declared.without_layout()} does not match the "
                            f"inferred shape {inferred.without_layout()}",
                            computation=computation, instruction=name, instruction_text=text)
    inst.shape = declared if declared is not None else with_layouts(inferred)
    return inst


def _module_topology(module: HloModule | None) -> Topology:
    if module is None:
        return Topology()
    return Topology(module.replica_count, module.num_partitions)


def make_instruction(computation: HloComputation, opcode: Opcode, operands: Operands = (), *,
                     shape: ShapeLike | None = None, name: str | None = None,
                     check: bool = True, literal: Literal | None = None,
                     parameter_number: int | None = None, **attributes: Any) -> HloInstruction:
    """A new instruction for ``computation`` (not added yet), its shape inferred on the
    topology of the module header. A given ``shape`` is kept as is, layout included (a pass
    copying an existing shape keeps the module's style); ``check=False`` skips comparing it
    with the inferred one: for a seed pass that copies a shape without verifying it, which is
    what the verifier must expose. A parameter takes its ``parameter_number``, a constant its
    ``literal``."""
    for operand in operands:
        if operand.parent is not computation:
            raise HloError(f"%{operand.name} is not in computation {computation.name}")
    declared = parse_shape(shape) if isinstance(shape, str) else shape
    return new_instruction(opcode, operands, name=name or opcode.spelling,
                           topology=_module_topology(computation.parent), shape=declared,
                           computation=computation.name, check=check, literal=literal,
                           parameter_number=parameter_number, attributes=attributes)


class ComputationBuilder:
    """Builds one computation instruction by instruction; ``build(root)`` finishes it.

    Made by ``ModuleBuilder.computation`` (names unique in the module, collectives checked on
    its replica and partition counts) or on its own with a ``topology``.
    """

    def __init__(self, name: str, *, topology: Topology | None = None,
                 module: ModuleBuilder | None = None) -> None:
        self.computation = HloComputation(name)
        self.module = module
        self.topology = topology or (module.topology if module is not None else Topology())
        self._built = False

    # -- the one way in ----------------------------------------------------------------------
    def instruction(self, opcode: Opcode, operands: Operands = (), *,
                    shape: ShapeLike | None = None, name: str | None = None,
                    **attributes: Any) -> HloInstruction:
        """Append any instruction; attributes are keyword arguments in their IR form
        (``dimensions=(0,)``, ``to_apply=comp``, ``replica_groups=[[0, 1]]``...)."""
        return self._add(opcode, operands, shape=shape, name=name, attributes=attributes)

    def _add(self, opcode: Opcode, operands: Operands, *, shape: ShapeLike | None = None,
             name: str | None = None, literal: Literal | None = None,
             parameter_number: int | None = None,
             attributes: dict[str, Any] | None = None) -> HloInstruction:
        if self._built:
            raise HloError(f"computation {self.computation.name} is already built")
        for operand in operands:
            if operand.parent is not self.computation:
                raise HloError(f"%{operand.name} is not in computation {self.computation.name}")
        inst = new_instruction(opcode, operands, name=self._unique(name or opcode.spelling),
                               topology=self.topology,
                               shape=as_shape(shape) if shape is not None else None,
                               computation=self.computation.name, literal=literal,
                               parameter_number=parameter_number, attributes=attributes)
        return self.computation.add(inst)

    def _unique(self, hint: str) -> str:
        taken = {inst.name for inst in self.computation.instructions}
        if self.module is not None:
            taken |= {inst.name for inst in self.module.module.instructions()}
        return unique_name(hint, taken)

    # -- sources -----------------------------------------------------------------------------
    def parameter(self, number: int, shape: ShapeLike, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.PARAMETER, (), shape=shape, name=name or f"p{number}",
                         parameter_number=number)

    def constant(self, value: Any, shape: ShapeLike, name: str | None = None) -> HloInstruction:
        """A constant holding ``value`` (a number, nested lists or a numpy array) as ``shape``."""
        literal_shape = as_shape(shape)
        return self._add(Opcode.CONSTANT, (), shape=literal_shape, name=name or "constant",
                         literal=Literal.from_array(literal_shape, value))

    def iota(self, shape: ShapeLike, dimension: int, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.IOTA, (), shape=shape, name=name,
                         attributes={"iota_dimension": dimension})

    def replica_id(self, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.REPLICA_ID, (), name=name)

    def partition_id(self, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.PARTITION_ID, (), name=name)

    # -- elementwise -------------------------------------------------------------------------
    def unary(self, opcode: Opcode, x: HloInstruction, name: str | None = None) -> HloInstruction:
        return self._add(opcode, (x,), name=name)

    def binary(self, opcode: Opcode, lhs: HloInstruction, rhs: HloInstruction,
               name: str | None = None) -> HloInstruction:
        return self._add(opcode, (lhs, rhs), name=name)

    def add(self, lhs: HloInstruction, rhs: HloInstruction,
            name: str | None = None) -> HloInstruction:
        return self.binary(Opcode.ADD, lhs, rhs, name)

    def subtract(self, lhs: HloInstruction, rhs: HloInstruction,
                 name: str | None = None) -> HloInstruction:
        return self.binary(Opcode.SUBTRACT, lhs, rhs, name)

    def multiply(self, lhs: HloInstruction, rhs: HloInstruction,
                 name: str | None = None) -> HloInstruction:
        return self.binary(Opcode.MULTIPLY, lhs, rhs, name)

    def divide(self, lhs: HloInstruction, rhs: HloInstruction,
               name: str | None = None) -> HloInstruction:
        return self.binary(Opcode.DIVIDE, lhs, rhs, name)

    def maximum(self, lhs: HloInstruction, rhs: HloInstruction,
                name: str | None = None) -> HloInstruction:
        return self.binary(Opcode.MAXIMUM, lhs, rhs, name)

    def compare(self, lhs: HloInstruction, rhs: HloInstruction, direction: str,
                name: str | None = None) -> HloInstruction:
        """``compare(lhs, rhs), direction=EQ|NE|LT|LE|GT|GE``: a pred array."""
        return self._add(Opcode.COMPARE, (lhs, rhs), name=name,
                         attributes={"direction": direction})

    def select(self, predicate: HloInstruction, on_true: HloInstruction,
               on_false: HloInstruction, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.SELECT, (predicate, on_true, on_false), name=name)

    def convert(self, x: HloInstruction, element_type: ElementType | str,
                name: str | None = None) -> HloInstruction:
        """``x``'s dims as ``element_type`` (an ElementType or its spelling, ``"s32"``)."""
        et = ElementType.from_spelling(element_type) if isinstance(element_type, str) \
            else element_type
        return self._add(Opcode.CONVERT, (x,), name=name, shape=ArrayShape(et, x.shape.dims))

    # -- shape -------------------------------------------------------------------------------
    def reshape(self, x: HloInstruction, shape: ShapeLike,
                name: str | None = None) -> HloInstruction:
        return self._add(Opcode.RESHAPE, (x,), shape=shape, name=name)

    def broadcast(self, x: HloInstruction, shape: ShapeLike, dimensions: Sequence[int],
                  name: str | None = None) -> HloInstruction:
        return self._add(Opcode.BROADCAST, (x,), shape=shape, name=name,
                         attributes={"dimensions": tuple(dimensions)})

    def transpose(self, x: HloInstruction, dimensions: Sequence[int],
                  name: str | None = None) -> HloInstruction:
        return self._add(Opcode.TRANSPOSE, (x,), name=name,
                         attributes={"dimensions": tuple(dimensions)})

    def slice(self, x: HloInstruction, starts: Sequence[int], limits: Sequence[int],
              strides: Sequence[int] | None = None, name: str | None = None) -> HloInstruction:
        strides = strides or [1] * len(starts)
        spec = tuple(SliceDim(*dim) for dim in zip(starts, limits, strides))
        return self._add(Opcode.SLICE, (x,), name=name, attributes={"slice": spec})

    def concatenate(self, operands: Operands, dimension: int,
                    name: str | None = None) -> HloInstruction:
        return self._add(Opcode.CONCATENATE, operands, name=name,
                         attributes={"dimensions": (dimension,)})

    def pad(self, x: HloInstruction, value: HloInstruction,
            padding: Sequence[tuple[int, int] | tuple[int, int, int]],
            name: str | None = None) -> HloInstruction:
        """``padding``: (low, high) or (low, high, interior) per dimension."""
        spec = tuple(PadDim(*dim) for dim in padding)
        return self._add(Opcode.PAD, (x, value), name=name, attributes={"padding": spec})

    def tuple(self, elements: Operands, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.TUPLE, elements, name=name)

    def get_tuple_element(self, x: HloInstruction, index: int,
                          name: str | None = None) -> HloInstruction:
        return self._add(Opcode.GET_TUPLE_ELEMENT, (x,), name=name, attributes={"index": index})

    # -- indexing ----------------------------------------------------------------------------
    def dynamic_slice(self, x: HloInstruction, starts: Operands, sizes: Sequence[int],
                      name: str | None = None) -> HloInstruction:
        return self._add(Opcode.DYNAMIC_SLICE, (x, *starts), name=name,
                         attributes={"dynamic_slice_sizes": tuple(sizes)})

    def dynamic_update_slice(self, x: HloInstruction, update: HloInstruction, starts: Operands,
                             name: str | None = None) -> HloInstruction:
        return self._add(Opcode.DYNAMIC_UPDATE_SLICE, (x, update, *starts), name=name)

    # -- reductions and linear algebra -------------------------------------------------------
    def reduce(self, inputs: Operands, inits: Operands, dimensions: Sequence[int],
               to_apply: HloComputation, name: str | None = None) -> HloInstruction:
        return self._add(Opcode.REDUCE, (*inputs, *inits), name=name,
                         attributes={"dimensions": tuple(dimensions), "to_apply": to_apply})

    def dot(self, lhs: HloInstruction, rhs: HloInstruction, *,
            lhs_contracting_dims: Sequence[int] = (), rhs_contracting_dims: Sequence[int] = (),
            lhs_batch_dims: Sequence[int] = (), rhs_batch_dims: Sequence[int] = (),
            name: str | None = None) -> HloInstruction:
        """dot_general, typed as the wider operand (give ``instruction(Opcode.DOT, ...,
        shape=...)`` a shape to widen further)."""
        attributes = {key: tuple(value) for key, value in (
            ("lhs_batch_dims", lhs_batch_dims), ("lhs_contracting_dims", lhs_contracting_dims),
            ("rhs_batch_dims", rhs_batch_dims), ("rhs_contracting_dims", rhs_contracting_dims))
            if value}
        return self._add(Opcode.DOT, (lhs, rhs), name=name, attributes=attributes)

    # -- control -----------------------------------------------------------------------------
    def call(self, computation: HloComputation, operands: Operands,
             name: str | None = None) -> HloInstruction:
        return self._add(Opcode.CALL, operands, name=name, attributes={"to_apply": computation})

    def fusion(self, computation: HloComputation, operands: Operands, kind: str = "kLoop",
               name: str | None = None) -> HloInstruction:
        return self._add(Opcode.FUSION, operands, name=name,
                         attributes={"kind": kind, "calls": computation})

    def while_loop(self, init: HloInstruction, condition: HloComputation, body: HloComputation,
                   name: str | None = None) -> HloInstruction:
        return self._add(Opcode.WHILE, (init,), name=name,
                         attributes={"condition": condition, "body": body})

    def conditional(self, predicate: HloInstruction, on_true: HloInstruction,
                    on_false: HloInstruction, true_computation: HloComputation,
                    false_computation: HloComputation,
                    name: str | None = None) -> HloInstruction:
        return self._add(Opcode.CONDITIONAL, (predicate, on_true, on_false), name=name,
                         attributes={"true_computation": true_computation,
                                     "false_computation": false_computation})

    # -- collectives -------------------------------------------------------------------------
    def all_reduce(self, operand: HloInstruction, *, to_apply: HloComputation,
                   replica_groups: ReplicaGroups | Sequence[Sequence[int]] = (),
                   channel_id: int | None = None, use_global_device_ids: bool = False,
                   name: str | None = None) -> HloInstruction:
        return self._add(Opcode.ALL_REDUCE, (operand,), name=name, attributes=_collective(
            channel_id, replica_groups, use_global_device_ids, to_apply=to_apply))

    def reduce_scatter(self, operand: HloInstruction, *, dimension: int,
                       to_apply: HloComputation,
                       replica_groups: ReplicaGroups | Sequence[Sequence[int]] = (),
                       channel_id: int | None = None, use_global_device_ids: bool = False,
                       name: str | None = None) -> HloInstruction:
        return self._add(Opcode.REDUCE_SCATTER, (operand,), name=name, attributes=_collective(
            channel_id, replica_groups, use_global_device_ids, dimensions=(dimension,),
            to_apply=to_apply))

    def all_gather(self, operand: HloInstruction, *, dimension: int,
                   replica_groups: ReplicaGroups | Sequence[Sequence[int]] = (),
                   channel_id: int | None = None, use_global_device_ids: bool = False,
                   name: str | None = None) -> HloInstruction:
        return self._add(Opcode.ALL_GATHER, (operand,), name=name, attributes=_collective(
            channel_id, replica_groups, use_global_device_ids, dimensions=(dimension,)))

    def all_to_all(self, operand: HloInstruction, *, dimension: int,
                   replica_groups: ReplicaGroups | Sequence[Sequence[int]] = (),
                   channel_id: int | None = None,
                   name: str | None = None) -> HloInstruction:
        return self._add(Opcode.ALL_TO_ALL, (operand,), name=name, attributes=_collective(
            channel_id, replica_groups, False, dimensions=(dimension,)))

    def collective_permute(self, operand: HloInstruction, *,
                           source_target_pairs: SourceTargetPairs | Sequence[Sequence[int]],
                           channel_id: int | None = None,
                           name: str | None = None) -> HloInstruction:
        attributes: dict[str, Any] = {} if channel_id is None else {"channel_id": channel_id}
        attributes["source_target_pairs"] = source_target_pairs
        return self._add(Opcode.COLLECTIVE_PERMUTE, (operand,), name=name, attributes=attributes)

    # -- random ------------------------------------------------------------------------------
    def rng(self, low: HloInstruction, high: HloInstruction, shape: ShapeLike,
            distribution: str = "rng_uniform", name: str | None = None) -> HloInstruction:
        return self._add(Opcode.RNG, (low, high), shape=shape, name=name,
                         attributes={"distribution": distribution})

    # -- text fragments ----------------------------------------------------------------------
    def instructions_from_text(self, lines: Sequence[str],
                               bindings: dict[str, HloInstruction] | None = None
                               ) -> dict[str, HloInstruction]:
        """Add instructions written as HLO lines (``%s = s32[] constant(2)``); a name they use
        without defining it is one of ``bindings``. Each line is checked like any built
        instruction. Returns the added instructions by the name they were written with."""
        bindings = dict(bindings or {})
        fragment = _parse_fragment(lines, bindings)
        added: dict[str, HloInstruction] = {}
        mapping: dict[HloInstruction, HloInstruction] = {}
        for inst in fragment.instructions:
            if inst.opcode is Opcode.PARAMETER and inst.name in bindings:
                mapping[inst] = bindings[inst.name]
                continue
            new = self._add(inst.opcode, [mapping[op] for op in inst.operands], shape=inst.shape,
                            name=inst.name, literal=inst.literal,
                            parameter_number=inst.parameter_number, attributes=inst.attrs)
            mapping[inst] = added[inst.name] = new
        return added

    # -- finishing ---------------------------------------------------------------------------
    def build(self, root: HloInstruction | None = None) -> HloComputation:
        """The computation, ``root`` (default: the last instruction) as its root; a builder
        made by a ModuleBuilder adds it to the module (callees are built before callers)."""
        comp = self.computation
        if not comp.instructions:
            raise HloError(f"computation {comp.name} has no instructions")
        if root is not None and root.parent is not comp:
            raise HloError(f"the root %{root.name} is not in computation {comp.name}")
        comp.root = root if root is not None else comp.instructions[-1]
        if self.module is not None and not self._built:
            self.module.module.add_computation(comp)
        self._built = True
        return comp


def _collective(channel_id: int | None, replica_groups: Any, use_global_device_ids: bool,
                **rest: Any) -> dict[str, Any]:
    """A collective's attributes, the optional ones only when set (as XLA prints them)."""
    attributes: dict[str, Any] = {} if channel_id is None else {"channel_id": channel_id}
    attributes["replica_groups"] = replica_groups
    if use_global_device_ids:
        attributes["use_global_device_ids"] = True
    attributes.update(rest)
    return attributes


_DEFINED_NAME = re.compile(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")


def _parse_fragment(lines: Sequence[str], bindings: dict[str, HloInstruction]) -> HloComputation:
    """``lines`` as the body of a computation whose parameters are the names they use and do
    not define, each shaped like its binding (the parser resolves every reference)."""
    defined = {match.group(1) for match in map(_DEFINED_NAME.match, lines) if match}
    free = [name for name in bindings if name not in defined]
    params = [f"%{name} = {bindings[name].shape} parameter({i})" for i, name in enumerate(free)]
    body = "\n".join("  " + line for line in params + list(lines))
    text = f"HloModule fragment\n\nENTRY %fragment {{\n{body}\n}}\n"
    return parse_module(text, "<instructions>").entry


class ModuleBuilder:
    """Builds a module: its header (replica_count, num_partitions) and its computations, in
    the order they are built; ``build(entry)`` checks and returns it."""

    def __init__(self, name: str, *, replica_count: int | None = None,
                 num_partitions: int | None = None) -> None:
        self.module = HloModule(name)
        if replica_count is not None:
            self.module.header["replica_count"] = replica_count
        if num_partitions is not None:
            self.module.header["num_partitions"] = num_partitions

    @property
    def topology(self) -> Topology:
        return _module_topology(self.module)

    def computation(self, name: str) -> ComputationBuilder:
        return ComputationBuilder(name, module=self)

    def build(self, entry: HloComputation | None = None, *, check: bool = True) -> HloModule:
        """The module with ``entry`` (default: the last computation built) as its entry,
        verified by the checker unless ``check`` is False."""
        module = self.module
        if not module.computations:
            raise HloError(f"module {module.name} has no computations")
        entry = entry or module.computations[-1]
        if entry not in module.computations:
            raise HloError(f"computation {entry.name} is not built in module {module.name}")
        for comp in module.computations:
            comp.is_entry = comp is entry
        module.entry = entry
        if check:
            check_module(module)
        return module
