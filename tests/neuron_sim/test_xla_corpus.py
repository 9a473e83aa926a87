"""XLA's own test modules: neuron-sim's parser and checker give XLA's verdict on each.

``tests/data/xla/manifest.json`` lists modules extracted from XLA's test sources by
``scripts/extract_xla_tests.py``, each with the expectation its XLA test asserts (accepted,
parses, rejected by the parser or by the verifier). The expected verdicts come from XLA's tests,
not from neuron-sim. A module on which neuron-sim is known to disagree carries ``"known":
"reason"`` and is an expected failure, strictly: a fix makes it pass and so fail the run until the
note is removed (``docs/xla-corpus.md`` groups the notes by cause).

Beyond the verdict, every module XLA accepts must print stably (print -> parse -> print gives the
same text), and the modules of XLA's round-trip tables must print back verbatim.

The corpus holds every module of XLA's test files (about 3,900); the per-module tests run a fixed
sample of it (the parser's and the verifier's tests, the fuzz modules, every known disagreement
and one in ``SAMPLE_EVERY`` of the other files' modules) to keep the suite fast.
``python scripts/extract_xla_tests.py --measure`` judges all of them and writes the known notes
that ``test_known_disagreements_stay_within_the_bars`` holds to the bars.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from neuron_sim.errors import UserError
from neuron_sim.hlo import HloModule, parse_module, print_module
from neuron_sim.hlo.checker import check_module
from neuron_sim.topology import Topology

CORPUS = Path(__file__).resolve().parents[1] / "data" / "xla"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
ENTRIES: list[dict] = MANIFEST["modules"]
# Of the modules XLA accepts, at least ACCEPT_BAR must be accepted; of those it rejects, at
# least REJECT_BAR rejected (measured on the whole corpus: 3,754 of 3,754 and 147 of 147).
ACCEPT_BAR = 0.999
REJECT_BAR = 0.99
ACCEPTING = ("accepted", "parses")
CORE_SOURCES = ("xla/hlo/parser/hlo_parser_test.cc", "xla/service/hlo_verifier_test.cc")
SAMPLE_EVERY = 10
# The stage of neuron-sim that should reject what each of XLA's stages rejects.
STAGES = {"rejected_parser": "parser", "rejected_verifier": "checker"}
STAGE_NAMES = {"rejected_parser": "XLA's parser", "rejected_verifier": "XLA's verifier"}


@dataclass(frozen=True)
class Verdict:
    """What neuron-sim did with one module: the stage that turned it away (None: accepted,
    "parser", "checker", "internal") with the message, and the printing problems found."""

    rejected_by: str | None
    message: str = ""
    printing: str = ""


def topology_for(entry: dict, module: HloModule) -> Topology:
    """The module header's replica and partition counts where it sets them (other than 1), else
    the test's configuration: XLA's parser lets the header override the configuration."""
    replicas = module.replica_count if module.replica_count != 1 else entry["replica_count"] or 1
    partitions = (module.num_partitions if module.num_partitions != 1
                  else entry["num_partitions"] or 1)
    return Topology(replicas, partitions)


def printing_problem(entry: dict, text: str, module: HloModule) -> str:
    """How printing fails XLA's expectations for an accepted module ('' when it does not)."""
    try:
        printed = print_module(module)
        again = print_module(parse_module(printed, entry["file"] + " (printed)"))
    except Exception as exc:  # noqa: BLE001 - any failure of the round trip is the finding
        return f"the printed module does not parse back: {type(exc).__name__}: {exc}"
    if again != printed:
        return "print -> parse -> print changes the text"
    if entry["round_trip"] and printed != text:
        return "a round-trip case does not print back verbatim"
    return ""


@functools.cache
def judge(file: str) -> Verdict:
    """Parse and check one corpus module the way its XLA test did (its topology, its verifier's
    mixed-precision option; channel ids unique per opcode, as HloVerifierOpts defaults)."""
    entry = next(e for e in ENTRIES if e["file"] == file)
    text = (CORPUS / file).read_text(encoding="utf-8")
    try:
        module = parse_module(text, file)
    except UserError as exc:
        return Verdict("parser", str(exc).splitlines()[0])
    except Exception as exc:  # noqa: BLE001 - an internal error is a disagreement to report
        return Verdict("internal", f"{type(exc).__name__} while parsing: {exc}")
    if entry["expectation"] != "parses":
        try:
            check_module(module, topology_for(entry, module),
                         allow_mixed_precision=entry["allow_mixed_precision"],
                         unique_channel_ids=True)
        except UserError as exc:
            return Verdict("checker", str(exc).splitlines()[0])
        except Exception as exc:  # noqa: BLE001 - as above
            return Verdict("internal", f"{type(exc).__name__} while checking: {exc}")
    problem = printing_problem(entry, text, module) if entry["expectation"] in ACCEPTING else ""
    return Verdict(None, printing=problem)


def disagreement(entry: dict) -> str:
    """How neuron-sim's verdict differs from XLA's on ``entry`` ('' when they agree)."""
    verdict = judge(entry["file"])
    if verdict.rejected_by == "internal":
        return f"internal error: {verdict.message}"
    if entry["expectation"] in ACCEPTING:
        if verdict.rejected_by is not None:
            return f"XLA accepts, neuron-sim's {verdict.rejected_by} rejects: {verdict.message}"
        return verdict.printing
    if verdict.rejected_by is None:
        stage = STAGE_NAMES.get(entry["expectation"], "XLA")
        expected = f" ({entry['message']})" if entry["message"] else ""
        return f"{stage} rejects{expected}, neuron-sim accepts"
    return ""


def in_sample(index: int, entry: dict) -> bool:
    """Whether the per-module tests run ``entry`` (the ``index``-th of the manifest)."""
    return (entry["source"] in CORE_SOURCES or entry["source"].startswith("xla/tests/fuzz/")
            or "known" in entry or index % SAMPLE_EVERY == 0)


SAMPLE = [e for i, e in enumerate(ENTRIES) if in_sample(i, e)]


def _params() -> list:
    marks = {e["file"]: pytest.mark.xfail(strict=True, reason=e["known"])
             for e in SAMPLE if "known" in e}
    return [pytest.param(e, id=e["file"], marks=marks.get(e["file"], ())) for e in SAMPLE]


def test_corpus_has_at_least_3800_modules_of_both_verdicts():
    expectations = [e["expectation"] for e in ENTRIES]
    assert len(ENTRIES) >= 3800
    assert sum(x.startswith("rejected") for x in expectations) >= 140
    assert all((CORPUS / e["file"]).is_file() for e in ENTRIES)
    assert 600 <= len(SAMPLE) <= 1000


@pytest.mark.parametrize("entry", _params())
def test_neuron_sim_gives_xlas_verdict(entry: dict):
    assert disagreement(entry) == ""


def test_known_disagreements_stay_within_the_bars():
    """Each sampled entry's own test holds its verdict, ``--measure`` the others'; the bars bound
    how many may be known, among the modules XLA accepts and among those it rejects."""
    accepting = [e for e in ENTRIES if e["expectation"] in ACCEPTING]
    rejecting = [e for e in ENTRIES if e["expectation"] not in ACCEPTING]
    assert sum("known" not in e for e in accepting) >= ACCEPT_BAR * len(accepting)
    assert sum("known" not in e for e in rejecting) >= REJECT_BAR * len(rejecting)


STAGED = [e for e in ENTRIES if e["expectation"] in STAGES]


@pytest.mark.parametrize("entry", STAGED, ids=[e["file"] for e in STAGED])
def test_a_rejection_comes_from_the_stage_that_rejects_it_in_xla(entry: dict):
    """A module XLA's parser rejects is rejected by neuron-sim's parser, one XLA's verifier
    rejects by its checker — except the entries marked ``rejected_later`` (XLA's parser checks
    operand counts and shapes at parse time; neuron-sim leaves some of that to its checker),
    which must stay rejected later, so that a fix shows up here."""
    verdict = judge(entry["file"])
    expected = STAGES[entry["expectation"]]
    if "rejected_later" in entry:
        assert (entry["expectation"], verdict.rejected_by) == ("rejected_parser", "checker")
    else:
        assert verdict.rejected_by == expected, verdict.message


def _extractor():
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[2] / "scripts" / "extract_xla_tests.py"
    spec = importlib.util.spec_from_file_location("extract_xla_tests", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


MODULE_TEXT = "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"


@pytest.mark.parametrize(("body", "kept"), [
    # The raw string alone is what the test parses and verifies.
    ('  const std::string hlo = R"(' + MODULE_TEXT + ')";\n'
     "  TF_ASSERT_OK_AND_ASSIGN(auto m, ParseAndReturnVerifiedModule(hlo));\n", True),
    # Joined with other text: not the module XLA parses.
    ('  const std::string hlo = R"(' + MODULE_TEXT + ')" + extra;\n'
     "  TF_ASSERT_OK_AND_ASSIGN(auto m, ParseAndReturnVerifiedModule(hlo));\n", False),
    ('  std::string hlo = R"(' + MODULE_TEXT + ')";\n  hlo += extra;\n'
     "  TF_ASSERT_OK_AND_ASSIGN(auto m, ParseAndReturnVerifiedModule(hlo));\n", False),
    # A template the test fills in.
    ('  const std::string hlo = R"(' + MODULE_TEXT.replace("f32", "<<F8E4M3>>") + ')";\n'
     "  TF_ASSERT_OK_AND_ASSIGN(auto m, ParseAndReturnVerifiedModule(hlo));\n", False),
])
def test_the_extractor_keeps_only_modules_whose_text_is_what_xla_parses(tmp_path, body, kept):
    extractor = _extractor()
    source = tmp_path / "xla" / "service" / "foo_test.cc"
    source.parent.mkdir(parents=True)
    source.write_text(f"TEST_F(FooTest, Bar) {{\n{body}}}\n", encoding="utf-8")
    modules = extractor.extract_tests(tmp_path, "xla/service/foo_test.cc")
    assert [m.expectation for m in modules] == (["accepted"] if kept else [])
