"""Parser for HLO text as XLA and JAX print it.

Errors are ``HloParseError``: ``file:line:col: message``, the source line and a caret. Unknown
attributes are kept verbatim (see attributes.py); unknown opcodes and element types are errors.
Each parse function carries its grammar rule above it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import (COMPUTATION_ATTRIBUTES, COMPUTATION_LIST_ATTRIBUTES,
                                       AttributeSyntaxError, Raw, parse_attribute)
from neuron_sim.hlo.dtypes import SCALAR_ONLY_TYPES, ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule
from neuron_sim.hlo.literals import Literal, LiteralError, ElidedLiteralError, parse_literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import UNBOUNDED, ArrayShape, Layout, Shape, TupleShape


class HloParseError(UserError):
    """A syntax or reference error in HLO text, located at file:line:col."""

    def __init__(self, message: str, filename: str, line: int, col: int, source_line: str) -> None:
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.col = col
        self.source_line = source_line

    @property
    def location(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}"

    def one_line(self) -> str:
        return f"{self.location}: {self.message}"

    def __str__(self) -> str:
        caret = " " * (self.col - 1) + "^"
        return f"{self.one_line()}\n{self.source_line}\n{caret}"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_NUMBER = re.compile(r"-?\d+")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_SECTION_KEYWORDS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HEADER_INT_ATTRIBUTES = ("replica_count", "num_partitions")


class _Cursor:
    """A position in the text, with whitespace/comment skipping and located errors."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> HloParseError:
        pos = self.pos if pos is None else pos
        pos = max(0, min(pos, len(self.text)))
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        line_end = len(self.text) if line_end < 0 else line_end
        line = self.text.count("\n", 0, pos) + 1
        return HloParseError(message, self.filename, line, pos - line_start + 1,
                             self.text[line_start:line_end])

    def skip(self, newlines: bool = True) -> None:
        """Skip spaces, comments, and (unless ``newlines`` is False) line breaks."""
        text = self.text
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t\r" or (newlines and c == "\n"):
                self.pos += 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated comment")
                self.pos = end + 2
            elif newlines and text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            else:
                break

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self, s: str) -> bool:
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        self.skip()
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            found = self.text[self.pos:self.pos + 12].split("\n")[0] or "end of input"
            raise self.error(f"expected {what or repr(s)}, found '{found}'")

    def match(self, pattern: re.Pattern, what: str, skip: bool = True) -> str:
        if skip:
            self.skip()
        m = pattern.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 12].split("\n")[0] or "end of input"
            raise self.error(f"expected {what}, found '{found}'")
        self.pos = m.end()
        return m.group(0)

    # name ::= '%'? [A-Za-z_][A-Za-z0-9_.-]*
    def name(self, what: str = "a name") -> tuple[str, int, bool]:
        self.skip()
        start = self.pos
        percent = self.accept("%")
        return self.match(_NAME, what, skip=False), start, percent

    def balanced(self, stop: str, what: str) -> tuple[str, int]:
        """Raw text up to a top-level character in ``stop`` (brackets and strings balanced)."""
        self.skip(newlines=False)
        start = self.pos
        text = self.text
        depth: list[str] = []
        closers = {"{": "}", "(": ")", "[": "]"}
        i = self.pos
        while i < len(text):
            c = text[i]
            if c == '"':
                i += 1
                while i < len(text) and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
                if i >= len(text):
                    raise self.error("unterminated string", start)
            elif c in closers:
                depth.append(closers[c])
            elif c in "})]":
                if not depth:
                    if c in stop:
                        break
                    raise self.error(f"unbalanced '{c}' in {what}", i)
                if depth.pop() != c:
                    raise self.error(f"mismatched '{c}' in {what}", i)
            elif not depth and c in stop:
                break
            elif c == "\n" and depth and "\n" in stop:
                raise self.error(f"unterminated {what}", start)
            i += 1
        if depth:
            raise self.error(f"unterminated {what}", start)
        self.pos = i
        return text[start:i].rstrip(), start


@dataclass
class _PendingInstruction:
    inst: HloInstruction
    operand_refs: list[tuple[str, int, Shape | None]] = field(default_factory=list)
    computation_refs: list[tuple[str, list[tuple[str, int]], bool]] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str, filename: str) -> None:
        self.c = _Cursor(text, filename)
        self.module: HloModule | None = None
        self.pending: list[_PendingInstruction] = []
        self.saw_percent = False
        self.saw_operand_shapes = False
        self.saw_signature = False
        self.saw_index_comment = False
        self.saw_long_operand_list = False

    # module ::= 'HloModule' name (',' attribute)* section* computation+
    def parse_module(self) -> HloModule:
        c = self.c
        c.expect("HloModule", "'HloModule' at the start of the module")
        name, _, _ = c.name("the module name")
        module = HloModule(name)
        self.module = module
        while True:
            c.skip(newlines=False)
            if not c.accept(","):
                break
            key, key_pos, _ = c.name("a header attribute name")
            c.expect("=")
            value, value_pos = c.balanced(",\n", f"header attribute {key}")
            if key in _HEADER_INT_ATTRIBUTES:
                if not _NUMBER.fullmatch(value) or int(value) < 1:
                    raise c.error(f"{key} must be a positive integer, got '{value}'", value_pos)
                module.header[key] = int(value)
            else:
                module.header[key] = Raw(value)
        module.sections = self.parse_sections()
        names_seen: dict[str, int] = {}
        while not c.at_end():
            comp, pos = self.parse_computation()
            if comp.name in names_seen:
                raise c.error(f"computation {comp.name} is defined twice", pos)
            names_seen[comp.name] = pos
            module.add_computation(comp, entry=comp.is_entry)
            comp.is_entry = comp is module.entry
        if not module.computations:
            raise c.error("the module has no computations")
        if module.entry is None:
            # XLA takes the last computation as the entry when none is marked.
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        self.resolve_computation_refs()
        module.style_percent = self.saw_percent
        module.style_operand_shapes = self.saw_operand_shapes
        module.style_signatures = self.saw_signature
        module.style_index_comments = self.saw_index_comment or not self.saw_long_operand_list
        return module

    # section ::= ('FileNames' | 'FunctionNames' | 'FileLocations' | 'StackFrames') line*
    def parse_sections(self) -> str:
        c = self.c
        c.skip()
        start = c.pos
        if not any(c.peek(k) for k in _SECTION_KEYWORDS):
            return ""
        text = c.text
        pos = start
        while pos < len(text):
            line_end = text.find("\n", pos)
            line_end = len(text) if line_end < 0 else line_end
            line = text[pos:line_end].strip()
            if line and not (line.split()[0] in _SECTION_KEYWORDS or line[0].isdigit()):
                break
            pos = line_end + 1
        c.pos = min(pos, len(text))
        return text[start:c.pos].rstrip("\n") + "\n"

    # computation ::= 'ENTRY'? name signature? '{' instruction* '}' (',' attribute)*
    # signature   ::= '(' (name ':' shape (',' name ':' shape)*)? ')' '->' shape
    def parse_computation(self) -> tuple[HloComputation, int]:
        c = self.c
        c.skip()
        start = c.pos
        is_entry = c.accept("ENTRY")
        name, _, percent = c.name("a computation name")
        self.saw_percent |= percent
        comp = HloComputation(name)
        comp.is_entry = is_entry
        if c.accept("("):
            self.saw_signature = True
            if not c.accept(")"):
                while True:
                    c.name("a parameter name")
                    c.expect(":")
                    self.parse_shape()
                    if c.accept(")"):
                        break
                    c.expect(",", "',' or ')' in the computation signature")
            c.expect("->", "'->' after the computation parameters")
            self.parse_shape()
        c.expect("{", "'{' to open the computation body")
        by_name: dict[str, HloInstruction] = {}
        pendings: list[_PendingInstruction] = []
        root: HloInstruction | None = None
        while not c.accept("}"):
            if c.at_end():
                raise c.error(f"computation {name} is not closed with '}}'", start)
            pending, is_root, pos = self.parse_instruction()
            inst = pending.inst
            if inst.name in by_name:
                raise c.error(f"instruction %{inst.name} is defined twice in {name}", pos)
            if is_root:
                if root is not None:
                    raise c.error(f"computation {name} has two ROOT instructions", pos)
                root = inst
            by_name[inst.name] = inst
            inst.parent = comp
            comp.instructions.append(inst)
            pendings.append(pending)
        if not comp.instructions:
            raise c.error(f"computation {name} has no instructions", start)
        comp.root = root if root is not None else comp.instructions[-1]
        c.skip(newlines=False)
        if c.peek(","):
            trailing, _ = c.balanced("\n", "computation attributes")
            comp.trailing = trailing
        for pending in pendings:
            for ref_name, pos, shape in pending.operand_refs:
                operand = by_name.get(ref_name)
                if operand is None:
                    raise c.error(f"instruction %{pending.inst.name} uses %{ref_name}, which is "
                                  f"not defined in computation {name}", pos)
                if shape is not None and not shape.compatible(operand.shape) and not (
                        shape.without_layout() == operand.shape.without_layout()):
                    raise c.error(f"operand %{ref_name} is written with shape {shape} but "
                                  f"is defined as {operand.shape}", pos)
                pending.inst.append_operand(operand)
        self.pending.extend(pendings)
        return comp, start

    # instruction ::= 'ROOT'? name '=' shape opcode '(' operands ')' (',' attribute)*
    def parse_instruction(self) -> tuple[_PendingInstruction, bool, int]:
        c = self.c
        c.skip()
        pos = c.pos
        is_root = False
        if re.match(r"ROOT\s", c.text[c.pos:c.pos + 5]):
            c.pos += 4
            is_root = True
        name, _, percent = c.name("an instruction name")
        self.saw_percent |= percent
        c.expect("=", f"'=' after %{name}")
        shape = self.parse_shape()
        c.skip()
        opcode_pos = c.pos
        spelling = c.match(_OPCODE, "an opcode")
        try:
            opcode = Opcode.from_spelling(spelling)
        except KeyError:
            raise c.error(f"unknown opcode '{spelling}'", opcode_pos) from None
        c.expect("(", f"'(' after {spelling}")
        pending = _PendingInstruction(HloInstruction(name, opcode, shape))
        inst = pending.inst
        if opcode is Opcode.CONSTANT:
            text, text_pos = c.balanced(")", "constant literal")
            inst.literal = self.parse_literal_text(shape, text, text_pos)
            c.expect(")")
        elif opcode is Opcode.PARAMETER:
            c.skip()
            num_pos = c.pos
            number = c.match(_NUMBER, "a parameter number")
            if int(number) < 0:
                raise c.error("parameter numbers are non-negative", num_pos)
            inst.parameter_number = int(number)
            c.expect(")")
        else:
            self.parse_operands(pending)
        self.parse_attributes(pending)
        return pending, is_root, pos

    def parse_literal_text(self, shape: Shape, text: str, pos: int) -> Literal:
        try:
            value = parse_literal(shape, text)
        except ElidedLiteralError:
            return Literal(shape, text=text)
        except LiteralError as exc:
            raise self.c.error(f"bad constant: {exc}", pos + exc.offset) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise self.c.error(f"bad constant for {shape}: {exc}", pos) from None
        return Literal(shape, text=text, value=value)

    # operands ::= (operand (',' operand)*)?     operand ::= shape? name
    def parse_operands(self, pending: _PendingInstruction) -> None:
        c = self.c
        start = c.pos
        if c.accept(")"):
            return
        self._parse_operand_list(pending)
        if len(pending.operand_refs) > 5:
            self.saw_long_operand_list = True
            self.saw_index_comment |= "/*index=" in c.text[start:c.pos]

    def _parse_operand_list(self, pending: _PendingInstruction) -> None:
        c = self.c
        while True:
            c.skip()
            shape = None
            if c.peek("(") or re.match(r"[a-z][a-z0-9]*\[", c.text[c.pos:c.pos + 20]) \
                    or re.match(r"(token|opaque)\s", c.text[c.pos:c.pos + 7]):
                shape = self.parse_shape()
                self.saw_operand_shapes = True
            name, pos, percent = c.name("an operand name")
            self.saw_percent |= percent
            pending.operand_refs.append((name, pos, shape))
            if c.accept(")"):
                return
            c.expect(",", "',' or ')' after an operand")

    # attribute ::= name '=' value
    def parse_attributes(self, pending: _PendingInstruction) -> None:
        c = self.c
        inst = pending.inst
        while True:
            c.skip(newlines=False)
            if not c.accept(","):
                return
            key, key_pos, _ = c.name("an attribute name")
            c.expect("=", f"'=' after attribute {key}")
            value, value_pos = c.balanced(",\n", f"attribute {key}")
            if not value:
                raise c.error(f"attribute {key} has no value", value_pos)
            if key in inst.attrs:
                raise c.error(f"attribute {key} is given twice", key_pos)
            if key in COMPUTATION_ATTRIBUTES:
                refs = self.parse_computation_refs(key, value, value_pos)
                pending.computation_refs.append((key, refs, key in COMPUTATION_LIST_ATTRIBUTES))
                inst.attrs[key] = None  # placeholder keeps the attribute order
                continue
            try:
                inst.attrs[key] = parse_attribute(key, value)
            except AttributeSyntaxError as exc:
                raise c.error(f"bad {key}: {exc}", value_pos + exc.offset) from None

    # computation_refs ::= name | '{' (name (',' name)*)? '}'
    def parse_computation_refs(self, key: str, value: str, pos: int) -> list[tuple[str, int]]:
        body = value
        offset = pos
        if key in COMPUTATION_LIST_ATTRIBUTES:
            if not (value.startswith("{") and value.endswith("}")):
                raise self.c.error(f"{key} takes a list of computations in braces", pos)
            body, offset = value[1:-1], pos + 1
        refs = []
        for m in re.finditer(r"[^,\s]+", body):
            ref = m.group(0)
            if not re.fullmatch(r"%?" + _NAME.pattern, ref):
                raise self.c.error(f"'{ref}' is not a computation name", offset + m.start())
            refs.append((ref.lstrip("%"), offset + m.start()))
        if not refs and key not in COMPUTATION_LIST_ATTRIBUTES:
            raise self.c.error(f"{key} names no computation", pos)
        return refs

    def resolve_computation_refs(self) -> None:
        comps = {comp.name: comp for comp in self.module.computations}
        for pending in self.pending:
            for key, refs, is_list in pending.computation_refs:
                resolved = []
                for ref, pos in refs:
                    if ref not in comps:
                        raise self.c.error(f"%{pending.inst.name} calls computation {ref}, which "
                                           f"is not defined", pos)
                    resolved.append(comps[ref])
                pending.inst.attrs[key] = tuple(resolved) if is_list else resolved[0]

    # shape ::= '(' (shape (',' shape)*)? ')' | type '[' dims ']' layout? | 'token' | 'opaque'
    # dims  ::= (dim (',' dim)*)?       dim ::= '<='? (int | '?')
    def parse_shape(self) -> Shape:
        c = self.c
        c.skip()
        if c.accept("("):
            elements: list[Shape] = []
            if not c.accept(")"):
                while True:
                    elements.append(self.parse_shape())
                    if c.accept(")"):
                        break
                    c.expect(",", "',' or ')' in a tuple shape")
            return TupleShape(tuple(elements))
        pos = c.pos
        spelling = c.match(re.compile(r"[a-z][a-z0-9]*"), "a shape")
        try:
            element_type = ElementType.from_spelling(spelling)
        except KeyError:
            raise c.error(f"unknown element type '{spelling}'", pos) from None
        if element_type in SCALAR_ONLY_TYPES and not c.peek("["):
            return ArrayShape(element_type, ())
        if not c.peek("["):
            raise c.error(f"expected '[' after element type {spelling}")
        c.pos += 1
        dims: list[int] = []
        dynamic: list[bool] = []
        if not c.accept("]"):
            while True:
                is_dynamic = c.accept("<=")
                c.skip()
                if c.accept("?"):
                    dims.append(UNBOUNDED)
                else:
                    dim_pos = c.pos
                    value = int(c.match(_NUMBER, "a dimension size"))
                    if value < 0:
                        raise c.error("dimension sizes are non-negative", dim_pos)
                    dims.append(value)
                dynamic.append(is_dynamic)
                if c.accept("]"):
                    break
                c.expect(",", "',' or ']' in the dimensions")
        layout = None
        if c.peek("{"):
            layout = self.parse_layout(len(dims))
        return ArrayShape(element_type, tuple(dims), layout, tuple(dynamic))

    # layout ::= '{' (int (',' int)*)? (':' text)? '}'
    def parse_layout(self, rank: int) -> Layout:
        c = self.c
        start = c.pos
        c.pos += 1
        text, _ = c.balanced("}", "layout")
        c.expect("}")
        order_text, _, extra = text.partition(":")
        order_text = order_text.strip()
        try:
            order = tuple(int(x) for x in order_text.split(",")) if order_text else ()
        except ValueError:
            raise c.error(f"bad layout '{{{text}}}'", start) from None
        if sorted(order) != list(range(rank)) and order:
            raise c.error(f"layout {{{order_text}}} is not a permutation of 0..{rank - 1}", start)
        return Layout(order, extra)


def parse_module(text: str, filename: str = "<string>") -> HloModule:
    """Parse HLO module text; raises HloParseError located in ``filename``."""
    return _Parser(text, filename).parse_module()


def parse_module_file(path: str) -> HloModule:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_module(text, filename=str(path))


def parse_shape(text: str) -> Shape:
    """Parse a shape such as ``f32[4,8]{1,0}`` or ``(s32[], pred[])``."""
    parser = _Parser(text, "<shape>")
    shape = parser.parse_shape()
    if not parser.c.at_end():
        raise parser.c.error("unexpected text after the shape")
    return shape


def parse_instruction_attribute(name: str, text: str) -> Any:
    """Typed value of one attribute written as text, e.g. ('replica_groups', '{{0,1}}')."""
    try:
        return parse_attribute(name, text)
    except AttributeSyntaxError as exc:
        raise _Cursor(text, "<attribute>").error(f"bad {name}: {exc}", exc.offset) from None
