"""Robustness: any truncation or mutation of a real dump yields a module or an HloParseError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_sim.hlo import HloParseError, parse_module

CORPUS = sorted((Path(__file__).resolve().parents[1] / "data" / "jax").glob("*.hlo"))
# Small modules keep each example fast; they still contain every construct the parser handles.
TEXTS = [p.read_text() for p in CORPUS if p.stat().st_size < 12_000]

# Characters that matter to the grammar, plus some that never appear in HLO.
INTERESTING = list("{}()[],=%:/*\"<>-._ \nTx0123456789") + ["ROOT", "ENTRY", "->", "/*", "*/",
                                                             "f32", "s32[", "{...}", "\\", "é"]


def parse_or_parse_error(text: str) -> None:
    try:
        parse_module(text, "fuzz.hlo")
    except HloParseError as err:
        assert err.line >= 1 and err.col >= 1
        assert str(err).startswith(f"fuzz.hlo:{err.line}:{err.col}: ")


@st.composite
def mutated_texts(draw) -> str:
    text = draw(st.sampled_from(TEXTS))
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


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_texts())
def test_mutated_corpus_text_parses_or_raises_hlo_parse_error(text: str):
    parse_or_parse_error(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(INTERESTING), max_size=80).map("".join))
def test_arbitrary_text_after_header_parses_or_raises_hlo_parse_error(tail: str):
    parse_or_parse_error("HloModule m\n" + tail)
