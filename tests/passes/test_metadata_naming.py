"""MetadataNaming (#21) and DefaultMetadata (#65): names added to metadata, never a value
changed, and the printer keeps what they add (print -> parse -> print is identical)."""

from __future__ import annotations

import pytest

from neuron_sim.hlo import parse_module
from neuron_sim.passes import PassError

from canonicalizer_fixtures import jax_module, module_of, run, verdicts

NAMING = "aws_neuron_metadata_naming"
DEFAULT = "aws_neuron_default_metadata"


def metadata_of(module, name: str) -> str:
    return str(module.entry.instruction(name).get("metadata"))


def round_trips(module) -> bool:
    text = module.to_text()
    return parse_module(text).to_text() == text


def test_naming_fills_only_what_is_missing_and_keeps_other_fields():
    module = module_of("x = f32[4] parameter(0)",
                       'a = f32[4] add(x, x), metadata={source_file="f.py" source_line=3}',
                       'n = f32[4] negate(a), metadata={op_type="neg" stack_frame_id=2}',
                       'm = f32[4] multiply(n, n), metadata={op_type="mul" op_name="jit(f)/mul"}')
    changed, log = run(NAMING, module)
    assert changed and len(log) == 2
    assert metadata_of(module, "a") == \
        '{op_type="add" op_name="a" source_file="f.py" source_line=3}'
    assert metadata_of(module, "n") == '{op_type="neg" op_name="n" stack_frame_id=2}'
    assert metadata_of(module, "m") == '{op_type="mul" op_name="jit(f)/mul"}'
    assert not module.entry.instruction("x").has("metadata")
    assert round_trips(module)


def test_naming_of_fully_named_metadata_changes_nothing():
    module = module_of("x = f32[4] parameter(0)",
                       'a = f32[4] add(x, x), metadata={op_type="add" op_name="a"}')
    assert run(NAMING, module) == (False, [])


def test_malformed_metadata_is_an_error_naming_the_instruction():
    module = module_of("x = f32[4] parameter(0)", "a = f32[4] add(x, x), metadata={op_name}")
    before = module.to_text()
    with pytest.raises(PassError, match="%a"):
        run(NAMING, module)
    assert module.to_text() == before


def test_default_metadata_attaches_names_to_instructions_without_metadata():
    module = module_of("x = f32[4] parameter(0)",
                       'a = f32[4] add(x, x), metadata={op_name="kept"}', "n = f32[4] negate(a)")
    changed, log = run(DEFAULT, module)
    assert changed and [line.split(" ")[0] for line in log] == ["%x", "%n"]
    assert metadata_of(module, "x") == '{op_type="parameter" op_name="x"}'
    assert metadata_of(module, "n") == '{op_type="negate" op_name="n"}'
    assert metadata_of(module, "a") == '{op_name="kept"}'
    assert round_trips(module)
    assert run(DEFAULT, module) == (False, [])


@pytest.mark.parametrize("key", [NAMING, DEFAULT])
def test_metadata_passes_keep_every_value_on_a_jax_dump(key):
    module = jax_module("compiled_canon_self_compare")
    rewritten = module.clone()
    assert run(key, rewritten)[0]
    assert round_trips(rewritten)
    assert verdicts(key, module) == ["CORRECT"] * 3
