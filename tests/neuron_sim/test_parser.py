"""Parser and printer: real XLA/JAX dumps parse, print back byte for byte, and errors are located."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuron_sim.hlo import (ArrayShape, ElementType, HloParseError, Layout, Opcode, TupleShape,
                            parse_module, parse_module_file, parse_shape)
from neuron_sim.hlo.attributes import PadDim, Raw, SliceDim, WindowDim
from neuron_sim.hlo.literals import ElidedLiteralError

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = sorted((DATA / "jax").glob("*.hlo"))


def test_corpus_is_present():
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_module_prints_back_exactly_as_xla_dumped_it(path: Path):
    text = path.read_text()
    module = parse_module(text, str(path))
    assert module.to_text() == text


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_reparsing_printed_module_gives_equal_module_and_same_text(path: Path):
    module = parse_module_file(str(path))
    printed = module.to_text()
    again = parse_module(printed)
    assert again.structurally_equal(module)
    assert again.to_text() == printed
    assert module.clone().structurally_equal(module)


MODULE = """\
HloModule m, replica_count=2, num_partitions=4, some_future_attribute={a, b}

FileNames
1 "a.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (p: f32[8,4], q: (s32[], /*index=1*/pred[])) -> (f32[2,4], s32[]) {
  %p = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}
  %q = (s32[], pred[]) parameter(1)
  %ar = f32[8,4]{1,0} all-reduce(f32[8,4]{1,0} %p), channel_id=3, replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true, to_apply=%sum
  %pid = u32[] partition-id()
  %c = u32[] constant(2)
  %m = u32[] multiply(u32[] %pid, u32[] %c)
  %z = u32[] constant(0)
  %ds = f32[2,4]{1,0} dynamic-slice(f32[8,4]{1,0} %ar, u32[] %m, u32[] %z), dynamic_slice_sizes={2,4}, backend_config={"a":"b,c","d":[1,2]}, metadata={op_name="x/y" source_file="a.py" source_line=3}
  %k = s32[2,2]{1,0} constant({ { 1, 2 }, { 3, -4 } })
  %f = f32[4]{0} constant({-inf, nan, 1.5, -0})
  %big = f32[100]{0} constant({...})
  %sl = f32[2,2]{1,0} slice(f32[2,4]{1,0} %ds), slice={[0:2:1], [0:4:2]}
  %pd = f32[5,7]{1,0} pad(f32[2,4]{1,0} %ds, f32[] %a2), padding=1_2_0x-1_0_1
  %a2 = f32[] constant(0)
  %gte = s32[] get-tuple-element((s32[], pred[]) %q), index=0
  ROOT %t = (f32[2,4]{1,0}, s32[]) tuple(f32[2,4]{1,0} %ds, s32[] %gte)
}

"""


@pytest.fixture
def module():
    return parse_module(MODULE, "m.hlo")


def test_header_attributes_are_typed_or_kept_verbatim(module):
    assert module.replica_count == 2 and module.num_partitions == 4
    assert module.header["some_future_attribute"] == Raw("{a, b}")
    assert module.sections.startswith("FileNames") and "StackFrames" in module.sections


def test_attributes_are_typed(module):
    entry = module.entry
    ar = entry.instruction("ar")
    assert ar.opcode is Opcode.ALL_REDUCE
    assert ar.channel_id == 3 and ar.use_global_device_ids is True
    assert ar.replica_groups.groups == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert ar.to_apply is module.computation("sum")
    ds = entry.instruction("ds")
    assert ds.get("dynamic_slice_sizes") == (2, 4)
    assert ds.get("backend_config") == Raw('{"a":"b,c","d":[1,2]}')
    assert entry.instruction("sl").get("slice") == (SliceDim(0, 2, 1), SliceDim(0, 4, 2))
    assert entry.instruction("pd").get("padding") == (PadDim(1, 2, 0), PadDim(-1, 0, 1))
    assert entry.instruction("gte").get("index") == 0


def test_operands_and_users_are_linked(module):
    entry = module.entry
    ds, ar, m = entry.instruction("ds"), entry.instruction("ar"), entry.instruction("m")
    assert ds.operands == [ar, m, entry.instruction("z")]
    assert ds in ar.users and ds in m.users
    assert entry.root.name == "t" and entry.root.is_root


def test_forward_references_resolve(module):
    pad = module.entry.instruction("pd")
    assert pad.operand(1) is module.entry.instruction("a2")


def test_constant_values(module):
    entry = module.entry
    np.testing.assert_array_equal(entry.instruction("k").literal.value, [[1, 2], [3, -4]])
    f = entry.instruction("f").literal.value
    assert f.dtype == np.float32 and f[0] == -np.inf and np.isnan(f[1]) and f[2] == 1.5
    assert np.signbit(f[3])
    big = entry.instruction("big").literal
    assert big.is_elided
    with pytest.raises(ElidedLiteralError):
        big.value


def test_shapes_parse_with_layouts_tuples_and_dynamic_dims():
    assert parse_shape("f32[4,8]{1,0}") == ArrayShape(ElementType.F32, (4, 8), Layout((1, 0)))
    assert parse_shape("bf16[]") == ArrayShape(ElementType.BF16, ())
    assert parse_shape("(s32[], /*index=1*/pred[2]{0})") == TupleShape((
        ArrayShape(ElementType.S32, ()), ArrayShape(ElementType.PRED, (2,), Layout((0,)))))
    tiled = parse_shape("f32[8,128]{1,0:T(8,128)}")
    assert tiled.layout == Layout((1, 0), "T(8,128)") and str(tiled) == "f32[8,128]{1,0:T(8,128)}"
    dyn = parse_shape("s32[<=4,3]")
    assert dyn.dynamic == (True, False) and str(dyn) == "s32[<=4,3]"
    assert str(parse_shape("token[]")) == "token[]"


def test_window_and_dim_labels_round_trip():
    text = """HloModule conv
ENTRY main {
  x = f32[1,5,5,2]{3,2,1,0} parameter(0)
  w = f32[3,3,2,4]{3,2,1,0} parameter(1)
  ROOT c = f32[1,3,3,4]{3,2,1,0} convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f
}
"""
    module = parse_module(text)
    conv = module.entry.root
    window = conv.get("window")
    assert window.dims[0] == WindowDim(size=3, stride=2, pad_low=1, pad_high=1)
    labels = conv.get("dim_labels")
    assert (labels.input_batch, labels.input_feature, labels.input_spatial) == (0, 3, (1, 2))
    assert (labels.kernel_input_feature, labels.kernel_output_feature) == (2, 3)
    assert str(labels) == "b01f_01io->b01f"
    # rhs_dilate=1x1 is the default, so XLA would not print it.
    assert "window={size=3x3 stride=2x2 pad=1_1x1_1}" in module.to_text()


def test_lowered_style_without_percent_or_signatures_is_kept():
    text = "HloModule m\n\nENTRY main.3 {\n  x.1 = f32[2]{0} parameter(0)\n  ROOT n.2 = f32[2]{0} negate(x.1)\n}\n\n"
    module = parse_module(text)
    assert module.to_text() == text


@pytest.mark.parametrize("text, line, col, phrase", [
    ("HloModul m\n", 1, 1, "expected 'HloModule'"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] frobnicate(x)\n}\n",
     4, 19, "unknown opcode 'frobnicate'"),
    ("HloModule m\nENTRY e {\n  x = f33[2] parameter(0)\n}\n", 3, 7, "unknown element type 'f33'"),
    ("HloModule m\nENTRY e {\n  ROOT y = f32[2] negate(x)\n}\n", 3, 26, "not defined"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x), dimensions={1,a}\n}\n",
     4, 44, "bad dimensions"),
    ("HloModule m\nENTRY e {\n  x = s32[2] constant({1, two})\n}\n", 3, 27, "bad constant"),
    # XLA's ParseDenseLiteral reports the first element too many, where it stands.
    ("HloModule m\nENTRY e {\n  x = s32[2] constant({1, 2, 3})\n}\n", 3, 30,
     "expects 2 elements on the minor-most dimension"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n", 2, 1, "not closed"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), replica_groups={{0,1}, to_apply=e\n}\n",
     # A line break is whitespace (XLA's lexer): the braces close on the next line, and the
     # groups fail where XLA's ParseInt64ListList does, at 'to_apply'.
     4, 57, "expected '{'"),
    ("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT r = f32[2] call(x), to_apply=nowhere\n}\n",
     4, 37, "nowhere"),
])
def test_parse_errors_are_located_at_file_line_col(text, line, col, phrase):
    with pytest.raises(HloParseError) as info:
        parse_module(text, "bad.hlo")
    err = info.value
    assert (err.filename, err.line, err.col) == ("bad.hlo", line, col), str(err)
    assert phrase in err.message
    rendered = str(err).splitlines()
    assert rendered[0] == f"bad.hlo:{line}:{col}: {err.message}"
    assert rendered[1] == text.splitlines()[line - 1]
    assert rendered[2] == " " * (col - 1) + "^"


@pytest.mark.parametrize("header,column,message", [
    # XLA reads both counts as int64 (2**63 is one past its largest value)
    ("replica_count=8, num_partitions=9223372036854775808", 46,
     "num_partitions=9223372036854775808 is out of the int64 range XLA reads it in"),
    ("replica_count=99999999999999999999, num_partitions=2", 28,
     "replica_count=99999999999999999999 is out of the int64 range XLA reads it in"),
])
def test_device_counts_past_int64_are_parse_errors(header, column, message):
    """A mutated header (num_partitions=2**63) once made `check` list 8 x 2**63 devices."""
    text = f"HloModule m, {header}\n\nENTRY e {{\n  ROOT c = f32[] constant(0)\n}}\n"
    with pytest.raises(HloParseError) as caught:
        parse_module(text)
    assert message in str(caught.value)
    assert caught.value.line == 1 and caught.value.col == column
