"""Parser for HLO text as XLA and JAX print it, with the grammar XLA's own parser accepts.

As in XLA's lexer, line breaks are whitespace like any other and ``/* */`` and ``//`` comments
may stand anywhere between tokens, so an attribute value may continue on the next line and
several instructions may share one. Instructions may omit their result shape where XLA infers
it (``ROOT t = tuple(a, b)``; the checker's rule infers it, and it prints like any other),
operands may be nested instructions (``add(maximum(x, y), z)``), the ``HloModule`` header may be
missing (the module is then named ``module_<entry>``), and any opcode may be written as an async
wrapper (``call-start``, ``custom-call-done``): it becomes async-start/-update/-done calling a
computation that wraps the op. An operand may name a tuple element, ``%param#0`` (nested
``%n#0#1``), as JAX 0.12's pass dumps write it: a get-tuple-element the printer writes back in
that form (see ir.py). A called computation may be written inline in its attribute
(``to_apply={...}``), and a shape may be a buffer ``b(f32[2,4])``. Nesting (tuple shapes,
nested instructions) is bounded by XLA's limit, ``MAX_NESTING_DEPTH``.

Errors are ``HloParseError``: ``file:line:col: message``, the source line and a caret. Unknown
attributes are kept verbatim (see attributes.py); unknown opcodes and element types are errors.
Each parse function carries its grammar rule above it.
"""

from __future__ import annotations

import re
from typing import Any, Union

from neuron_sim.errors import UserError
from neuron_sim.hlo.attributes import (COMPARE_ORDERS, COMPUTATION_ATTRIBUTES,
                                       COMPUTATION_LIST_ATTRIBUTES, HEADER_CHECKS,
                                       AttributeSyntaxError, Raw, WrittenAs,
                                       attribute_value_continues, parse_attribute)
from neuron_sim.hlo.checker import HloCheckError, infer_shape
from neuron_sim.hlo.dtypes import SCALAR_ONLY_TYPES, ElementType
from neuron_sim.hlo.ir import HloComputation, HloInstruction, HloModule, unique_name
from neuron_sim.hlo.literals import Literal, LiteralError, ElidedLiteralError, parse_literal
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.hlo.shapes import UNBOUNDED, ArrayShape, BufferShape, Layout, Shape, TupleShape
from neuron_sim.topology import Topology

# XLA's HloParserOptions::kDefaultMaxRecursionDepth: how deep shapes, nested instructions and
# their operand lists may nest together.
MAX_NESTING_DEPTH = 500

# The opcodes XLA's parser infers a result shape for when the text gives none (CanInferShape in
# hlo_parser.cc); every other opcode must be written with its shape.
INFERABLE_OPCODES = frozenset(Opcode.from_spelling(s) for s in (
    "abs acos acosh asin asinh add add-dependency after-all atan2 atanh batch-norm-grad "
    "batch-norm-inference batch-norm-training broadcast call ceil cholesky clamp "
    "count-leading-zeros compare complex concatenate conditional convolution copy cosine cosh "
    "opt-barrier divide domain dot erf exponential exponential-minus-one fft floor gather "
    "get-dimension-size set-dimension-size get-tuple-element imag is-finite log log-plus-one "
    "logistic and not or xor map maximum minimum multiply negate pad partition-id popcnt power "
    "ragged-dot real reduce remainder replica-id reverse round-nearest-afz round-nearest-even "
    "rsqrt scan scaled-dot scatter select shift-left shift-right-arithmetic "
    "shift-right-logical sign sine sinh sqrt cbrt reduce-window select-and-scatter sort "
    "subtract tan tanh transpose triangular-solve tuple while topk").split())

# Attributes every instruction may carry; on an async wrapper they stay on the async op (XLA
# also copies metadata, backend_config and frontend_attributes to the wrapped op).
_ASYNC_OWN_ATTRIBUTES = ("async_execution_thread", "output_to_operand_aliasing", "sharding",
                         "control-predecessors", "metadata", "backend_config",
                         "frontend_attributes", "statistics")
_ASYNC_SHARED_ATTRIBUTES = ("metadata", "backend_config", "frontend_attributes")
_ASYNC_SUFFIXES = (("-start", Opcode.ASYNC_START), ("-update", Opcode.ASYNC_UPDATE),
                   ("-done", Opcode.ASYNC_DONE))


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
_NAME_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
_WORD = re.compile(r"[a-z][a-z0-9]*")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_SKIP_START = frozenset(" \t\r\n\f\v/")
_SKIP = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)*", re.S)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_VALUE_RUN_TOP = re.compile(r'[^\s,"{}()\[\]/]+')
_VALUE_RUN_INSIDE = re.compile(r'[^"{}()\[\]]+')
_CLOSERS = {"{": "}", "(": ")", "[": "]"}
_SECTION_KEYWORDS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HEADER_INT_ATTRIBUTES = ("replica_count", "num_partitions")
_INT64_MAX = (1 << 63) - 1


class _NestingTooDeep(HloParseError):
    """Nesting beyond MAX_NESTING_DEPTH: reported as is, never retried another way."""


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

    def skip(self) -> None:
        """Skip whitespace (line breaks included) and comments, as XLA's lexer does."""
        if self.text[self.pos:self.pos + 1] not in _SKIP_START:
            return
        self.pos = _SKIP.match(self.text, self.pos).end()
        if self.text.startswith("/*", self.pos):
            raise self.error("unterminated comment")

    def found(self) -> str:
        return self.text[self.pos:self.pos + 12].split("\n")[0] or "end of input"

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
            raise self.error(f"expected {what or repr(s)}, found '{self.found()}'")

    def match(self, pattern: re.Pattern, what: str) -> str:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found '{self.found()}'")
        self.pos = m.end()
        return m.group(0)

    def lookahead(self, pattern: re.Pattern) -> re.Match | None:
        self.skip()
        return pattern.match(self.text, self.pos)

    # name ::= '%'? [A-Za-z_][A-Za-z0-9_.-]*
    def name(self, what: str = "a name") -> tuple[str, int, bool]:
        self.skip()
        start = self.pos
        percent = self.text.startswith("%", self.pos)
        self.pos += percent
        m = _NAME.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found '{self.found()}'")
        self.pos = m.end()
        return m.group(0), start, percent

    # value ::= piece+ (adjacent)   piece ::= string | '{' ... '}' | '(' ... ')' | '[' ... ']' | atom
    def value(self, what: str) -> tuple[str, int]:
        """One attribute value, verbatim: adjacent atoms, strings and balanced brackets (which
        may span lines). It ends at whitespace, a comma or a closing bracket outside brackets."""
        self.skip()
        start = i = self.pos
        text = self.text
        depth: list[str] = []
        while i < len(text):
            c = text[i]
            if c == '"':
                m = _STRING.match(text, i)
                if not m:
                    raise self.error("unterminated string", i)
                i = m.end()
            elif c in _CLOSERS:
                depth.append(_CLOSERS[c])
                i += 1
            elif c in "})]":
                if not depth:
                    break
                if depth.pop() != c:
                    raise self.error(f"mismatched '{c}' in {what}", i)
                i += 1
            elif depth:
                i = _VALUE_RUN_INSIDE.match(text, i).end()
            else:
                m = _VALUE_RUN_TOP.match(text, i)
                if m:
                    i = m.end()
                elif c == "/" and not text.startswith(("//", "/*"), i):
                    i += 1
                else:
                    break
        if depth:
            raise self.error(f"unterminated {what}", start)
        self.pos = i
        return text[start:i], start


OperandRef = Union[str, HloInstruction]


class _PendingInstruction:
    """An instruction read but not yet linked: where it starts in the text, its operands and
    called computations by name (and position), and the opcode an async start wraps. (A plain
    class, compared by identity: a dataclass costs every parse's start-up its creation.)"""

    __slots__ = ("inst", "pos", "operand_refs", "computation_refs", "wrapped_opcode")

    def __init__(self, inst: HloInstruction, pos: int,
                 operand_refs: list[tuple[OperandRef, int, Shape | None]] | None = None,
                 computation_refs: list[tuple[str, list[tuple[str, int]], bool]] | None = None,
                 wrapped_opcode: Opcode | None = None) -> None:
        self.inst = inst
        self.pos = pos
        self.operand_refs = [] if operand_refs is None else operand_refs
        self.computation_refs = [] if computation_refs is None else computation_refs
        self.wrapped_opcode = wrapped_opcode


class _Parser:
    def __init__(self, text: str, filename: str) -> None:
        self.c = _Cursor(text, filename)
        self.module: HloModule | None = None
        self.pending: list[_PendingInstruction] = []
        self.depth = 0
        self.saw_percent = False
        self.saw_operand_shapes = False
        self.saw_signature = False
        self.saw_index_comment = False
        self.saw_long_operand_list = False
        # (computation, the result shape its signature writes, where): checked once shapes are
        # inferred.
        self.signatures: list[tuple[HloComputation, Shape, int]] = []

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING_DEPTH:
            err = self.c.error(f"nesting deeper than {MAX_NESTING_DEPTH} levels (XLA's maximum "
                               f"recursion depth)", pos)
            raise _NestingTooDeep(err.message, err.filename, err.line, err.col, err.source_line)

    # module ::= ('HloModule' name ':'? (',' attribute)*)? section* computation+
    def parse_module(self) -> HloModule:
        c = self.c
        c.skip()
        header = bool(re.match(r"HloModule(?![A-Za-z0-9_.\-])", c.text[c.pos:c.pos + 10]))
        if not header and not self._at_headerless_module():
            raise c.error(f"expected 'HloModule' or a computation at the start of the module, "
                          f"found '{c.found()}'")
        module = HloModule("")
        self.module = module
        if header:
            c.pos += len("HloModule")
            module.name, _, _ = c.name("the module name")
            c.accept(":")
            self.parse_header_attributes(module)
        module.sections = self.parse_sections()
        names_seen: dict[str, int] = {}
        while not c.at_end():
            self.inline_computations: list[HloComputation] = []
            comp, pos, wrapped = self.parse_computation()
            if comp.name in names_seen:
                raise c.error(f"computation {comp.name} is defined twice", pos)
            if comp.is_entry and module.entry is not None:
                raise c.error("expects only one ENTRY", pos)
            names_seen[comp.name] = pos
            for inline in self.inline_computations:
                inline.name = unique_name(inline.name, set(names_seen) | {
                    other.name for other in module.computations})
                module.add_computation(inline)
            for wrapped_comp in wrapped:
                module.add_computation(wrapped_comp)
            module.add_computation(comp, entry=comp.is_entry)
            comp.is_entry = comp is module.entry
        if not module.computations:
            raise c.error("the module has no computations")
        if module.entry is None:
            # XLA takes the last computation as the entry when none is marked.
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        if not header:
            module.name = f"module_{module.entry.name}"
        self.resolve_computation_refs()
        self.check_async_chains()
        self.infer_missing_shapes()
        self.check_operand_shapes()
        self.check_signatures()
        module.style_percent = self.saw_percent
        module.style_operand_shapes = self.saw_operand_shapes
        module.style_signatures = self.saw_signature
        module.style_index_comments = self.saw_index_comment or not self.saw_long_operand_list
        return module

    def _at_headerless_module(self) -> bool:
        """XLA reads a bare computation list when the text starts with ENTRY or ``name {``."""
        c = self.c
        start = c.pos
        try:
            if re.match(r"ENTRY\s", c.text[c.pos:c.pos + 6]):
                return True
            c.name()
            c.accept(":")
            return c.accept("{")
        except HloParseError:
            return False
        finally:
            c.pos = start

    def parse_header_attributes(self, module: HloModule) -> None:
        c = self.c
        while c.accept(","):
            key, key_pos, _ = c.name("a header attribute name")
            c.expect("=", f"'=' after header attribute {key}")
            value, value_pos = c.value(f"header attribute {key}")
            if not value:
                raise c.error(f"header attribute {key} has no value", value_pos)
            if key in _HEADER_INT_ATTRIBUTES:
                if not _NUMBER.fullmatch(value) or int(value) < 1:
                    raise c.error(f"{key} must be a positive integer, got '{value}'", value_pos)
                if int(value) > _INT64_MAX:  # XLA holds both counts in an int64
                    raise c.error(f"{key}={value} is out of the int64 range XLA reads it in",
                                  value_pos)
                module.header[key] = int(value)
            else:
                try:
                    HEADER_CHECKS.get(key, lambda text: None)(value)
                except AttributeSyntaxError as exc:
                    raise c.error(f"bad {key}: {exc}", value_pos + exc.offset) from None
                module.header[key] = Raw(value)

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

    # computation ::= 'ENTRY'? name ':'? signature? '{' instruction+ '}' (',' attribute)*
    # signature   ::= '(' (param (',' param)*)? ')' '->' shape     param ::= name ':'? shape
    def parse_computation(self) -> tuple[HloComputation, int, list[HloComputation]]:
        c = self.c
        c.skip()
        start = c.pos
        is_entry = bool(re.match(r"ENTRY\s", c.text[c.pos:c.pos + 6]))
        if is_entry:
            c.pos += len("ENTRY")
        name, _, percent = c.name("a computation name")
        c.accept(":")
        self.saw_percent |= percent
        comp = HloComputation(name)
        comp.is_entry = is_entry
        if c.accept("("):
            self.saw_signature = True
            if not c.accept(")"):
                while True:
                    c.name("a parameter name")
                    c.accept(":")
                    self.parse_shape()
                    if c.accept(")"):
                        break
                    c.expect(",", "',' or ')' in the computation signature")
            c.expect("->", "'->' after the computation parameters")
            c.skip()
            shape_pos = c.pos
            self.signatures.append((comp, self.parse_shape(), shape_pos))
        wrapped = self.parse_computation_body(comp, start)
        comp.trailing = self.parse_computation_attributes()
        return comp, start, wrapped

    # body ::= '{' instruction+ '}'
    def parse_computation_body(self, comp: HloComputation, start: int) -> list[HloComputation]:
        """Read the instructions of ``comp`` and resolve their operands (names are scoped to
        the computation); returns the async wrapper computations its sugared ops create."""
        c = self.c
        name = comp.name
        c.expect("{", "'{' to open the computation body")
        by_name: dict[str, HloInstruction] = {}
        pendings: list[_PendingInstruction] = []
        root: HloInstruction | None = None
        self.anon_names: set[str] = set()
        self.tuple_elements: dict[tuple[Any, int], _PendingInstruction] = {}
        while not c.accept("}"):
            if c.at_end():
                raise c.error(f"computation {name} is not closed with '}}'", start)
            parsed, is_root = self.parse_instruction()
            for pending in parsed:
                inst = pending.inst
                if inst.written_as_operand:  # named below, once every name is known
                    inst.parent = comp
                    comp.instructions.append(inst)
                    pendings.append(pending)
                    continue
                if inst.name in by_name:
                    raise c.error(f"instruction %{inst.name} is defined twice in {name}",
                                  pending.pos)
                by_name[inst.name] = inst
                inst.parent = comp
                comp.instructions.append(inst)
                pendings.append(pending)
            if is_root:
                if root is not None:
                    raise c.error(f"computation {name} has two ROOT instructions", parsed[-1].pos)
                root = parsed[-1].inst
        if not comp.instructions:
            raise c.error(f"computation {name} has no instructions", start)
        comp.root = root if root is not None else comp.instructions[-1]
        self.name_tuple_elements(by_name)
        for pending in pendings:
            for ref, pos, _ in pending.operand_refs:
                operand = ref if isinstance(ref, HloInstruction) else by_name.get(ref)
                if operand is None and pending.inst.written_as_operand:
                    raise c.error(f"operand %{ref}#{pending.inst.attrs['index']} names %{ref}, "
                                  f"which is not defined in computation {name}", pos)
                if operand is None:
                    raise c.error(f"instruction %{pending.inst.name} uses %{ref}, which is "
                                  f"not defined in computation {name}", pos)
                pending.inst.append_operand(operand)
        wrapped = [self.wrap_async(pending, comp) for pending in pendings
                   if pending.wrapped_opcode is not None]
        self.pending.extend(pendings)
        return [w for w in wrapped if w is not None]

    # inline_computation ::= '{' instruction+ '}'          (``to_apply={ ... }``)
    def parse_inline_computation(self, key: str, pos: int) -> HloComputation:
        """A computation written in the attribute that calls it, as XLA's ParseHloComputation
        reads one: a new scope of names, the computation named ``_`` (made unique, as XLA's
        module does), added to the module before the computation that calls it and printed,
        like XLA prints it, as a computation of its own."""
        saved = (self.anon_names, self.tuple_elements)
        comp = HloComputation("_")
        wrapped = self.parse_computation_body(comp, pos)
        self.anon_names, self.tuple_elements = saved
        self.inline_computations.extend(wrapped + [comp])
        return comp

    def forget_tuple_elements(self, dropped: list[_PendingInstruction]) -> None:
        """Undo the tuple-element operands read on a path the operand parser abandoned."""
        for key, pending in list(self.tuple_elements.items()) if dropped else ():
            if any(pending is d for d in dropped):
                del self.tuple_elements[key]

    def name_tuple_elements(self, by_name: dict[str, HloInstruction]) -> None:
        """Name each get-tuple-element read from a ``%p#i`` operand ``p.i`` (made unique among
        the computation's names), in the order they were read."""
        taken = set(by_name)
        for pending in self.tuple_elements.values():
            ref = pending.operand_refs[0][0]
            base = ref if isinstance(ref, str) else ref.name
            pending.inst.name = unique_name(f"{base}.{pending.inst.attrs['index']}", taken)
            taken.add(pending.inst.name)

    # computation_attributes ::= (',' name '=' value)*
    def parse_computation_attributes(self) -> str:
        c = self.c
        parts = []
        while c.accept(","):
            key, _, _ = c.name("a computation attribute name")
            c.expect("=", f"'=' after computation attribute {key}")
            value, value_pos = c.value(f"computation attribute {key}")
            if not value:
                raise c.error(f"computation attribute {key} has no value", value_pos)
            parts.append(f", {key}={value}")
        return "".join(parts)

    # instruction ::= 'ROOT'? name '=' instruction_rhs
    def parse_instruction(self) -> tuple[list[_PendingInstruction], bool]:
        c = self.c
        c.skip()
        is_root = bool(re.match(r"ROOT\s", c.text[c.pos:c.pos + 5]))
        if is_root:
            c.pos += 4
        name, name_pos, percent = c.name("an instruction name")
        self.saw_percent |= percent
        c.expect("=", f"'=' after %{name}")
        parsed: list[_PendingInstruction] = []
        self.parse_instruction_rhs(name, name_pos, parsed, allow_attributes=True)
        return parsed, is_root

    # instruction_rhs ::= shape? opcode operands (',' attribute)*
    def parse_instruction_rhs(self, name: str, pos: int, parsed: list[_PendingInstruction],
                              allow_attributes: bool) -> HloInstruction:
        """Parse one instruction (nested ones first, into ``parsed``); a nested instruction
        (``name`` empty) gets XLA's ``<opcode>.anon`` name and takes no attributes."""
        c = self.c
        self.enter(pos)
        shape = self.parse_shape() if self.can_be_shape() else None
        c.skip()
        opcode_pos = c.pos
        opcode, wrapped_opcode = self.parse_opcode()
        if shape is None and opcode not in INFERABLE_OPCODES:
            spelling = wrapped_opcode.spelling if wrapped_opcode else opcode.spelling
            raise c.error(f"{spelling} needs its result shape written: XLA cannot infer it",
                          opcode_pos)
        if opcode is Opcode.INFEED and not isinstance(shape, TupleShape):
            raise c.error("infeed must have a non-empty tuple shape", opcode_pos)
        if not name:
            name = unique_name(f"{opcode.spelling}.anon", self.anon_names)
            self.anon_names.add(name)
        pending = _PendingInstruction(HloInstruction(name, opcode, shape), pos,
                                      wrapped_opcode=wrapped_opcode)
        inst = pending.inst
        c.expect("(", f"'(' after {opcode.spelling}")
        if opcode is Opcode.CONSTANT:
            c.pos -= 1
            text, text_pos = c.value("constant literal")
            inner = text[1:-1]
            lead = len(inner) - len(inner.lstrip())
            inst.literal = self.parse_literal_text(shape, inner.strip(), text_pos + 1 + lead)
        elif opcode is Opcode.PARAMETER:
            c.skip()
            num_pos = c.pos
            number = c.match(_NUMBER, "a parameter number")
            if int(number) < 0:
                raise c.error("parameter numbers are non-negative", num_pos)
            inst.parameter_number = int(number)
            c.expect(")")
        else:
            self.parse_operands(pending, parsed)
        if allow_attributes:
            self.parse_attributes(pending)
        parsed.append(pending)
        self.depth -= 1
        return inst

    # opcode ::= spelling | spelling ('-start' | '-update' | '-done')
    def parse_opcode(self) -> tuple[Opcode, Opcode | None]:
        c = self.c
        pos = c.pos
        spelling = c.match(_OPCODE, "an opcode")
        try:
            return Opcode.from_spelling(spelling), None
        except KeyError:
            pass
        for suffix, async_opcode in _ASYNC_SUFFIXES:
            if spelling.endswith(suffix):
                try:
                    return async_opcode, Opcode.from_spelling(spelling[:-len(suffix)])
                except KeyError:
                    raise c.error(f"unknown opcode '{spelling}' ('{spelling[:-len(suffix)]}' "
                                  f"is not an opcode to wrap in {async_opcode.spelling})",
                                  pos) from None
        raise c.error(f"unknown opcode '{spelling}'", pos)

    def can_be_shape(self) -> bool:
        """A shape starts with '(', a word and '[' (an element type, else an error naming it), a
        scalar-only type (token, opaque), or 'b('."""
        c = self.c
        c.skip()
        if c.peek("("):
            return True
        m = _WORD.match(c.text, c.pos)
        if not m:
            return False
        after = c.text[m.end():m.end() + 1]
        if after == "[" or m.group(0) == "b" and after == "(":
            return True
        try:
            element_type = ElementType.from_spelling(m.group(0))
        except KeyError:
            return False
        # 'token.0' is a name that begins with a type (XLA's lexer reads the longest name).
        return element_type in SCALAR_ONLY_TYPES and not _NAME_CHAR.match(after)

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

    # operands ::= (operand (',' operand)*)? ')'
    # operand  ::= shape? name | shape? opcode operands      (a nested instruction)
    def parse_operands(self, pending: _PendingInstruction,
                       parsed: list[_PendingInstruction]) -> None:
        c = self.c
        start = c.pos
        self.enter(start)
        if not c.accept(")"):
            while True:
                pending.operand_refs.append(self.parse_operand(parsed))
                if c.accept(")"):
                    break
                c.expect(",", "',' or ')' after an operand")
        if len(pending.operand_refs) > 5:
            self.saw_long_operand_list = True
            self.saw_index_comment |= "/*index=" in c.text[start:c.pos]
        self.depth -= 1

    def parse_operand(self, parsed: list[_PendingInstruction]
                      ) -> tuple[OperandRef, int, Shape | None]:
        """A named operand if a name followed by ',' or ')' is there, else (like XLA) a nested
        instruction without attributes."""
        c = self.c
        c.skip()
        start, depth, read = c.pos, self.depth, len(parsed)
        try:
            shape = self.parse_shape() if self.can_be_shape() else None
            name, pos, percent = c.name("an operand name")
            ref: OperandRef = name
            while c.accept("#"):
                ref = self.tuple_element_operand(ref, pos, parsed)
            if c.accept(",") or c.accept(")"):
                c.pos -= 1
                self.saw_percent |= percent
                self.saw_operand_shapes |= shape is not None
                return ref, pos, shape
            operand_error = c.error(f"expected ',' or ')' after operand %{name}, found "
                                    f"'{c.found()}'")
        except _NestingTooDeep:
            raise
        except HloParseError as exc:
            operand_error = exc
        c.pos, self.depth = start, depth
        self.forget_tuple_elements(parsed[read:])
        del parsed[read:]
        try:
            nested = self.parse_instruction_rhs("", start, parsed, allow_attributes=False)
        except _NestingTooDeep:
            raise
        except HloParseError as nested_error:
            # Report whichever reading got further into the text.
            if (operand_error.line, operand_error.col) > (nested_error.line, nested_error.col):
                raise operand_error from None
            raise
        return nested, start, None

    # tuple_element ::= operand_name ('#' int)+        (``%param#0``, ``%while#1#0``)
    def tuple_element_operand(self, ref: OperandRef, pos: int,
                              parsed: list[_PendingInstruction]) -> HloInstruction:
        """The element ``#i`` of the tuple ``ref`` names, as XLA's pass dumps write an operand
        since JAX 0.12: a get-tuple-element of ``ref``, flagged ``written_as_operand`` so the
        printer writes it back in this form. One per (tuple, index) in a computation; it takes
        its place before its first user and its name once the computation is read."""
        c = self.c
        c.skip()
        index_pos = c.pos
        m = re.compile(r"\d+").match(c.text, c.pos)
        if not m:
            raise c.error(f"expected a tuple index after '#', found '{c.found()}'")
        c.pos = m.end()
        index = int(m.group(0))
        if index > _INT64_MAX:
            raise c.error(f"tuple index {index} is out of the int64 range", index_pos)
        key = (ref if isinstance(ref, str) else id(ref), index)
        known = self.tuple_elements.get(key)
        if known is not None:
            return known.inst
        inst = HloInstruction("", Opcode.GET_TUPLE_ELEMENT, None, attrs={"index": index})
        inst.written_as_operand = True
        pending = _PendingInstruction(inst, pos, operand_refs=[(ref, pos, None)])
        self.tuple_elements[key] = pending
        parsed.append(pending)
        return inst

    # attribute ::= name '=' value
    def parse_attributes(self, pending: _PendingInstruction) -> None:
        c = self.c
        inst = pending.inst
        while c.accept(","):
            key, key_pos, _ = c.name("an attribute name")
            c.expect("=", f"'=' after attribute {key}")
            if key == "origin" and inst.shape is None:
                raise c.error("expects instruction shape", key_pos)
            c.skip()
            if key in COMPUTATION_ATTRIBUTES and key not in COMPUTATION_LIST_ATTRIBUTES \
                    and c.peek("{"):
                if key in inst.attrs:
                    raise c.error(f"attribute {key} is given twice", key_pos)
                inst.attrs[key] = self.parse_inline_computation(key, c.pos)
                continue
            if key == "literal":
                if key in inst.attrs:
                    raise c.error(f"attribute {key} is given twice", key_pos)
                inst.attrs[key] = self.parse_literal_attribute()
                continue
            value, value_pos = c.value(f"attribute {key}")
            if not value:
                raise c.error(f"attribute {key} has no value", value_pos)
            value = self.continue_value(key, value, value_pos)
            if key in inst.attrs:
                raise c.error(f"attribute {key} is given twice", key_pos)
            if key == "order" and inst.opcode is Opcode.COMPARE and value in COMPARE_ORDERS:
                if "type" in inst.attrs:
                    raise c.error("compare takes its order as order= or type=, not both",
                                  key_pos)
                inst.attrs["type"] = WrittenAs(COMPARE_ORDERS[value], key, value)
                continue
            if key in COMPUTATION_ATTRIBUTES:
                refs = self.parse_computation_refs(key, value, value_pos)
                pending.computation_refs.append((key, refs, key in COMPUTATION_LIST_ATTRIBUTES))
                inst.attrs[key] = None  # placeholder keeps the attribute order
                continue
            try:
                inst.attrs[key] = parse_attribute(key, value)
            except AttributeSyntaxError as exc:
                raise c.error(f"bad {key}: {exc}", value_pos + exc.offset) from None

    # literal_attribute ::= '(' (literal_attribute (',' literal_attribute)*)? ')'
    #                     | shape literal          (custom-call's literal=f32[] 0.1)
    def parse_literal_attribute(self) -> Raw:
        """A custom-call's ``literal=``, as XLA's ParseLiteral reads it: a shape and a literal of
        that shape (checked), or a tuple of those in parentheses; kept as written."""
        c = self.c
        c.skip()
        start = c.pos
        self.read_shaped_literal()
        return Raw(c.text[start:c.pos])

    def read_shaped_literal(self) -> None:
        c = self.c
        self.enter(c.pos)
        if c.accept("("):
            while not c.accept(")"):
                self.read_shaped_literal()
                c.skip()
                if not c.peek(")"):
                    c.expect(",", "',' to separate tuple elements")
        else:
            shape = self.parse_shape()
            text, text_pos = c.value("literal")
            if not text:
                raise c.error(f"expected a literal of shape {shape}, found '{c.found()}'")
            self.parse_literal_text(shape, text, text_pos)
        self.depth -= 1

    def continue_value(self, key: str, value: str, pos: int) -> str:
        """The whole value when it goes on past whitespace or a comma: a bracket cannot follow
        a finished attribute, so ``mesh[...] {axes}`` is one value; past a comma only where
        the attribute says so (mesh-form replica groups: ``mesh[...], device_ids=...``)."""
        c = self.c
        while True:
            before = c.pos
            c.skip()
            if c.peek(",") and attribute_value_continues(key, value):
                c.pos += 1
            elif not (c.peek("{") or c.peek("(") or c.peek("[")):
                c.pos = before
                return value
            c.value(f"attribute {key}")
            value = c.text[pos:c.pos]

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

    def wrap_async(self, pending: _PendingInstruction,
                   comp: HloComputation) -> HloComputation | None:
        """``<op>-start`` becomes async-start calling a new computation whose root is the op
        (XLA's async wrapper); ``<op>-update``/``-done`` must follow a start wrapping the same
        op. Returns the new computation, if any."""
        inst = pending.inst
        wrapped = pending.wrapped_opcode
        if inst.opcode is not Opcode.ASYNC_START:
            start = inst.operands[0] if len(inst.operands) == 1 else None
            origin = start
            while origin is not None and origin.opcode is Opcode.ASYNC_UPDATE and origin.operands:
                origin = origin.operands[0]
            calls = origin.attrs.get("calls") if origin is not None else None
            start_op = getattr(getattr(calls, "root", None), "opcode", None)
            if start is None or start.opcode not in (Opcode.ASYNC_START, Opcode.ASYNC_UPDATE):
                raise self.c.error(f"{wrapped.spelling}-{inst.opcode.spelling.split('-')[1]} "
                                   f"expects one async op as its operand", pending.pos)
            if start_op is not None and start_op is not wrapped:
                raise self.c.error(f"expected the async wrapped opcode to be "
                                   f"{start_op.spelling}, but got {wrapped.spelling}", pending.pos)
            return None
        shape = inst.shape
        if not (isinstance(shape, TupleShape) and len(shape.elements) >= 2
                and isinstance(shape.elements[0], TupleShape)):
            raise self.c.error(f"{wrapped.spelling}-start needs its shape written as "
                               f"((operands), result, state...)", pending.pos)
        body = HloComputation("async_wrapped")
        body.syntax_sugar = True
        params = []
        for i, operand in enumerate(inst.operands):
            param = HloInstruction(unique_name("async_param", {p.name for p in params}),
                                   Opcode.PARAMETER, operand.shape, parameter_number=i)
            params.append(param)
        op = HloInstruction(wrapped.spelling, wrapped, shape.elements[1], params)
        own = {k: v for k, v in inst.attrs.items() if k in _ASYNC_OWN_ATTRIBUTES}
        op.attrs = {k: v for k, v in inst.attrs.items() if k not in _ASYNC_OWN_ATTRIBUTES
                    or k in _ASYNC_SHARED_ATTRIBUTES}
        wrapped_pending = _PendingInstruction(op, pending.pos,
                                              computation_refs=pending.computation_refs)
        pending.computation_refs = []
        self.pending.append(wrapped_pending)
        for member in params + [op]:
            member.parent = body
            body.instructions.append(member)
        body.root = op
        inst.attrs = {**own, "calls": body}
        return body

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

    def infer_missing_shapes(self) -> None:
        """Give every instruction written without a shape the one the checker's rule infers
        (with XLA's default layout), callees and operands first."""
        positions = {p.inst: p.pos for p in self.pending}
        if not any(p.inst.shape is None for p in self.pending):
            return
        module = self.module
        topology = Topology(module.replica_count, module.num_partitions)
        for comp in module.post_order_computations():
            for inst in comp.post_order():
                if inst.shape is not None:
                    continue
                pos = positions.get(inst, 0)
                unknown = [o.name for o in inst.operands if o.shape is None] + [
                    f"the root of {called.name}" for called in inst.called_computations
                    if called.root.shape is None]
                if unknown:
                    raise self.c.error(f"cannot infer the shape of %{inst.name}: "
                                       f"{', '.join(unknown)} has no shape yet (a cycle)", pos)
                try:
                    # XLA's shape inference ignores floating-point precision (its reducer
                    # checks are CompatibleIgnoringFpPrecision); the verifier's option decides.
                    inferred = infer_shape(inst, topology, allow_mixed_precision=True)
                except HloCheckError as exc:
                    if inst.written_as_operand:
                        sigil = "%" if self.saw_percent else ""
                        raise self.c.error(f"operand {inst.operand_reference(sigil)}: "
                                           f"{exc.reason}", pos) from None
                    raise self.c.error(f"cannot infer the shape of %{inst.name} "
                                       f"({inst.opcode.spelling}): {exc.reason}", pos) from None
                inst.shape = inferred.with_default_layout()

    def check_signatures(self) -> None:
        """A computation's signature gives its root's shape, layouts aside (XLA's
        ShapeUtil::Compatible check in ParseComputation)."""
        for comp, shape, pos in self.signatures:
            root = comp.root
            if not shape.compatible(root.shape):
                raise self.c.error(f"Shape of computation {comp.name}, {shape.without_layout()}, "
                                   f"is not compatible with that of its root instruction "
                                   f"{root.name}, {root.shape.without_layout()}", pos)

    def check_async_chains(self) -> None:
        """As XLA's parser: an async-update/-done that names its computation or thread names
        the ones of its async-start (they are inherited from it), and no two async-starts run
        the same computation."""
        started: set[HloComputation] = set()
        for pending in self.pending:
            inst = pending.inst
            if inst.opcode is Opcode.ASYNC_START:
                calls = inst.attrs.get("calls")
                if calls is None:  # XLA: calls= is required on an async-start
                    raise self.c.error("attribute calls is expected", pending.pos)
                if calls in started:
                    raise self.c.error(f"Computation {calls.name} is already referenced by "
                                       f"another async op", pending.pos)
                started.add(calls)
                continue
            if inst.opcode not in (Opcode.ASYNC_UPDATE, Opcode.ASYNC_DONE):
                continue
            start = inst.operands[0] if inst.operands else None
            while start is not None and start.opcode is Opcode.ASYNC_UPDATE and start.operands:
                start = start.operands[0]
            if start is None or start.opcode is not Opcode.ASYNC_START:
                continue
            thread = inst.attrs.get("async_execution_thread")
            start_thread = start.attrs.get("async_execution_thread")
            start_thread = _unquote(start_thread) if start_thread is not None else "main"
            if thread is not None and _unquote(thread) != start_thread:
                raise self.c.error(f"Expect async_execution_thread to be {start_thread}, but "
                                   f"got {_unquote(thread)}", pending.pos)
            calls = inst.attrs.get("calls")
            if calls is not None and calls is not start.attrs.get("calls"):
                raise self.c.error(f"Expect async_wrapped_computation to be "
                                   f"{start.attrs['calls'].name}, but got {calls.name}",
                                   pending.pos)

    def check_operand_shapes(self) -> None:
        for pending in self.pending:
            for (ref, pos, shape), operand in zip(pending.operand_refs, pending.inst.operands):
                if shape is not None and not shape.compatible(operand.shape):
                    raise self.c.error(f"operand {operand.operand_reference()} is written with "
                                       f"shape {shape} but is defined as {operand.shape}", pos)

    # shape ::= '(' (shape (',' shape)*)? ')' | type '[' dims ']' layout? | 'token' | 'opaque'
    # dims  ::= (dim (',' dim)*)?       dim ::= '<='? (int | '?')
    def parse_shape(self) -> Shape:
        c = self.c
        c.skip()
        self.enter(c.pos)
        if c.accept("("):
            elements: list[Shape] = []
            if not c.accept(")"):
                while True:
                    elements.append(self.parse_shape())
                    if c.accept(")"):
                        break
                    c.expect(",", "',' or ')' in a tuple shape")
            self.depth -= 1
            return TupleShape(tuple(elements))
        pos = c.pos
        spelling = c.match(_WORD, "a shape")
        if spelling == "b" and c.peek("("):  # shape ::= 'b(' shape ')', a buffer of an array
            c.pos += 1
            c.skip()
            inner_pos = c.pos
            inner = self.parse_shape()
            if not isinstance(inner, ArrayShape) or inner.is_token:
                raise c.error(f"a buffer shape holds an array, not {inner}", inner_pos)
            c.expect(")", "')' at the end of the buffer shape")
            self.depth -= 1
            return BufferShape(inner)
        try:
            element_type = ElementType.from_spelling(spelling)
        except KeyError:
            raise c.error(f"unknown element type '{spelling}'", pos) from None
        self.depth -= 1
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
        if c.peek("{") and re.match(r"\{\s*[\d:}]", c.text[c.pos:c.pos + 40]):
            layout = self.parse_layout(len(dims))
        return ArrayShape(element_type, tuple(dims), layout, tuple(dynamic))

    def balanced_braces(self, what: str) -> str:
        """The text from the '{' here to its matching '}', and nothing after it: a layout may
        be followed by an opcode or an operand name with no space (``{1,0}parameter(0)``,
        ``f32[4]{0}%x``), which XLA's lexer reads as the next token."""
        c = self.c
        start = depth = c.pos
        depth = 0
        for i in range(start, len(c.text)):
            char = c.text[i]
            if char in "{(":
                depth += 1
            elif char in "})":
                depth -= 1
                if depth == 0:
                    c.pos = i + 1
                    return c.text[start:c.pos]
        raise c.error(f"unterminated {what}", start)

    # layout ::= '{' (int (',' int)*)? (':' text)? '}'
    def parse_layout(self, rank: int) -> Layout:
        c = self.c
        start = c.pos
        text = self.balanced_braces("layout")
        text = text[1:-1]
        order_text, _, extra = text.partition(":")
        order_text = order_text.strip()
        try:
            order = tuple(int(x) for x in order_text.split(",")) if order_text else ()
        except ValueError:
            raise c.error(f"bad layout '{{{text}}}'", start) from None
        if sorted(order) != list(range(rank)) and order:
            raise c.error(f"layout {{{order_text}}} is not a permutation of 0..{rank - 1}", start)
        if extra:
            message = _sparse_layout_problem(extra, rank)
            if message:
                raise c.error(message, start)
        return Layout(order, extra)


_DIM_LEVEL_TYPE = re.compile(r"\s*[DCSH]\+?~?\s*")


def _sparse_layout_problem(extra: str, rank: int) -> str:
    """What XLA's ParseLayout and ParseShape refuse in the part of a layout after ':' (''
    when nothing): dim level types ``D(D,C)`` that are not D/C/S/H or not one per dimension,
    tiles on a sparse layout, a physical shape ``P(...)`` on a dense one."""
    rest = extra.lstrip()
    sparse = False
    if rest.startswith("D"):
        close = rest.find(")")
        if not rest[1:].lstrip().startswith("(") or close < 0:
            return "expected a DimLevelType abbreviation (D, C, or S)"
        items = rest[rest.index("(") + 1:close].split(",")
        if any(not _DIM_LEVEL_TYPE.fullmatch(item) for item in items):
            return "expected a DimLevelType abbreviation (D, C, or S)"
        if len(items) != rank:
            return f"Dimensions size is {rank}, but dim level types size is {len(items)}."
        sparse = any(item.strip()[0] != "D" for item in items)
        rest = rest[close + 1:].lstrip()
        if sparse and rest.startswith("T"):
            return f"Layout has tiles, but is for a sparse array: {{{extra}}}"
    depth = 0
    for i, char in enumerate(rest):
        if char == "(" and depth == 0 and rest[i - 1:i] == "P" and not (
                i > 1 and rest[i - 2].isalnum()) and not sparse:
            return f"Layout has physical shape, but is not for a sparse array: {{{extra}}}"
        depth += {"(": 1, ")": -1}.get(char, 0)
    return ""


def _unquote(value: Any) -> str:
    """The text of a string attribute kept verbatim (``"main"`` -> ``main``)."""
    text = str(value)
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


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
