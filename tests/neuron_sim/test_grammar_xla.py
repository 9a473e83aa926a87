"""The grammar XLA's parser reads (xla/hlo/parser/hlo_parser.cc, hlo_lexer.cc): line breaks and
comments anywhere, shapes XLA infers, nested operands, modules without a header, async wrappers,
XLA's nesting limit, and linear-time constants. Expected values come from XLA's source (cited
per test) or a hand derivation in the docstring."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloParseError, Opcode, parse_module
from neuron_sim.hlo.checker import check_module
from neuron_sim.hlo.parser import MAX_NESTING_DEPTH, parse_shape


def round_trips(module) -> None:
    printed = module.to_text()
    again = parse_module(printed)
    assert again.structurally_equal(module)
    assert again.to_text() == printed


def parse_error(text: str) -> HloParseError:
    with pytest.raises(HloParseError) as info:
        parse_module(text, "g.hlo")
    return info.value


# -- 1. line breaks are whitespace; comments anywhere ------------------------------------------

SPREAD = """HloModule spread
// a line comment before everything
cond {
  c = s32[] parameter(0)  /* a block comment */ k = s32[] constant(4)
  ROOT lt = pred[] compare(c, k), direction=LT
}
body { b = s32[] parameter(0) one = s32[] constant(1) ROOT n = s32[] add(b, one) }
ENTRY main {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=
      cond, body=body, backend_config={
    "known_trip_count":{"n":"4"}
  } // trailing comment
}
"""


def test_instructions_share_lines_and_attribute_values_continue_on_the_next_line():
    """XLA's lexer skips '\\n' like a space: `condition=` then `cond` on the next line is one
    attribute, and three instructions may stand on one line."""
    module = parse_module(SPREAD)
    body = module.computation("body")
    assert [i.name for i in body.instructions] == ["b", "one", "n"]
    w = module.entry.root
    assert w.attrs["condition"] is module.computation("cond")
    assert w.attrs["body"] is body
    assert '"known_trip_count"' in str(w.attrs["backend_config"])
    check_module(module)
    round_trips(module)


def test_comments_inside_a_literal_are_skipped():
    """XLA prints rank-2+ literals with /*i0=N*/ comments; the lexer skips them."""
    module = parse_module("HloModule m\nENTRY e {\n  ROOT k = s32[2,2] constant({ /*i0=0*/ "
                          "{1, 2}, /*i0=1*/ {3, 4} })\n}\n")
    np.testing.assert_array_equal(module.entry.root.literal.value, [[1, 2], [3, 4]])


def test_errors_keep_file_line_col_and_caret_across_lines():
    text = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x),\n" \
           "    dimensions={1,a}\n}\n"
    err = parse_error(text)
    assert (err.line, err.col) == (5, 19) and "bad dimensions" in err.message
    assert str(err).splitlines()[1:] == ["    dimensions={1,a}", " " * 18 + "^"]


# -- 2. shapes XLA infers ----------------------------------------------------------------------

def test_missing_shapes_are_inferred_and_printed():
    """Shapes by hand: add of two f32[2,3] is f32[2,3]; tuple(a, gte) of f32[2,3] and the s32[]
    element 0 of (s32[], pred[]) is (f32[2,3], s32[]). Layouts are XLA's default ({1,0})."""
    module = parse_module("""HloModule m
ENTRY e {
  p0 = f32[2,3]{1,0} parameter(0)
  p1 = f32[2,3]{1,0} parameter(1)
  q = (s32[], pred[]) parameter(2)
  a = add(p0, p1)
  g = get-tuple-element(q), index=0
  ROOT t = tuple(a, g)
}
""")
    entry = module.entry
    assert str(entry.instruction("a").shape) == "f32[2,3]{1,0}"
    assert str(entry.instruction("g").shape) == "s32[]"
    assert str(entry.root.shape) == "(f32[2,3]{1,0}, s32[])"
    assert "ROOT t = (f32[2,3]{1,0}, s32[]) tuple(a, g)" in module.to_text()
    check_module(module)
    round_trips(module)


@pytest.mark.parametrize("rhs, opcode", [
    ("reshape(p)", "reshape"), ("slice(p), slice={[0:1]}", "slice"),
    ("all-reduce(p), to_apply=e", "all-reduce"), ("convert(p)", "convert"),
])
def test_ops_xla_cannot_infer_need_their_shape(rhs: str, opcode: str):
    """hlo_parser.cc CanInferShape returns false for these: the shape must be written."""
    err = parse_error(f"HloModule m\nENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT r = {rhs}\n}}\n")
    assert (err.line, err.col) == (4, 12)
    assert f"{opcode} needs its result shape written" in err.message


def test_an_uninferable_operand_combination_names_the_instruction():
    err = parse_error("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  b = s32[3] parameter(1)\n"
                      "  ROOT c = add(a, b)\n}\n")
    assert err.line == 5 and "cannot infer the shape of %c (add)" in err.message


# -- 3. nested instructions as operands ----------------------------------------------------------

def test_nested_operands_become_anonymous_instructions_before_their_user():
    """hlo_parser.cc ParseOperands: an operand that is not `shape? name` followed by ',' or ')'
    is a nested instruction without attributes, named `<opcode>.anon` (NameUniquer)."""
    module = parse_module("""HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = f32[4] parameter(2)
  ROOT r = f32[1,4] reshape(add(maximum(x, y), z))
}
""")
    names = [i.name for i in module.entry.instructions]
    assert names == ["x", "y", "z", "maximum.anon", "add.anon", "r"]
    add = module.entry.instruction("add.anon")
    assert add.opcode is Opcode.ADD and [o.name for o in add.operands] == ["maximum.anon", "z"]
    assert str(add.shape) == "f32[4]{0}"
    check_module(module)
    round_trips(module)


def test_a_nested_parameter_with_its_shape():
    module = parse_module("HloModule m\nENTRY e {\n  ROOT r = f32[8] reshape(f32[1,8] parameter(0))\n}\n")
    param = module.entry.instruction("parameter.anon")
    assert param.parameter_number == 0 and str(param.shape) == "f32[1,8]"


# -- 4. modules without the HloModule header ---------------------------------------------------

def test_a_bare_computation_list_is_named_after_its_entry():
    """hlo_parser.cc ParseHloModule(parse_module_without_header): name = "module_" + entry name;
    Run() takes that path when the text starts with ENTRY or `name {`."""
    module = parse_module("ENTRY main.5 {\n  ROOT p = f32[] parameter(0)\n}\n")
    assert module.name == "module_main.5" and module.entry.name == "main.5"
    module = parse_module("f {\n  ROOT p = f32[] parameter(0)\n}\ng {\n  ROOT q = s32[] parameter(0)\n}\n")
    assert module.name == "module_g" and module.entry.name == "g"  # the last one, as in XLA
    round_trips(module)


def test_header_name_and_signature_params_may_end_in_a_colon_or_omit_it():
    """XLA's lexer reads `name:` as a name token; ParseParamList takes `name shape`."""
    module = parse_module("HloModule m:\nENTRY e (a: f32[], b s32[]) -> f32[] {\n"
                          "  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT r = f32[] negate(a)\n}\n")
    assert module.name == "m" and len(module.entry.parameters) == 2


def test_text_that_is_neither_module_nor_computation_list_is_an_error():
    err = parse_error("x = f32[] parameter(0)\n")
    assert (err.line, err.col) == (1, 1) and "expected 'HloModule'" in err.message


# -- 5. async wrappers of any op ---------------------------------------------------------------

ASYNC = """HloModule m
callee {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
ENTRY e {
  p = f32[] parameter(0)
  cs = ((f32[]), f32[], s32[]) call-start(p), to_apply=callee
  cu = ((f32[]), f32[], s32[]) call-update(cs)
  ROOT cd = f32[] call-done(cu)
}
"""


def test_call_start_wraps_the_call_in_an_async_computation():
    """hlo_parser.cc ParseOpcode: an unknown `<op>-start/-update/-done` is async-start/-update/
    -done wrapping <op>; CreateInstruction builds the wrapped computation from parameters of
    the operand shapes and the op with shape element 1 of the start's shape."""
    module = parse_module(ASYNC)
    entry = module.entry
    start = entry.instruction("cs")
    assert start.opcode is Opcode.ASYNC_START
    wrapped = start.attrs["calls"]
    assert wrapped.root.opcode is Opcode.CALL and str(wrapped.root.shape) == "f32[]"
    assert wrapped.root.attrs["to_apply"] is module.computation("callee")
    assert [p.shape for p in wrapped.parameters] == [entry.instruction("p").shape]
    assert entry.instruction("cu").opcode is Opcode.ASYNC_UPDATE
    assert entry.root.opcode is Opcode.ASYNC_DONE
    check_module(module)
    round_trips(module)


def test_a_done_must_wrap_the_same_op_as_its_start():
    """hlo_parser.cc: "Expect async wrapped opcode to be %s, but got %s"."""
    err = parse_error(ASYNC.replace("call-done(cu)", "custom-call-done(cu)"))
    assert err.line == 10 and "to be call, but got custom-call" in err.message


def test_reduce_scatter_start_is_an_async_wrapper():
    module = parse_module("""HloModule m, replica_count=2
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4]{0} parameter(0)
  rs = ((f32[4]{0}), f32[2]{0}) reduce-scatter-start(p), replica_groups={{0,1}}, dimensions={0}, to_apply=sum
  ROOT d = f32[2]{0} reduce-scatter-done(rs)
}
""")
    wrapped = module.entry.instruction("rs").attrs["calls"].root
    assert wrapped.opcode is Opcode.REDUCE_SCATTER and wrapped.attrs["dimensions"] == (0,)
    round_trips(module)


# -- 6. constants, dim_labels, slice_sizes -----------------------------------------------------

def test_an_array_constant_written_as_one_number_holds_it_everywhere():
    module = parse_module("HloModule m\nENTRY e {\n  ROOT c = f32[3,3] constant(1)\n}\n")
    np.testing.assert_array_equal(module.entry.root.literal.value, np.ones((3, 3), np.float32))
    round_trips(module)


def test_dim_labels_with_question_marks_round_trip():
    """hlo_parser.cc ParseConvolutionDimensionNumbers: '?' dims are skipped, several allowed."""
    module = parse_module("HloModule m\nENTRY e {\n  x = f32[1,2,3,4,5] parameter(0)\n"
                          "  ROOT c = f32[1,2,3,4,5] custom-call(x), custom_call_target=\"t\", "
                          "dim_labels=b0?f?_0?io?->b0?f?\n}\n")
    labels = module.entry.root.attrs["dim_labels"]
    assert (labels.input_batch, labels.input_feature, labels.input_spatial) == (0, 3, (1,))
    assert str(labels) == "b0?f?_0?io?->b0?f?"
    round_trips(module)


def test_in_place_collective_permute_slice_sizes_are_a_list_of_lists():
    """hlo_parser.cc: slice_sizes of collective-permute is kBracedInt64ListList."""
    module = parse_module("""HloModule m, replica_count=2
ENTRY e {
  p = f32[4]{0} parameter(0)
  o = f32[4]{0} parameter(1)
  i = s32[] constant(0)
  ROOT cp = f32[4]{0} collective-permute(p, o, i, i), source_target_pairs={{0,1},{1,0}}, slice_sizes={{2},{2}}
}
""")
    assert module.entry.root.attrs["slice_sizes"] == ((2,), (2,))
    round_trips(module)


# -- 7. linear time, bounded depth -------------------------------------------------------------

def test_a_100000_element_constant_parses_in_under_two_seconds():
    n = 100_000
    text = "HloModule m\nENTRY e {\n  ROOT c = f32[%d]{0} constant({%s})\n}\n" % (
        n, ", ".join(str(i * 0.5) for i in range(n)))
    start = time.perf_counter()
    value = parse_module(text).entry.root.literal.value
    assert time.perf_counter() - start < 2.0
    assert value.shape == (n,) and value[-1] == (n - 1) * 0.5


def nested_tuple(depth: int) -> str:
    return "(" * depth + "f32[2]" + ")" * depth


def test_tuple_shapes_as_deep_as_xla_admits_go_through_parse_print_clone_check():
    """XLA counts ParseInstructionRhs and every ParseShape against its limit of 500: an
    instruction with a tuple nested 498 deep is at 1 + 498 + 1 = 500 levels."""
    assert MAX_NESTING_DEPTH == 500
    depth = 498
    text = f"HloModule m\nENTRY e {{\n  ROOT p = {nested_tuple(depth)} parameter(0)\n}}\n"
    module = parse_module(text)
    check_module(module.clone())
    round_trips(module)
    assert list(module.entry.root.shape.leaves())[0].dims == (2,)


@pytest.mark.parametrize("depth", [499, 5000, 100_000])
def test_deeper_nesting_is_a_parse_error_naming_the_limit(depth: int):
    err = parse_error(f"HloModule m\nENTRY e {{\n  ROOT p = {nested_tuple(depth)} parameter(0)\n}}\n")
    assert "nesting deeper than 500 levels" in err.message


def test_deeply_nested_operands_are_a_parse_error_naming_the_limit():
    expr = "p"
    for _ in range(5000):
        expr = f"negate({expr})"
    err = parse_error(f"HloModule m\nENTRY e {{\n  p = f32[] parameter(0)\n  ROOT r = f32[] {expr}\n}}\n")
    assert "nesting deeper than 500 levels" in err.message


def test_long_instruction_chains_never_recurse():
    """20x the recursion limit: parse, print, clone and check walk the chain iteratively."""
    n = 20 * sys.getrecursionlimit()
    lines = ["  x0 = f32[2]{0} parameter(0)"] + [
        f"  x{i} = f32[2]{{0}} negate(x{i - 1})" for i in range(1, n)]
    module = parse_module("HloModule m\nENTRY e {\n" + "\n".join(lines) + "\n}\n")
    assert len(module.entry.post_order()) == n
    check_module(module.clone())
    assert module.to_text().count("negate") == n - 1


def test_tuple_shapes_deeper_than_the_recursion_limit_print_compare_and_hash():
    """A shape built in code is not bound by the parser's limit: 1,500 levels (above Python's
    recursion limit) with two f32[2]{0} leaves at the bottom."""
    deep = parse_shape("(f32[2]{0}, f32[2]{0})")
    for _ in range(1500):
        deep = type(deep)((deep,))
    text = str(deep)
    assert text == "(" * 1501 + "f32[2]{0}, f32[2]{0}" + ")" * 1501
    copy = type(deep)(deep.elements)
    assert deep == copy and hash(deep) == hash(copy)
    assert deep.compatible(deep.without_layout()) and deep != deep.elements[0]
    assert [str(leaf) for leaf in deep.leaves()] == ["f32[2]{0}", "f32[2]{0}"]


# -- constants: XLA's range checks, NaN payloads, unsigned wrap-around -------------------------

def _constant(shape: str, literal: str) -> str:
    return f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({literal})\n}}\n"


@pytest.mark.parametrize("shape, literal, message", [
    # hlo_parser_test.cc ConstantF16Overflow: f16's largest finite value is 65504, and -65520
    # (halfway to 65536) rounds to -inf.
    ("f16[]", "-65520", "is out of range for literal's primitive type F16"),
    # ConstantBf16Overflow: bf16 keeps f32's exponent, max ~3.39e38.
    ("bf16[]", "1e100", "out of range"),
    # ConstantC64Overflow / ConstantC64Underflow: each part of a c64 is an f32.
    ("c64[]", "(1e100, 0)", "real part"),
    ("c64[]", "(0, -1e100)", "imaginary part"),
    # ConstantF64Overflow / ConstantF64Underflow: beyond double, the lexer's decimal is inf.
    ("f64[]", "1.8e308", "out of range for double"),
    ("f64[]", "-1.8e308", "out of range for double"),
    # NanPayload's bound: bf16 has 7 mantissa bits, so payloads go up to 0x7f.
    ("bf16[]", "nan(0x80)", "NaN payload 0x80 is out of range"),
])
def test_constants_outside_their_types_range_are_parse_errors(shape, literal, message):
    err = parse_error(_constant(shape, literal))
    assert message in err.message and err.line == 3


def test_finite_values_that_round_into_range_are_accepted():
    """XLA's CheckParsedValueIsInRange compares the value after conversion when it stays finite:
    65519 rounds to f16's 65504 (the next f16, 65536, would be inf), so it is accepted."""
    value = parse_module(_constant("f16[]", "65519")).entry.root.literal.value
    assert float(value) == 65504.0


def test_negative_u64_constants_wrap_as_xla_reads_an_int64_into_a_uint64():
    """ConstantUnsignedUnderflow: `u64[] constant(-1)` is accepted and holds 2^64 - 1; for u32
    the same -1 read as a uint64 exceeds 2^32 - 1 and is refused."""
    value = parse_module(_constant("u64[]", "-1")).entry.root.literal.value
    assert int(value) == 2 ** 64 - 1
    parse_error(_constant("u32[]", "-1"))


def test_nan_payloads_are_read_into_the_nan_bits():
    """NanPayload: bf16 NaN is sign | exponent 0x7f80 | 7 payload bits, so -nan(0x7f) is 0xffff and
    -nan(0x3f) is 0xffbf (XLA's NanWithSignAndPayload); f32 nan(0x1) is 0x7f800001."""
    module = parse_module(_constant("bf16[2]", "{-nan(0x7f), -nan(0x3f)}"))
    assert module.entry.root.literal.value.view(np.uint16).tolist() == [0xffff, 0xffbf]
    f32 = parse_module(_constant("f32[]", "nan(0x1)")).entry.root.literal.value
    assert int(np.asarray(f32).reshape(1).view(np.uint32)[0]) == 0x7f800001


# -- async syntax sugar prints back as written --------------------------------------------------

SUGARED = """HloModule m

ENTRY %Entry (p0: f32[10]) -> f32[20] {
  %p0 = f32[10]{0} parameter(0)
  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), async_execution_thread="parallel_thread", custom_call_target="foo"
  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start)
  ROOT %async-done = f32[20]{0} custom-call-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)
}, execution_thread="main_thread"

"""


def test_async_syntax_sugar_prints_back_verbatim():
    """hlo_parser_test.cc AsyncOpsWithSyntaxSugarAndThreadName / HloComputationWithParallel-
    ThreadName are round-trip cases: XLA's printer writes an async op whose computation wraps
    one instruction as `<op>-start`, with the thread first and the wrapped op's attributes, and
    does not print the wrapped computation."""
    module = parse_module(SUGARED)
    assert module.entry.root.opcode is Opcode.ASYNC_DONE
    assert module.to_text() == SUGARED
    round_trips(module)


# -- parse-time checks of XLA's parser ----------------------------------------------------------

ASYNC_WRAPPED = """%async_wrapped.0 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %custom-call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}

%async_wrapped.1 (async_param: f32[10]) -> f32[20] {
  %async_param = f32[10]{0} parameter(0)
  ROOT %custom-call = f32[20]{0} custom-call(f32[10]{0} %async_param), custom_call_target="foo"
}
"""


def _async_module(start: str, update: str, done: str) -> str:
    return ("HloModule m\n" + ASYNC_WRAPPED + "ENTRY %Entry (p0: f32[10]) -> f32[20] {\n"
            "  %p0 = f32[10]{0} parameter(0)\n"
            f"  %s = ((f32[10]{{0}}), f32[20]{{0}}, s32[]) {start}\n"
            f"  %u = ((f32[10]{{0}}), f32[20]{{0}}, s32[]) {update}\n"
            f"  ROOT %d = f32[20]{{0}} {done}\n}}\n")


@pytest.mark.parametrize("text, message", [
    # hlo_parser_test.cc MultipleEntries.
    ("HloModule m\nENTRY c1 {\n  a = f32[1]{0} constant({1})\n}\nENTRY c2 {\n"
     "  b = f32[1]{0} constant({2})\n}\n", "expects only one ENTRY"),
    # ComputationShapeDoesNotMatchRootShape.
    ("HloModule m\nENTRY %c () -> f32[1] {\n  ROOT %foo = f32[1,2]{1,0} custom-call(), "
     "custom_call_target=\"foo\"\n}\n", "Shape of computation c, f32[1], is not compatible with "
     "that of its root instruction foo, f32[1,2]"),
    # NontupleInfeed.
    ("HloModule m\nENTRY e {\n  t = token[] after-all()\n  ROOT i = pred[] infeed(t)\n}\n",
     "infeed must have a non-empty tuple shape"),
    # CustomCallWithNonexistentVersion / CustomCallWithUnspecifiedVersion.
    ("HloModule m\nENTRY e {\n  ROOT c = f32[1]{0} custom-call(), custom_call_target=\"foo\", "
     "api_version=API_VERSION_THAT_DOESNT_EXIST\n}\n", "Unknown API version"),
    ("HloModule m\nENTRY e {\n  ROOT c = f32[1]{0} custom-call(), custom_call_target=\"foo\", "
     "api_version=API_VERSION_UNSPECIFIED\n}\n", "Invalid API version"),
    # OriginalValueWithoutShape.
    ("HloModule m\nENTRY e {\n  a = f32[2]{0} parameter(0), origin={{\"a\"}}\n"
     "  ROOT v = abs(a), origin={{\"v\"}}\n}\n", "expects instruction shape"),
    # AsyncUpdateWrongComputation / AsyncDoneWrongComputation.
    (_async_module("async-start(f32[10]{0} %p0), calls=%async_wrapped.0",
                   "async-update(%s), calls=%async_wrapped.1", "async-done(%u)"),
     "Expect async_wrapped_computation to be async_wrapped.0, but got async_wrapped.1"),
    (_async_module("async-start(f32[10]{0} %p0), calls=%async_wrapped.0",
                   "async-update(%s)", "async-done(%u), calls=%async_wrapped.1"),
     "Expect async_wrapped_computation to be async_wrapped.0, but got async_wrapped.1"),
    # AsyncUpdateWrongDefaultThread / AsyncDoneWrongDefaultThread.
    (_async_module("custom-call-start(f32[10]{0} %p0), custom_call_target=\"foo\"",
                   "custom-call-update(%s), async_execution_thread=\"foo_thread\"",
                   "custom-call-done(%u)"),
     "Expect async_execution_thread to be main, but got foo_thread"),
])
def test_xla_parse_time_checks(text, message):
    assert message in parse_error(text).message


def test_two_async_starts_may_not_share_a_computation():
    """AsyncOpSharedComputation: each async-start has its own wrapped computation."""
    start = "async-start(f32[10]{0} %p0), calls=%async_wrapped.0"
    text = _async_module(start, "async-update(%s)", "async-done(%u)").replace(
        "  ROOT %d", "  %s2 = ((f32[10]{0}), f32[20]{0}, s32[]) " + start + "\n  ROOT %d")
    assert "Computation async_wrapped.0 is already referenced by another async op" in \
        parse_error(text).message


def test_matching_async_attributes_and_known_api_versions_are_accepted():
    """What XLA accepts around those checks: update/done repeating the start's computation and
    thread, api_version=API_VERSION_STATUS_RETURNING (CustomCallWithStatusReturningVersion), and
    custom-call literal= with a scalar and a tuple (CustomCallWithLiteralR0 / ...Tuple)."""
    parse_module(_async_module("async-start(f32[10]{0} %p0), calls=%async_wrapped.0, "
                               "async_execution_thread=\"t\"",
                               "async-update(%s), calls=%async_wrapped.0, "
                               "async_execution_thread=\"t\"", "async-done(%u)"))
    module = parse_module(
        "HloModule m\nENTRY e {\n  ROOT c = f32[1]{0} custom-call(), custom_call_target=\"foo\", "
        "api_version=API_VERSION_STATUS_RETURNING, "
        "literal=( s32[2]{0} {4, 128}, pred[] 1 ), backend_config=\"x\"\n}\n")
    assert str(module.entry.root.attrs["literal"]) == "( s32[2]{0} {4, 128}, pred[] 1 )"
    round_trips(module)
    err = parse_error("HloModule m\nENTRY e {\n  ROOT c = f32[1]{0} custom-call(), "
                      "custom_call_target=\"foo\", literal=u8[] 256\n}\n")
    assert "out of range" in err.message


# -- input_output_alias / buffer_donor headers, as XLA's ParseAliasing / ParseBufferDonor -------

ALIAS_BODY = """
ENTRY entry {
  %p = (f32[], f32[]) parameter(0)
  %p0 = f32[] get-tuple-element(%p), index=0
  %p1 = f32[] get-tuple-element(%p), index=1
  ROOT %out = (f32[], f32[]) tuple(%p0, %p1)
}
"""


@pytest.mark.parametrize("header, message", [
    # hlo_parser_test.cc AliasingShapeIndexNotNumerical, AliasingWrongFormatNoColon,
    # AliasingWrongFormatTwoColons, AliasingWrongFormatAlphaParam, and the buffer donor twins.
    ("input_output_alias={ {0, a}: (0, {0}), {1}: (0, {1}) }", "expects integer"),
    ("input_output_alias={ {0, 0}: (0, {0}), (0, {1}) }", "Expects '{' at the start of ShapeIndex"),
    ("input_output_alias={ {0}: (0, {0}): {0, 1}, {1}: (0, {1}) }",
     "Expects '}' at the end of aliasing description"),
    ("input_output_alias={ {0}: (zero, {0}), {1}: (0, {1}) }", "expects integer"),
    ("input_output_alias={ {0}: (0, {0}, sometimes-alias) }", "Unexpected aliasing kind"),
    ("buffer_donor={ (0, {0, a}), (0, {1}) }", "expects integer"),
    ("buffer_donor={ (zero, {0}), (0, {1}) }", "expects integer"),
])
def test_malformed_aliasing_headers_are_parse_errors(header, message):
    err = parse_error(f"HloModule Module, {header}\n{ALIAS_BODY}")
    assert message in err.message and err.line == 1


def test_well_formed_aliasing_headers_print_back_verbatim():
    """The forms XLA's tests accept (AliasingInputOutputAlias..., BufferDonor): shape indices,
    an optional must-alias/may-alias kind, empty lists."""
    for header in ("input_output_alias={ {0}: (0, {0}, must-alias), {1}: (0, {1}) }",
                   "input_output_alias={}", "buffer_donor={ (0, {0}), (0, {1}) }"):
        module = parse_module(f"HloModule Module, {header}\n{ALIAS_BODY}")
        assert module.to_text().startswith(f"HloModule Module, {header}\n")
        round_trips(module)


# -- sparse layouts: dim level types, as XLA's ParseLayout / ParseShape -------------------------

@pytest.mark.parametrize("layout, message", [
    # hlo_parser_test.cc InvalidDimLevelType, InvalidDimLevelTypeCount, RejectSparseTiles,
    # RejectDensePhysicalShape.
    ("{1,0:D(X,C)}", "expected a DimLevelType abbreviation (D, C, or S)"),
    ("{1,0:D(C)}", "Dimensions size is 2, but dim level types size is 1."),
    ("{1,0:D(D,C)T(128,8)}", "Layout has tiles, but is for a sparse array"),
    ("{1,0:T(128,8)P(f32[10,10])}", "Layout has physical shape, but is not for a sparse array"),
])
def test_malformed_sparse_layouts_are_parse_errors(layout, message):
    err = parse_error(f"HloModule test\nENTRY test {{\n  ROOT root = f32[10,10]{layout} "
                      f"parameter(0)\n}}\n")
    assert message in err.message


def test_sparse_layouts_xla_accepts_print_back():
    """The layouts of XLA's round-trip cases (hlo_parser_test.cc SparseShape, SparseShapeWith-
    IndexPrimitiveType, ...WithPointerPrimitiveType, ...WithPhysicalShape, the '+'/'~' marks of
    C+~,S~), and a dense layout with tiles."""
    for layout in ("{1,0:D(D,C)}", "{1,0:D(D,C)#(u32)}", "{1,0:D(D,C)*(u32)}",
                   "{1,0:D(D,C)P((s32[10]{0:T(100)}, s32[10]{0:T(100)}, f32[10]{0:T(100)}))}",
                   "{1,0:D(C+~,S~)}", "{1,0:T(8,128)}"):
        module = parse_module(f"HloModule test\nENTRY test {{\n  ROOT root = f32[10,10]{layout} "
                              f"parameter(0)\n}}\n")
        assert str(module.entry.root.shape) == f"f32[10,10]{layout}"
        round_trips(module)


# -- sparse dot: sparsity= and its metadata operands, as XLA's HandleDot / InferDotOpShape ------

def _sparse_dot(a: str, b: str, metas: list[str], sparsity: str, result: str = "f16[32,32]") -> str:
    params = [f"  a = {a} parameter(0)", f"  b = {b} parameter(1)"] + [
        f"  m{i} = {meta} parameter({2 + i})" for i, meta in enumerate(metas)]
    operands = ", ".join(["a", "b"] + [f"m{i}" for i in range(len(metas))])
    return ("HloModule dot\nENTRY dot {\n" + "\n".join(params) + f"\n  ROOT dot = {result} "
            f"dot({operands}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, "
            f"sparsity={sparsity}\n}}\n")


def test_sparse_dots_of_xlas_tests_are_accepted_and_print_back():
    """hlo_parser_test.cc DotSparseOperand(s): with L.1@2:4 the lhs f16[32,32] holds half of a
    logical 64-wide contracting dim, matching rhs f16[64,32]. Metadata (hand derivation of
    InferSparseDotMetadataShape): log2(4) = 2 bits per value, 2 values per group of 4 -> 4 bits,
    4 groups per u16; 32 stored values = 16 groups = 4 words: u16[32,4]; rhs R.0@2:4 of
    f16[32,32] likewise u16[4,32]."""
    for text in (_sparse_dot("f16[32,32]", "f16[64,32]", ["u16[32,4]"], "L.1@2:4"),
                 _sparse_dot("f16[32,32]", "f16[32,32]", ["u16[32,4]", "u16[4,32]"],
                             "L.1@2:4_R.0@2:4")):
        module = parse_module(text)
        check_module(module)
        assert module.to_text().count("sparsity=") == 1
        round_trips(module)


def test_sparse_dot_shape_is_inferred_with_the_sparse_ratio():
    """hlo_parser_test.cc InferSparseDotShape: lhs f32[2,16] with L.1@2:4 contracts a logical
    32 with rhs f32[32,2]; batch dim 0/1 of size 2 gives f32[2]."""
    module = parse_module(
        "HloModule m\nENTRY e {\n  a = f32[2,16]{1,0} parameter(0)\n  b = f32[32,2]{1,0} "
        "parameter(1)\n  meta = u16[2,2]{1,0} parameter(2)\n  ROOT dot = dot(a, b, meta), "
        "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={1}, "
        "rhs_contracting_dims={0}, sparsity=L.1@2:4\n}\n")
    assert str(module.entry.root.shape) == "f32[2]{0}"


@pytest.mark.parametrize("a, b, metas, sparsity, phrase", [
    ("f16[32,32]", "f16[64,32]", ["u16[32,8]"], "L.1@2:4", "metadata must have shape u16[32,4]"),
    ("f16[32,32]", "f16[64,32]", [], "L.1@2:4", "dot expects 3 operands but has 2"),
    ("f16[32,32]", "f16[32,32]", ["u16[32,4]"], "L.1@2:4", "have different sizes"),
    ("f16[32,32]", "f16[32,32]", ["u16[32,4]"], "L.0@2:4", "is not a contracting dimension"),
])
def test_sparse_dots_xla_refuses_are_rejected(a, b, metas, sparsity, phrase):
    with pytest.raises(UserError) as info:
        check_module(parse_module(_sparse_dot(a, b, metas, sparsity)))
    assert phrase in str(info.value)


@pytest.mark.parametrize("sparsity, message", [
    ("L.1@4:4", "Invalid structured sparsity type"),
    ("X.1@2:4", "expects sparsity descriptor"),
])
def test_malformed_sparsity_descriptors_are_parse_errors(sparsity, message):
    """XLA's ParseSparsityDescriptor: n:m needs 1 <= n < m; the lexer's pattern [LR].d@n:m."""
    text = _sparse_dot("f16[32,32]", "f16[64,32]", ["u16[32,4]"], sparsity)
    assert message in parse_error(text).message


def test_an_async_start_without_its_computation_is_a_parse_error():
    """XLA's parser requires ``calls=`` on async-start ("attribute calls is expected"); found by
    the hostile fuzz, where it was a KeyError."""
    import pytest

    from neuron_sim.hlo import HloParseError, parse_module

    text = """HloModule m

async_computation {
  p = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p), custom_call_target="foo"
}

ENTRY e {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3])) async-start(p0)
  ROOT async-done = f32[3,2] async-done(async-start), calls=async_computation
}
"""
    with pytest.raises(HloParseError, match="attribute calls is expected"):
        parse_module(text)


# -- computations written inline in an attribute (XLA's ParseHloComputation with '{') --------

INLINE = """HloModule inline
ENTRY e {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(p, z), dimensions={1}, to_apply=
  {
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}
"""


def test_a_computation_written_in_its_attribute_is_a_computation_of_its_own():
    """hlo_cost_analysis_test writes ``calls=`` then the body on the next lines: the body is a
    new scope (its ``a``/``b`` are not the entry's), named ``_`` as XLA names it, printed as a
    computation of its own before its caller; the reduce sums each row (1+2+3, 4+5+6)."""
    from neuron_sim.interpreter.api import execute

    module = parse_module(INLINE)
    called = module.entry.root.attrs["to_apply"]
    assert called.name == "_" and [c.name for c in module.computations] == ["_", "e"]
    assert [i.name for i in called.instructions] == ["a", "b", "s"]
    check_module(module)
    printed = module.to_text()
    assert "to_apply=_" in printed and printed.index("_ {") < printed.index("ENTRY e")
    assert parse_module(printed).to_text() == printed
    out = execute(module, [np.array([[1, 2, 3], [4, 5, 6]], np.float32)]).outputs[0]
    np.testing.assert_array_equal(out[0], [6, 15])


def test_two_inline_computations_get_unique_names():
    module = parse_module("""HloModule two
ENTRY e {
  p = f32[2,3] parameter(0)
  z = f32[] constant(0)
  r0 = f32[2] reduce(p, z), dimensions={1}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
  ROOT r1 = f32[2] reduce(p, z), dimensions={1}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT m = f32[] maximum(a, b)
  }
}
""")
    assert [c.name for c in module.computations] == ["_", "_.1", "e"]
    check_module(module)
    round_trips(module)


# -- a layout followed by the next token with no space; a headerless 'name: {' ---------------

def test_a_layout_may_touch_the_opcode_or_the_operand_after_it():
    """XLA's lexer ends the layout at its '}' (hlo_unstacker_test writes
    ``bf16[...]{4,3,2,1,0:T(8,128)(2,1)}parameter(0)``; layout_assignment_test
    ``f32[93184,4]{1,0}%get-tuple-element.1``)."""
    module = parse_module("HloModule m\nENTRY e {\n  p = f32[2,3]{1,0}parameter(0)\n"
                          "  ROOT r = f32[3,2] transpose(f32[2,3]{1,0}%p), dimensions={1,0}\n}\n")
    assert module.entry.root.operands[0].name == "p"
    check_module(module)


def test_a_headerless_module_may_start_with_a_blank_line_and_name_colon_brace():
    """XLA's Run takes the text as a module when its second token is '{' (``add: {`` lexes as
    one name token, then '{')."""
    module = parse_module("\nadd: {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                          "  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  p = f32[4] parameter(0)"
                          "\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(p, z), "
                          "dimensions={0}, to_apply=add\n}\n")
    assert module.name == "module_e" and module.entry.name == "e"


# -- a reducer returning a 1-tuple gives a 1-tuple ---------------------------------------------

def test_a_reducer_returning_a_one_tuple_makes_reduce_return_a_one_tuple():
    """algebraic_simplifier_test UnaryVariadicReduce: XLA verifies ``(f32[8,6,7]) reduce(p, c)``
    with ``fn`` returning ``(f32[])``; the values are the plain reduce's (row sums 1+2, 3+4)."""
    from neuron_sim.interpreter.api import execute

    text = """HloModule m
fn {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  a = f32[] add(p0, p1)
  ROOT t = (f32[]) tuple(a)
}
ENTRY test {
  p0 = f32[2,2] parameter(0)
  c = f32[] constant(0)
  ROOT r = (f32[2]) reduce(p0, c), dimensions={1}, to_apply=fn
}
"""
    module = parse_module(text)
    check_module(module)
    out = execute(module, [np.array([[1, 2], [3, 4]], np.float32)]).outputs[0]
    np.testing.assert_array_equal(out[0], [3, 7])
    with pytest.raises(UserError, match="does not match the inferred shape"):
        check_module(parse_module(text.replace("(f32[2]) reduce", "f32[2] reduce")))


# -- what JAX 0.12 / today's XLA print, kept and printed back -----------------------------------

TODAY = """HloModule jit_f, replica_count=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[4,8] parameter(0), frontend_attributes={_xla_cse_safe_zero_operand="true",is_spmd_generated="true",xla_cpu_small_call="true"}
  tk = (f32[4,2], s32[4,2]) topk(p), k=2, largest=true, is_stable=true
  c0 = f32[4,8] copy(p)
  c1 = f32[4,8] copy(p), control-predecessors={c0}
  seed = s64[] custom-call(), custom_call_target="GetRngSeed"
  ar = f32[4,8] all-reduce(c1), replica_groups=mesh['x'=2,'y'=4] {'y','x'}, to_apply=add
  ROOT t = (f32[4,8], (f32[4,2], s32[4,2]), s64[], f32[4,8]) tuple(c0, tk, seed, ar)
}

"""


def test_todays_attributes_are_kept_and_print_back_verbatim():
    module = parse_module(TODAY)
    check_module(module)
    assert module.to_text() == TODAY
    entry = module.entry
    assert "is_spmd_generated" in str(entry.instruction("p").attrs["frontend_attributes"])
    tk = entry.instruction("tk")
    assert tk.attrs["k"] == 2 and tk.attrs["largest"] is True
    assert "c0" in str(entry.instruction("c1").attrs["control-predecessors"])


@pytest.mark.parametrize(("mesh", "axes", "groups"), [
    # Devices fill the mesh in row-major order, device = 4x + y on x=2, y=4. The groups run over
    # the listed axes in the listed order (the first listed is the major one), the others fixed:
    ("'x'=2,'y'=4", "'y','x'", ((0, 4, 1, 5, 2, 6, 3, 7),)),
    ("'x'=2,'y'=4", "'x','y'", ((0, 1, 2, 3, 4, 5, 6, 7),)),
    ("'x'=2,'y'=4", "'y'", ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("'x'=2,'y'=4", "'x'", ((0, 4), (1, 5), (2, 6), (3, 7))),
    # device = 4a + 2b + c; listed c, b, a: c major, then b, then a.
    ("'a'=2,'b'=2,'c'=2", "'c','b','a'", ((0, 4, 2, 6, 1, 5, 3, 7),)),
    ("'a'=2,'b'=2,'c'=2", "'c','a'", ((0, 4, 1, 5), (2, 6, 3, 7))),
])
def test_mesh_groups_in_any_axis_order_and_subset(mesh: str, axes: str, groups: tuple):
    """XLA's MeshAxesReplicaGroupList (replica_group_test MaterializedReplicaGroups, and the
    reversed ``b:(1)3,a:(1)3`` case of test_replica_groups.py) with the hand derivations above."""
    text = TODAY.replace("mesh['x'=2,'y'=4] {'y','x'}", f"mesh[{mesh}] {{{axes}}}")
    module = parse_module(text)
    check_module(module)
    assert module.entry.instruction("ar").replica_groups.groups == groups
    assert module.to_text() == text


# -- buffer shapes b(...) (XLA's ParseShape: 'b(' shape ')', MakeValidatedBufferShape) ---------

BUFFERS = """HloModule buffers

ENTRY e {
  p = f32[2,4] parameter(0)
  pin = b(f32[2,4]{0,1}) custom-call(p), custom_call_target="Pin"
  ROOT unpin = f32[2,4] custom-call(pin), custom_call_target="Unpin"
}

"""


def test_buffer_shapes_parse_check_and_print_back():
    """The form XLA prints for a Pin custom-call (its MLIR export test checks
    ``b(f32[2,4]{0,1}) custom-call(...), custom_call_target="Pin"``)."""
    from neuron_sim.hlo.shapes import BufferShape

    module = parse_module(BUFFERS)
    pin = module.entry.instruction("pin").shape
    assert isinstance(pin, BufferShape) and str(pin.array) == "f32[2,4]{0,1}"
    check_module(module)
    assert module.to_text() == BUFFERS
    assert parse_shape("(b(s32[]), f32[1])").elements[0] == BufferShape(parse_shape("s32[]"))


@pytest.mark.parametrize("inner", ["(f32[2])", "token[]", "b(f32[2])"])
def test_a_buffer_of_anything_but_an_array_is_a_parse_error(inner: str):
    err = parse_error(BUFFERS.replace("b(f32[2,4]{0,1})", f"b({inner})"))
    assert "a buffer shape holds an array" in err.message and err.line == 5


def test_running_a_buffer_custom_call_says_the_target_is_not_implemented():
    from neuron_sim.interpreter.api import execute
    from neuron_sim.interpreter.errors import Unimplemented

    with pytest.raises(Unimplemented, match="Pin"):
        execute(parse_module(BUFFERS), [np.zeros((2, 4), np.float32)])


# -- scaled-dot: the dot of lhs and rhs, each scale of its operand's rank ----------------------

SCALED_DOT = """HloModule mx_test
ENTRY main {
  lhs = f8e4m3fn[32,256] parameter(0)
  rhs = f8e4m3fn[16,256] parameter(1)
  lhs_scale = f8e8m0fnu[32,8] parameter(2)
  rhs_scale = f8e8m0fnu[16,8] parameter(3)
  ROOT result = f32[32,16] scaled-dot(lhs, rhs, lhs_scale, rhs_scale), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}
"""


@pytest.mark.parametrize("text", [
    SCALED_DOT,
    # XLA's TileAnalysisTest.ScaledDot: contracting lhs dim 1 with rhs dim 0.
    SCALED_DOT.replace("rhs = f8e4m3fn[16,256]", "rhs = f8e4m3fn[256,16]")
    .replace("rhs_scale = f8e8m0fnu[16,8]", "rhs_scale = f8e8m0fnu[8,16]")
    .replace("rhs_contracting_dims={1}", "rhs_contracting_dims={0}"),
    # XLA's MLIR export test: a bf16 lhs with a [1,1] scale, an f4e2m1fn rhs.
    SCALED_DOT.replace("lhs = f8e4m3fn[32,256]", "lhs = bf16[32,256]")
    .replace("lhs_scale = f8e8m0fnu[32,8]", "lhs_scale = bf16[1,1]")
    .replace("rhs = f8e4m3fn[16,256]", "rhs = f4e2m1fn[16,256]"),
])
def test_scaled_dots_of_xlas_tests_are_accepted(text: str):
    """The result is the dot of lhs [32,256] and rhs over the contracting dims: [32,16]."""
    module = parse_module(text)
    check_module(module)
    assert parse_module(module.to_text()).to_text() == module.to_text()


@pytest.mark.parametrize(("change", "phrase"), [
    (("f32[32,16] scaled-dot", "f32[32,32] scaled-dot"), "does not match the inferred shape"),
    (("rhs_scale = f8e8m0fnu[16,8]", "rhs_scale = f8e8m0fnu[16]"), "must have the rank"),
    (("rhs_contracting_dims={1}", "rhs_contracting_dims={0}"), "different sizes"),
])
def test_scaled_dots_xla_refuses_are_rejected(change: tuple[str, str], phrase: str):
    module = parse_module(SCALED_DOT.replace(*change))
    with pytest.raises(UserError, match=phrase):
        check_module(module)


def test_a_scaled_dot_shape_is_inferred_like_a_dots():
    text = SCALED_DOT.replace("ROOT result = f32[32,16] scaled-dot", "ROOT result = scaled-dot")
    assert parse_module(text).entry.root.shape.dims == (32, 16)


# -- compare order=TOTAL: JAX 0.12's spelling of type=TOTALORDER ------------------------------

ORDER_TOTAL = """HloModule m

ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT lt = pred[3] compare(x, y), direction=LT, order=TOTAL
}

"""


def test_order_total_is_the_total_order_and_prints_back_as_written():
    """The total order puts -0 before +0 and NaN after every number: LT(-0, +0), LT(1, NaN) are
    true and LT(NaN, 1) false (IEEE says false, false, false)."""
    from neuron_sim.interpreter.api import execute

    module = parse_module(ORDER_TOTAL)
    assert module.entry.root.attrs["type"] == "TOTALORDER"
    check_module(module)
    assert module.to_text() == ORDER_TOTAL
    x = np.array([-0.0, 1.0, np.nan], np.float32)
    y = np.array([0.0, np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(execute(module, [x, y]).outputs[0][0], [True, True, False])
    ieee = parse_module(ORDER_TOTAL.replace(", order=TOTAL", ""))
    np.testing.assert_array_equal(execute(ieee, [x, y]).outputs[0][0], [False, False, False])


def test_order_and_type_together_are_a_parse_error():
    err = parse_error(ORDER_TOTAL.replace("order=TOTAL", "type=TOTALORDER, order=TOTAL"))
    assert "not both" in err.message
