"""Robustness: any truncation or mutation of a real dump or of the XLA-grammar fixtures yields a
module or an HloParseError, and checking a parsed module raises only UserErrors.

5,000 mutated texts in all (4,400 from the corpus and the grammar fixtures, 600 arbitrary tails).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloParseError, parse_module
from neuron_sim.hlo.checker import check_module

CORPUS = sorted((Path(__file__).resolve().parents[1] / "data" / "jax").glob("*.hlo"))
# Small modules keep each example fast; they still contain every construct the parser handles.
TEXTS = [p.read_text() for p in CORPUS if p.stat().st_size < 12_000]

# The grammar XLA reads beyond what its printer writes: shapeless and nested instructions,
# async wrappers, no header, comments and line breaks inside instructions and literals.
GRAMMAR_TEXTS = [
    """ENTRY main {
  p0 = f32[2,3]{1,0} parameter(0) /* c */ p1 = f32[2,3] parameter(1)
  s = add(maximum(p0, p1), negate(p1))
  k = s32[2,2] constant({ /*i0=0*/ {1, 2}, /*i0=1*/ {3, 4} })
  c = f32[3,3] constant(1)
  ROOT t = tuple(s, k, c) // done
}
""",
    """HloModule m:
callee (a f32[]) -> f32[] {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
ENTRY e {
  p = f32[] parameter(0)
  cs = ((f32[]), f32[], s32[]) call-start(p), to_apply=
    callee
  cu = ((f32[]), f32[], s32[]) call-update(cs)
  ROOT cd = f32[] call-done(cu)
}
""",
    """HloModule w
cond {
  c = s32[] parameter(0) k = s32[] constant(4)
  ROOT lt = pred[] compare(c, k), direction=LT
}
body { b = s32[] parameter(0) one = s32[] constant(1) ROOT n = add(b, one) }
ENTRY main {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=body, backend_config={
    "known_trip_count":{"n":"4"}
  }
}
""",
]

# Characters that matter to the grammar, plus some that never appear in HLO.
INTERESTING = list("{}()[],=%:/*\"<>-._ \nTx0123456789?") + [
    "ROOT", "ENTRY", "->", "/*", "*/", "//", "f32", "s32[", "{...}", "\\", "é", "tuple(",
    "add(", "-start", "-done", "b(", "constant(", "HloModule", "((", "))"]


def parse_or_parse_error(text: str) -> None:
    """The text parses (and then checks, or fails the check with a UserError) or raises an
    HloParseError located in the text."""
    try:
        module = parse_module(text, "fuzz.hlo")
    except HloParseError as err:
        assert err.line >= 1 and err.col >= 1
        assert str(err).startswith(f"fuzz.hlo:{err.line}:{err.col}: ")
        return
    try:
        check_module(module)
    except UserError:
        pass


@st.composite
def mutated_texts(draw, texts: list[str]) -> str:
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["truncate", "delete", "insert", "replace"]))
        if action == "truncate":
            text = text[:at]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 20)):]
        elif action == "insert":
            text = text[:at] + draw(st.sampled_from(INTERESTING)) + text[at:]
        else:
            text = text[:at] + draw(st.sampled_from(INTERESTING)) + text[at + 1:]
    return text


@settings(max_examples=2600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_texts(TEXTS))
def test_mutated_corpus_text_parses_or_raises_hlo_parse_error(text: str):
    parse_or_parse_error(text)


@settings(max_examples=1800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_texts(GRAMMAR_TEXTS))
def test_mutated_grammar_text_parses_or_raises_hlo_parse_error(text: str):
    parse_or_parse_error(text)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(INTERESTING), max_size=80).map("".join))
def test_arbitrary_text_after_header_parses_or_raises_hlo_parse_error(tail: str):
    parse_or_parse_error("HloModule m\n" + tail)
