"""The HLO IR: modules of computations of instructions.

Small on purpose (after torch.fx): an instruction knows its operands and its users, and the only
mutations are the ones passes need — replace uses, replace an instruction, add, remove, clone.
Attributes are typed once parsed (see attributes.py); computation-valued attributes hold the
HloComputation itself, so renaming or cloning cannot leave a dangling name. The IR also owns its
text: ``print_module`` is the parser's inverse.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Iterator

from neuron_sim.hlo.attributes import (COMPUTATION_ATTRIBUTES, Raw, WrittenAs, attribute_rank,
                                       format_attribute)
from neuron_sim.hlo.literals import Literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import Shape


class HloError(ValueError):
    """A malformed IR operation, naming the instruction involved."""


def unique_name(hint: str, taken: set[str]) -> str:
    """``hint`` if it is not in ``taken``, else ``hint.N`` (a trailing ``.N`` of the hint
    replaced) for the smallest free N, as XLA names clones."""
    if hint not in taken:
        return hint
    base = hint.rsplit(".", 1)[0] if hint.rsplit(".", 1)[-1].isdigit() else hint
    for i in itertools.count(1):
        if f"{base}.{i}" not in taken:
            return f"{base}.{i}"
    raise AssertionError


class HloInstruction:
    """One HLO instruction. Create through the constructor, then ``HloComputation.add``."""

    def __init__(self, name: str, opcode: Opcode, shape: Shape,
                 operands: Iterable["HloInstruction"] = (), attrs: dict[str, Any] | None = None,
                 *, literal: Literal | None = None, parameter_number: int | None = None) -> None:
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[HloInstruction] = []
        self.attrs: dict[str, Any] = {}
        self.literal = literal
        self.parameter_number = parameter_number
        self.users: dict[HloInstruction, None] = {}
        self.parent: HloComputation | None = None
        # Read from a tuple-element operand ``%p#0`` (a get-tuple-element the text wrote inside
        # its user's operand list): printed back in that form while it still is one.
        self.written_as_operand = False
        for operand in operands:
            self.append_operand(operand)
        for key, value in (attrs or {}).items():
            self.set_attr(key, value)

    def _copy(self, operands: list["HloInstruction"], attrs: dict[str, Any],
              parent: "HloComputation") -> "HloInstruction":
        """A copy of this instruction in ``parent`` with ``operands`` (copies of its own, whose
        users it joins) and ``attrs`` taken as given: what ``HloModule.clone`` makes of each
        instruction, without the constructor's per-operand and per-attribute calls (the
        attributes are already in their printing order). Every field the constructor sets is
        set here."""
        new = HloInstruction.__new__(HloInstruction)
        new.name = self.name
        new.opcode = self.opcode
        new.shape = self.shape
        new.operands = operands
        new.attrs = attrs
        new.literal = self.literal
        new.parameter_number = self.parameter_number
        new.users = {}
        new.parent = parent
        new.written_as_operand = self.written_as_operand
        for operand in operands:
            operand.users[new] = None
        return new

    # -- attributes --------------------------------------------------------------------------
    def get(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def has(self, name: str) -> bool:
        return name in self.attrs

    def set_attr(self, name: str, value: Any) -> None:
        """Set an attribute; a new one is placed where XLA prints it."""
        if name in self.attrs or not self.attrs:
            self.attrs[name] = value
            return
        rank = attribute_rank(name)
        items = list(self.attrs.items())
        at = next((i for i, (k, _) in enumerate(items) if attribute_rank(k) > rank), len(items))
        items.insert(at, (name, value))
        self.attrs = dict(items)

    def del_attr(self, name: str) -> None:
        self.attrs.pop(name, None)

    @property
    def called_computations(self) -> list["HloComputation"]:
        """Computations this instruction calls, in attribute order."""
        called: list[HloComputation] = []
        for key, value in self.attrs.items():
            if key in COMPUTATION_ATTRIBUTES:
                called.extend(value if isinstance(value, tuple) else (value,))
        return called

    @property
    def to_apply(self) -> "HloComputation":
        return self.attrs["to_apply"]

    # Collective conveniences (typed views of the attributes every collective shares).
    @property
    def channel_id(self) -> int | None:
        return self.attrs.get("channel_id")

    @property
    def replica_groups(self):
        return self.attrs.get("replica_groups")

    @property
    def use_global_device_ids(self) -> bool:
        return bool(self.attrs.get("use_global_device_ids", False))

    @property
    def dimensions(self) -> tuple[int, ...]:
        return self.attrs.get("dimensions", ())

    # -- operands and users ------------------------------------------------------------------
    def operand(self, i: int) -> "HloInstruction":
        return self.operands[i]

    def append_operand(self, operand: "HloInstruction") -> None:
        self.operands.append(operand)
        operand.users[self] = None

    def set_operand(self, i: int, new: "HloInstruction") -> None:
        old = self.operands[i]
        self.operands[i] = new
        new.users[self] = None
        if old not in self.operands:
            old.users.pop(self, None)

    def replace_operand_with(self, old: "HloInstruction", new: "HloInstruction") -> None:
        """Every use of ``old`` among this instruction's operands becomes ``new``."""
        for i, operand in enumerate(self.operands):
            if operand is old:
                self.operands[i] = new
        old.users.pop(self, None)
        new.users[self] = None

    def drop_operands(self) -> None:
        for operand in self.operands:
            operand.users.pop(self, None)
        self.operands = []

    @property
    def user_count(self) -> int:
        return len(self.users)

    def replace_all_uses_with(self, new: "HloInstruction") -> None:
        """Make every user (and the root slot) use ``new`` instead; shapes must be compatible."""
        if new is self:
            return
        if not self.shape.compatible(new.shape):
            raise HloError(f"cannot replace uses of %{self.name} ({self.shape}) with "
                           f"%{new.name} ({new.shape}): shapes differ")
        for user in list(self.users):
            user.replace_operand_with(self, new)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    # -- text --------------------------------------------------------------------------------
    @property
    def prints_as_operand(self) -> bool:
        """True when this get-tuple-element was written ``%p#0`` in its users' operand lists and
        still fits that form (one operand, no attribute but the index, not the root): it then
        has no line of its own and each user prints it as ``%p#0``."""
        return (self.written_as_operand and self.opcode is Opcode.GET_TUPLE_ELEMENT
                and len(self.operands) == 1 and tuple(self.attrs) == ("index",)
                and not self.is_root)

    def operand_reference(self, sigil: str = "%") -> str:
        """How a user's operand list names this instruction: ``%name``, or ``%p#0`` (nested
        ``%p#1#0``) for a tuple element written that way."""
        if self.prints_as_operand:
            return f"{self.operands[0].operand_reference(sigil)}#{self.attrs['index']}"
        return sigil + self.name

    def to_text(self, *, percent: bool = True, operand_shapes: bool = False,
                index_comments: bool = True, omit: Iterable[str] = ()) -> str:
        """The instruction line as XLA prints it (without indentation or ROOT); attributes named
        in ``omit`` (say metadata, for an error message) are left out."""
        sigil = "%" if percent else ""
        if self.opcode is Opcode.CONSTANT:
            inside = self.literal.text if self.literal is not None else ""
        elif self.opcode is Opcode.PARAMETER:
            inside = str(self.parameter_number)
        else:
            inside = ", ".join(
                (f"/*index={i}*/" if index_comments and i and i % 5 == 0 else "")
                + (f"{op.shape} " if operand_shapes else "") + op.operand_reference(sigil)
                for i, op in enumerate(self.operands))
        spelling, attrs = self.opcode.spelling, self.attrs
        wrapped = self.async_wrapped_computation()
        if wrapped is not None and wrapped.prints_as_syntax_sugar:
            spelling = wrapped.root.opcode.spelling + self.opcode.spelling[len("async"):]
            attrs = _sugared_attributes(self.attrs, wrapped.root.attrs)
        parts = [f"{sigil}{self.name} = {self.shape} {spelling}({inside})"]
        for key, value in attrs.items():
            if key in omit:
                continue
            if isinstance(value, WrittenAs):  # e.g. order=TOTAL, read as type=TOTALORDER
                parts.append(f"{value.key}={value.text}")
            else:
                parts.append(f"{key}={self._format_attr(key, value, sigil)}")
        return ", ".join(parts)

    def async_wrapped_computation(self) -> "HloComputation | None":
        """The computation an async-start/-update/-done runs (through its start), if any."""
        start = self
        while start.opcode in (Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE) and start.operands:
            start = start.operands[0]
        if start.opcode is not Opcode.ASYNC_START:
            return None
        calls = start.attrs.get("calls")
        return calls if isinstance(calls, HloComputation) else None

    @staticmethod
    def _format_attr(key: str, value: Any, sigil: str) -> str:
        if key in COMPUTATION_ATTRIBUTES:
            if isinstance(value, tuple):
                return "{" + ", ".join(sigil + c.name for c in value) + "}"
            return sigil + value.name
        return format_attribute(key, value)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<HloInstruction %{self.name} {self.opcode.spelling}>"

    def structural_key(self, ids: dict["HloInstruction", int]) -> tuple:
        """What makes two instructions the same, independent of object identity and names."""
        attrs = tuple(
            (k, tuple(c.name for c in v) if isinstance(v, tuple) and k in COMPUTATION_ATTRIBUTES
             else v.name if k in COMPUTATION_ATTRIBUTES else v)
            for k, v in self.attrs.items())
        return (self.name, self.opcode, self.shape, tuple(ids[o] for o in self.operands), attrs,
                self.literal.structural_key() if self.literal is not None else None,
                self.parameter_number, self.is_root)


# What an async-start written as syntax sugar shares with the op it wraps (printed once).
_SUGAR_SHARED_ATTRIBUTES = ("metadata", "backend_config", "frontend_attributes")


def _sugared_attributes(own: dict[str, Any], wrapped: dict[str, Any]) -> dict[str, Any]:
    """The attributes of a sugared async op as XLA prints them: its async_execution_thread, the
    wrapped op's own attributes (on the start only), then its other attributes."""
    out = {k: v for k, v in own.items() if k == "async_execution_thread"}
    if "calls" in own:
        out.update((k, v) for k, v in wrapped.items() if k not in _SUGAR_SHARED_ATTRIBUTES)
    out.update((k, v) for k, v in own.items() if k not in out and k != "calls")
    return out


def _without_derived(state: dict[str, Any]) -> dict[str, Any]:
    """An object's state for pickling without its ``derived`` caches (compiled code, which
    does not pickle, and facts a copy recomputes)."""
    return {key: value for key, value in state.items() if key != "derived"}


class HloComputation:
    """An ordered list of instructions with one root. Text order is a valid post order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.parent: HloModule | None = None
        self.is_entry = False
        self.trailing: str = ""  # e.g. ', execution_thread="..."' after the closing brace
        # Written as async syntax sugar (``custom-call-start(...)``): the async ops calling it
        # print back in that form and it is not printed itself, as long as it still wraps one
        # instruction of its parameters (XLA's CanExpandIntoSingleInstruction).
        self.syntax_sugar = False
        self.derived: dict[Any, Any] = {}  # see HloModule.derived

    def __getstate__(self) -> dict[str, Any]:
        return _without_derived(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, derived={})

    @property
    def prints_as_syntax_sugar(self) -> bool:
        """True when this computation is printed inside the async ops that call it."""
        root = self.root
        return (self.syntax_sugar and root is not None and len(self.instructions) == len(
            root.operands) + 1 and all(op.opcode is Opcode.PARAMETER and op.parameter_number == i
                                       for i, op in enumerate(root.operands)))

    def add(self, instruction: HloInstruction, *, name_hint: str | None = None) -> HloInstruction:
        """Append ``instruction``; its name is made unique within the module."""
        if instruction.parent is not None:
            raise HloError(f"%{instruction.name} already belongs to {instruction.parent.name}")
        if self.parent is not None:
            instruction.name = self.parent.unique_name(name_hint or instruction.name)
        instruction.parent = self
        self.instructions.append(instruction)
        return instruction

    def add_before(self, instruction: HloInstruction, anchor: HloInstruction) -> HloInstruction:
        """Add ``instruction`` just before ``anchor`` (keeps the list a valid post order)."""
        self.add(instruction)
        self.instructions.remove(instruction)
        self.instructions.insert(self.instructions.index(anchor), instruction)
        return instruction

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode is Opcode.PARAMETER]
        return sorted(params, key=lambda i: i.parameter_number)

    def parameter(self, n: int) -> HloInstruction:
        for inst in self.instructions:
            if inst.opcode is Opcode.PARAMETER and inst.parameter_number == n:
                return inst
        raise HloError(f"computation {self.name} has no parameter {n}")

    def instruction(self, name: str) -> HloInstruction:
        for inst in self.instructions:
            if inst.name == name:
                return inst
        raise KeyError(f"computation {self.name} has no instruction %{name}")

    def __iter__(self) -> Iterator[HloInstruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def post_order(self) -> list[HloInstruction]:
        """Operands before users; ties keep text order."""
        seen: set[HloInstruction] = set()
        order: list[HloInstruction] = []
        for start in self.instructions:
            if start in seen:
                continue
            stack = [(start, iter(start.operands))]
            seen.add(start)
            while stack:
                node, it = stack[-1]
                for operand in it:
                    if operand not in seen and operand.parent is self:
                        seen.add(operand)
                        stack.append((operand, iter(operand.operands)))
                        break
                else:
                    stack.pop()
                    order.append(node)
        return order

    def remove(self, instruction: HloInstruction) -> None:
        """Remove an instruction that has no users and is not the root."""
        if instruction.users:
            raise HloError(f"cannot remove %{instruction.name}: it is used by "
                           + ", ".join("%" + u.name for u in instruction.users))
        if instruction is self.root:
            raise HloError(f"cannot remove %{instruction.name}: it is the root of {self.name}")
        instruction.drop_operands()
        self.instructions.remove(instruction)
        instruction.parent = None

    def remove_with_dead_operands(self, instruction: HloInstruction) -> None:
        """Remove ``instruction`` and every operand left without users (not parameters)."""
        worklist = [instruction]
        while worklist:
            inst = worklist.pop()
            if inst.users or inst is self.root or inst.parent is not self:
                continue
            if inst is not instruction and inst.opcode is Opcode.PARAMETER:
                continue
            operands = list(dict.fromkeys(inst.operands))
            self.remove(inst)
            worklist.extend(operands)

    def replace_instruction(self, old: HloInstruction, new: HloInstruction) -> None:
        """Replace every use of ``old`` by ``new`` (shapes checked), then remove ``old`` and the
        operands only it used. ``new`` is added to the computation if it is not in one yet."""
        if new.parent is None:
            self.add_before(new, old)
        old.replace_all_uses_with(new)
        self.remove_with_dead_operands(old)

    def to_text(self, *, percent: bool = True, operand_shapes: bool = False,
                signature: bool = True, index_comments: bool = True) -> str:
        sigil = "%" if percent else ""
        head = ("ENTRY " if self.is_entry else "") + sigil + self.name
        if signature:
            # XLA prints the signature's shapes without layouts.
            params = ", ".join(f"{p.name}: {p.shape.without_layout()}" for p in self.parameters)
            head += f" ({params}) -> {self.root.shape.without_layout()}"
        lines = [head + " {"]
        for inst in self.instructions:
            if inst.prints_as_operand:
                continue
            prefix = "ROOT " if inst is self.root else ""
            lines.append("  " + prefix + inst.to_text(percent=percent,
                                                      operand_shapes=operand_shapes,
                                                      index_comments=index_comments))
        lines.append("}" + self.trailing)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


class HloModule:
    """A module: header attributes, optional debug sections, computations, one entry."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.header: dict[str, Raw | int | bool] = {}
        self.sections: str = ""  # FileNames / FunctionNames / FileLocations / StackFrames, verbatim
        self.computations: list[HloComputation] = []
        self.entry: HloComputation | None = None
        # How the text this module came from spelled things, so printing keeps the same style.
        self.style_percent = True
        self.style_operand_shapes = False
        self.style_signatures = True
        self.style_index_comments = True  # '/*index=5*/' in long operand lists
        # What other layers derive from this module and keep while it lives (the interpreter's
        # execution facts and plans): held here, not in a global table keyed by the module,
        # because such a table's entries refer back to the module and would keep every module
        # ever executed alive. Never copied by ``clone`` nor pickled.
        self.derived: dict[Any, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return _without_derived(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, derived={})

    # -- header ------------------------------------------------------------------------------
    @property
    def replica_count(self) -> int:
        return int(self.header.get("replica_count", 1))

    @property
    def num_partitions(self) -> int:
        return int(self.header.get("num_partitions", 1))

    # -- computations ------------------------------------------------------------------------
    def add_computation(self, computation: HloComputation, *, entry: bool = False) -> HloComputation:
        computation.name = self._unique_computation_name(computation.name)
        computation.parent = self
        self.computations.append(computation)
        if entry:
            if self.entry is not None:
                self.entry.is_entry = False
            self.entry = computation
            computation.is_entry = True
        return computation

    def computation(self, name: str) -> HloComputation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(f"module {self.name} has no computation {name}")

    def _unique_computation_name(self, name: str) -> str:
        taken = {c.name for c in self.computations}
        if name not in taken:
            return name
        for i in itertools.count(1):
            if f"{name}.{i}" not in taken:
                return f"{name}.{i}"
        raise AssertionError

    def unique_name(self, hint: str) -> str:
        """``hint`` if no instruction has that name yet, else ``hint.N`` for the next free N."""
        return unique_name(hint, {i.name for c in self.computations for i in c.instructions})

    def instructions(self) -> Iterator[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions

    def callers(self) -> dict[HloComputation, list[HloInstruction]]:
        """For each computation, the instructions that call it."""
        result: dict[HloComputation, list[HloInstruction]] = {c: [] for c in self.computations}
        for inst in self.instructions():
            for called in inst.called_computations:
                result.setdefault(called, []).append(inst)
        return result

    def post_order_computations(self) -> list[HloComputation]:
        """Callees before callers (XLA's MakeComputationPostOrder)."""
        order: list[HloComputation] = []
        seen: set[HloComputation] = set()
        for start in self.computations:
            if start in seen:
                continue
            seen.add(start)
            stack = [(start, iter(_called_in_order(start)))]
            while stack:
                comp, callees = stack[-1]
                callee = next((c for c in callees if c not in seen), None)
                if callee is None:
                    stack.pop()
                    order.append(comp)
                    continue
                seen.add(callee)
                stack.append((callee, iter(_called_in_order(callee))))
        return order

    def fusion_computations(self) -> set[HloComputation]:
        return {c for inst in self.instructions() if inst.opcode is Opcode.FUSION
                for c in inst.called_computations}

    def next_channel_id(self) -> int:
        """One more than the largest channel_id in the module (XLA's NextChannelId)."""
        ids = [i.attrs["channel_id"] for i in self.instructions() if "channel_id" in i.attrs]
        return max(ids, default=0) + 1

    def call_depth(self) -> int:
        """The longest chain of computations called inside one another from the entry (0: the
        entry calls nothing), walked without recursion; a call cycle counts as unbounded
        (``sys.maxsize``), since it never ends. The interpreter checks it on every execute, so
        each computation's callees are collected once, straight from the attributes that name
        computations."""
        import sys

        entry = self.entry
        if entry is None:
            return 0
        depth: dict[HloComputation, int] = {}
        callees = {entry: _callees(entry)}
        on_path = {entry}
        stack = [(entry, iter(callees[entry]))]
        while stack:
            computation, pending = stack[-1]
            for callee in pending:
                if callee in on_path:
                    return sys.maxsize
                if callee not in depth:
                    on_path.add(callee)
                    callees[callee] = _callees(callee)
                    stack.append((callee, iter(callees[callee])))
                    break
            else:
                stack.pop()
                on_path.discard(computation)
                depth[computation] = max((depth[c] + 1 for c in callees[computation]),
                                         default=0)
        return depth[entry]

    def remove_dead_computations(self) -> None:
        reachable: set[HloComputation] = set()
        stack = [self.entry] if self.entry else []
        while stack:
            comp = stack.pop()
            if comp in reachable:
                continue
            reachable.add(comp)
            for inst in comp.instructions:
                stack.extend(inst.called_computations)
        self.computations = [c for c in self.computations if c in reachable]

    # -- copying -----------------------------------------------------------------------------
    def clone(self) -> "HloModule":
        """A deep copy: new computations and instructions, same names and attributes."""
        copy = HloModule(self.name)
        copy.header = dict(self.header)
        copy.sections = self.sections
        copy.style_percent = self.style_percent
        copy.style_operand_shapes = self.style_operand_shapes
        copy.style_signatures = self.style_signatures
        copy.style_index_comments = self.style_index_comments
        comp_map: dict[HloComputation, HloComputation] = {}
        for comp in self.computations:
            new_comp = HloComputation(comp.name)
            new_comp.trailing = comp.trailing
            new_comp.syntax_sugar = comp.syntax_sugar
            new_comp.parent = copy
            new_comp.is_entry = comp.is_entry
            copy.computations.append(new_comp)
            comp_map[comp] = new_comp
            if comp is self.entry:
                copy.entry = new_comp

        def remap(key: str, value: Any) -> Any:
            if key not in COMPUTATION_ATTRIBUTES:
                return value
            if isinstance(value, tuple):
                return tuple(comp_map[c] for c in value)
            return comp_map[value]

        calls = COMPUTATION_ATTRIBUTES.isdisjoint
        for comp in self.computations:
            new_comp = comp_map[comp]
            inst_map: dict[HloInstruction, HloInstruction] = {}
            instructions = new_comp.instructions
            for inst in comp.instructions:
                attrs = inst.attrs
                new = inst._copy([inst_map[o] for o in inst.operands],
                                 dict(attrs) if calls(attrs) else
                                 {k: remap(k, v) for k, v in attrs.items()}, new_comp)
                instructions.append(new)
                inst_map[inst] = new
            new_comp.root = inst_map[comp.root] if comp.root is not None else None
        return copy

    def become(self, other: "HloModule") -> None:
        """Take ``other``'s contents (used to commit a pass that ran on a clone)."""
        self.__dict__.update(other.__dict__)
        for comp in self.computations:
            comp.parent = self

    # -- text and comparison -----------------------------------------------------------------
    def to_text(self) -> str:
        return print_module(self)

    def __str__(self) -> str:
        return self.to_text()

    def structural_key(self) -> tuple:
        """Equal for two modules that have the same computations, instructions and attributes."""
        comps = []
        for comp in self.computations:
            ids = {inst: i for i, inst in enumerate(comp.instructions)}
            comps.append((comp.name, comp.is_entry, comp.trailing,
                          tuple(inst.structural_key(ids) for inst in comp.instructions)))
        return (self.name, tuple(self.header.items()), self.sections, tuple(comps))

    def structurally_equal(self, other: "HloModule") -> bool:
        return self.structural_key() == other.structural_key()

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


# =============================================================================================
# Text: the IR owns its printing, so the parser's inverse lives next to the types it prints.


def dependencies(*roots: HloInstruction, into_calls: bool = False) -> set[HloInstruction]:
    """``roots`` and every instruction they depend on through operands — the one operand walk
    (``into_calls``: also every instruction of the computations called on the way)."""
    seen: set[HloInstruction] = set()
    stack = list(roots)
    while stack:
        inst = stack.pop()
        if inst in seen:
            continue
        seen.add(inst)
        stack.extend(inst.operands)
        if into_calls:
            for called in inst.called_computations:
                stack.extend(called.instructions)
    return seen


def print_header(module: HloModule) -> str:
    """The ``HloModule name, key=value, ...`` line."""
    parts = [f"HloModule {module.name}"]
    parts += [f"{key}={format_attribute(key, value)}" for key, value in module.header.items()]
    return ", ".join(parts)


def print_module(module: HloModule) -> str:
    """The module's text in XLA's syntax; like XLA, every computation is followed by a blank line.

    A parsed module prints in the style it was written in (``%`` sigils, computation signatures,
    operand shapes), with attributes in the order they were parsed, so a diff against XLA's own
    dump stays empty. ``print(parse(print(m))) == print(m)`` holds for every module.
    """
    blocks = [print_header(module)]
    if module.sections:
        blocks.append(module.sections)
    for comp in module.computations:
        if comp.prints_as_syntax_sugar:
            continue
        blocks.append(comp.to_text(percent=module.style_percent,
                                   operand_shapes=module.style_operand_shapes,
                                   signature=module.style_signatures,
                                   index_comments=module.style_index_comments))
    return "\n\n".join(blocks) + "\n\n"


def _called_in_order(computation: HloComputation) -> list[HloComputation]:
    """Every computation ``computation``'s instructions call, in instruction and attribute
    order (``called_computations`` of each), asked only of instructions whose attributes name
    one."""
    calls_none = COMPUTATION_ATTRIBUTES.isdisjoint
    return [called for inst in computation.instructions if not calls_none(inst.attrs)
            for called in inst.called_computations]


def _callees(computation: HloComputation) -> list[HloComputation]:
    """The computations ``computation``'s instructions call (their ``called_computations``,
    read from the attributes without building a list per instruction)."""
    called: list[HloComputation] = []
    for inst in computation.instructions:
        attrs = inst.attrs
        if COMPUTATION_ATTRIBUTES.isdisjoint(attrs):
            continue
        for key in COMPUTATION_ATTRIBUTES.intersection(attrs):
            value = attrs[key]
            called.extend(value if isinstance(value, tuple) else (value,))
    return called
