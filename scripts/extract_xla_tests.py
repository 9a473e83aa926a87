"""Extract HLO modules and XLA's expectation for each from XLA's own test sources.

Usage: ``python scripts/extract_xla_tests.py SRC_DIR [-o tests/data/xla] [--commit SHA]``, then
``python scripts/extract_xla_tests.py --measure`` to judge every module with neuron-sim (the
judgement of ``tests/neuron_sim/test_xla_corpus.py``), write each disagreement into the manifest
as ``"known": "cause: detail"``, and print the causes with their counts for ``docs/xla-corpus.md``.

``SRC_DIR`` holds a copy of XLA's source tree (at least the ``*_test.cc`` files and the ``.hlo``
files named below, at their paths inside the repository). The script writes one ``.hlo`` file per
module, ``OUT/<source-file-stem>/<test-name>.hlo``, and ``OUT/manifest.json``; it keeps the
``known`` disagreement notes and ``rejected_later`` marks of an existing manifest for modules
that are extracted again.

A module's expectation is read from what the test asserts, never guessed from the text:

- ``accepted``: parsed and verified (``ParseAndReturnVerifiedModule`` under ``TF_ASSERT_OK*``
  or ``.value()``, ``RunAndFilecheckHloRewrite``, the verifier run asserted ok, the parser's
  round-trip tables, the ``.hlo`` files run by ``xla/tests/fuzz``);
- ``parses``: ``ParseAndReturnUnverifiedModule`` asserted ok and nothing verified;
- ``rejected_parser``: ``ParseAndReturnUnverifiedModule`` asserted to fail;
- ``rejected_verifier``: parsed unverified, then the verifier asserted to fail, with nothing
  changing the module in between;
- ``rejected``: ``ParseAndReturnVerifiedModule`` asserted to fail (parser or verifier).

Tests whose module is built by substitution (``absl::StrReplaceAll``, ``Substitute``,
``StrFormat``, ``StrCat``), changed before the asserted verifier run, verified with custom
options, or rejected by a layout-sensitive verifier (neuron-sim ignores layouts) are skipped.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

PARSER_TEST = "xla/hlo/parser/hlo_parser_test.cc"
VERIFIER_TEST = "xla/service/hlo_verifier_test.cc"
FUZZ_DIR = "xla/tests/fuzz"

# Every other test file of the tree (pass, analysis and backend tests) contributes all the
# modules it parses and verifies or rejects; SKIPPED_DIRS hold no HLO tests of XLA's own.
SKIPPED_DIRS = ("third_party/",)


def other_test_files(root: Path) -> list[str]:
    """The ``*_test.cc`` files under ``root`` other than the parser's and the verifier's."""
    found = []
    for path in sorted(root.rglob("*_test.cc")):
        rel = path.relative_to(root).as_posix()
        if rel not in (PARSER_TEST, VERIFIER_TEST) and not rel.startswith(SKIPPED_DIRS):
            found.append(rel)
    return found

# The notes a regeneration keeps for a module extracted again: ``known`` (written by
# --measure) and ``rejected_later`` (a parse-time rejection neuron-sim makes in its checker).
KEPT_NOTES = ("known", "rejected_later")

RAW_STRING = re.compile(r'R"([^()\\\s]{0,16})\((.*?)\)\1"', re.S)
TEST_HEAD = re.compile(r"^(?:TEST_F|TEST|TEST_P)\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{", re.M)
NAMED_RAW = re.compile(r"(\w+)\s*(?:\[\s*\])?\s*=\s*(@RAW\d+@)")
FIXTURE_CLASS = re.compile(r"class\s+(\w+)\s*(?:final\s*)?:\s*public[^{]*\{(.*?)\n\};", re.S)
CPP_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
SUBSTITUTIONS = ("StrReplaceAll", "Substitute", "StrFormat", "StrCat", "absl::StrJoin")
MUTATIONS = ("->set_", "Replace", "AddInstruction", "Remove", "mutable_", "set_schedule",
             "AddEmbedded", "Clear", "->Add", "->Set", "std::move(module)", "HloVerifier ",
             "HloVerifier{", "HloVerifierOpts", "Clone(", "TF_ASSERT_OK(", "->entry_computation()")
LAYOUT_SENSITIVE_FIXTURES = {"HloVerifierTestLayoutSensitive", "HloVerifierTestLayoutFusion",
                             "HloVerifierTestLayoutSensitiveAndAllowMixedPrecision"}
# Fixtures whose verifier is a backend's, not XLA's default one (the CPU/GPU shape verifier
# refuses custom element sizes, sub-byte types on some ops...): their verdicts are skipped.
BACKEND_VERIFIER_FIXTURES = {"CpuGpuShapeVerifierTest"}
# A template placeholder such as <<F8E4M3>>, filled in by the test before parsing.
PLACEHOLDER = re.compile(r"<<\w+>>")


@dataclass
class Module:
    """One extracted module and what its test says XLA does with it."""

    source: str
    test: str
    text: str
    expectation: str
    message: str | None = None
    round_trip: bool = False
    replica_count: int | None = None
    num_partitions: int | None = None
    allow_mixed_precision: bool = True
    file: str = ""


def cpp_literal(text: str) -> str:
    """The value of adjacent C++ string literals ``"a" "b"`` (common escapes only)."""
    parts = CPP_STRING.findall(text)
    joined = "".join(parts)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)),
                  joined)


def is_module_text(text: str) -> bool:
    """Whether a raw string is an HLO module (not a FileCheck pattern, not a fragment)."""
    stripped = text.lstrip()
    if "CHECK" in text or re.search(r"\$\w", text) or re.search(r"%[sd]\b", text):
        return False
    if PLACEHOLDER.search(text):
        return False
    return stripped.startswith("HloModule") or bool(re.search(r"^\s*ENTRY\b", text, re.M))


def mask_raw_strings(source: str) -> tuple[str, list[str]]:
    """``source`` with each raw string replaced by ``@RAWi@``, and the strings."""
    raws: list[str] = []

    def keep(match: re.Match[str]) -> str:
        raws.append(match.group(2))
        return f"@RAW{len(raws) - 1}@"

    return RAW_STRING.sub(keep, source), raws


def strip_comments(code: str) -> str:
    """C++ code without ``//`` and ``/* */`` comments (raw strings are already masked)."""
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)
    return re.sub(r"//[^\n]*", "", code)


def balanced_call(code: str, start: int) -> str:
    """The text of the call whose '(' is at or after ``start``, up to its matching ')'."""
    open_at = code.index("(", start)
    depth = 0
    for pos in range(open_at, len(code)):
        if code[pos] == "(":
            depth += 1
        elif code[pos] == ")":
            depth -= 1
            if depth == 0:
                return code[open_at + 1:pos]
    return code[open_at + 1:]


def split_args(args: str) -> list[str]:
    """Top-level comma-separated arguments of a call."""
    out, depth, current = [], 0, []
    for char in args:
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        if char == "," and depth == 0:
            out.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        out.append("".join(current).strip())
    return out


def config_topology(body: str, args: list[str]) -> tuple[int | None, int | None] | None:
    """(replica_count, num_partitions) a parse call's extra arguments set, None if unknowable."""
    if not args:
        return None, None
    if all(re.fullmatch(r"\d+", a) for a in args):
        ints = [int(a) for a in args] + [None]
        return ints[0], ints[1]
    if len(args) == 1 and re.fullmatch(r"\w+", args[0]):
        name = args[0]
        replicas = re.findall(rf"\b{name}\.set_replica_count\((\d+)\)", body)
        partitions = re.findall(rf"\b{name}\.set_num_partitions\((\d+)\)", body)
        made = re.search(rf"\b{name}\s*=\s*GetModuleConfigForTest\(([^)]*)\)", body)
        if made:
            values = [v for v in split_args(made.group(1)) if v]
            if not all(re.fullmatch(r"\d+", v) for v in values):
                return None
            replicas = replicas or values[:1]
            partitions = partitions or values[1:2]
        elif not re.search(rf"HloModuleConfig\s+{name}\b|\b{name}\s*=\s*"
                           r"GetModuleConfigWithoutFlags\(\)", body) or re.search(
                               rf"\b{name}\.set_(?!replica_count|num_partitions)", body):
            return None
        return (int(replicas[-1]) if replicas else None,
                int(partitions[-1]) if partitions else None)
    return None


def first_message(code: str) -> str | None:
    """The first expected-message substring the test asserts, if any."""
    match = re.search(r"(?:HasSubstr\(|ExpectHasSubstr\([^,]*,|StrContains\([^,]*,)\s*"
                      r'((?:"(?:[^"\\]|\\.)*"\s*)+)', code)
    return cpp_literal(match.group(1)) if match else None


def fixture_mixed_precision(source: str) -> dict[str, bool]:
    """Fixtures of a file whose verifier disallows mixed precision (HloTestBase allows it)."""
    found = {}
    for match in FIXTURE_CLASS.finditer(source):
        body = match.group(2)
        if re.search(r"allow_mixed_precision_in_hlo_verifier=\*/\s*false", body):
            found[match.group(1)] = False
    return found


def analyse_test(path: str, fixture: str, name: str, code: str, raws: list[str],
                 globals_: dict[str, str], mixed: dict[str, bool]) -> list[Module]:
    """The modules one TEST body parses, each with the expectation its assertions state."""
    local = {m.group(1): m.group(2) for m in NAMED_RAW.finditer(code)}
    handles: dict[str, str] = {}
    for var, token in local.items():
        handles[var] = raws[int(token[4:-1])]
    for token in re.findall(r"@RAW\d+@", code):
        handles.setdefault(token, raws[int(token[4:-1])])
    for var, text in globals_.items():
        if re.search(rf"\b{var}\b", code):
            handles.setdefault(var, text)
    modules = []
    allow_mixed = mixed.get(fixture, True)
    for handle, text in handles.items():
        if not is_module_text(text):
            continue
        if handle in local.values() and handle not in local:
            continue
        pattern = re.escape(handle) + (r"\b" if handle[0] != "@" else "")
        if any(re.search(rf"{sub}\([^;]*{pattern}", code) for sub in SUBSTITUTIONS):
            continue
        if concatenated(code, handle, local):
            continue
        if fixture in BACKEND_VERIFIER_FIXTURES:
            continue
        found = classify(path, fixture, code, pattern)
        if found is None:
            continue
        expectation, message, topology = found
        if topology is None:
            continue
        modules.append(Module(path, f"{fixture}.{name}", text, expectation, message,
                              replica_count=topology[0], num_partitions=topology[1],
                              allow_mixed_precision=allow_mixed))
    return modules


def concatenated(code: str, handle: str, local: dict[str, str]) -> bool:
    """Whether the test builds its module by joining ``handle`` with other text (``"..." +
    comparator + R"(...)"``, ``text += ...``): the raw string alone is not what XLA parses."""
    tokens = [handle] + ([local[handle]] if handle in local else []) + [
        var for var, token in local.items() if token == handle]
    for token in tokens:
        name = re.escape(token) + (r"\b" if token[0] != "@" else "")
        if re.search(rf"{name}\s*\+|\+\s*{name}", code):
            return True
        if token[0] == "@":  # the raw string assigned to a variable: look at the variable
            continue
        if re.search(rf"\b{name}\s*\+=", code):
            return True
    return False


def asserted_outcome(result: str, rest: str) -> str | None:
    """Whether the assertions on a parse result ``result`` say it "fails" or "passes" (None:
    they say neither, or both)."""
    fails = re.search(rf"(?:EXPECT|ASSERT)_NE\(\s*absl::OkStatus\(\),\s*{result}\.status\(\)"
                      rf"|(?:EXPECT|ASSERT)_FALSE\(\s*{result}\.ok\(\)"
                      rf"|{result}\.status\(\)\.message\(\)"
                      rf"|(?:EXPECT|ASSERT)_THAT\(\s*{result}(?:\.status\(\))?\s*,\s*"
                      rf"(?:tsl::testing::|absl_testing::)?StatusIs", rest)
    passes = re.search(rf"TF_(?:ASSERT|EXPECT)_OK\(\s*{result}\.status\(\)\)"
                       rf"|(?:EXPECT|ASSERT)_EQ\(\s*absl::OkStatus\(\),\s*{result}\.status"
                       rf"|(?:EXPECT|ASSERT)_TRUE\(\s*{result}\.ok\(\)", rest)
    if bool(fails) == bool(passes):
        return None
    return "fails" if fails else "passes"


def classify(path: str, fixture: str, code: str,
             pattern: str) -> tuple[str, str | None, tuple[int | None, int | None] | None] | None:
    """(expectation, message, topology) for the module named by ``pattern``, or None."""
    verified = re.search(rf"ParseAndReturnVerifiedModule\(\s*{pattern}", code)
    unverified = re.search(rf"ParseAndReturnUnverifiedModule\(\s*{pattern}", code)
    filecheck = re.search(rf"RunAndFilecheckHloRewrite\(\s*{pattern}", code)
    partitioned = re.search(rf"PartitionComputation\(\s*{pattern}", code)
    if sum(bool(x) for x in (verified, unverified, filecheck, partitioned)) != 1:
        return None
    call = verified or unverified or filecheck or partitioned
    assert call is not None
    args = split_args(balanced_call(code, call.start()))[1:]
    if partitioned:
        # The SPMD partitioner test's helper verifies its input on num_devices partitions.
        if args and re.fullmatch(r"\d+", args[0]) and "TF_ASSERT_OK_AND_ASSIGN" in code[
                code.rfind(";", 0, call.start()):call.start()]:
            return "accepted", None, (1, int(args[0]))
        return None
    statement_start = code.rfind(";", 0, call.start()) + 1
    statement_end = code.find(";", call.end())
    statement = code[statement_start:statement_end]
    rest = code[statement_end:]
    if filecheck:
        if len(args) > 3:
            return None
        return "accepted", None, (None, None)
    topology = config_topology(code, args)
    asserted_ok = bool(re.search(r"TF_(?:ASSERT|EXPECT)_OK(?:_AND_ASSIGN)?\(", statement)
                       or re.search(r"\)\s*\.value\(\)", statement))
    target = re.search(r"(?:auto|absl::StatusOr<[^;=]*>|std::unique_ptr<[^;=]*>)\s+(\w+)\s*=",
                       statement)
    result = target.group(1) if target else None
    if verified:
        if asserted_ok:
            return "accepted", None, topology
        if result is None:
            return None
        outcome = asserted_outcome(result, rest)
        if outcome == "fails":
            return "rejected", first_message(rest), topology
        return ("accepted", None, topology) if outcome == "passes" else None
    # ParseAndReturnUnverifiedModule: a parser verdict, or the verifier's on what it parsed.
    chained = statement[statement.find(call.group(0)):]
    if not asserted_ok and re.search(r"\)\s*\.(?:status|ok)\(\)", chained):
        if re.search(r"ExpectHasSubstr|HasSubstr|EXPECT_NE\(\s*absl::OkStatus|"
                     r"(?:EXPECT|ASSERT)_FALSE|StatusIs", statement):
            return "rejected_parser", first_message(statement), topology
        return None
    if result is None and not asserted_ok:
        return None
    if not asserted_ok:
        outcome = asserted_outcome(result, rest)
        if outcome == "fails":
            return "rejected_parser", first_message(rest), topology
        if outcome != "passes":
            return None
        asserted_ok = True
    module_var = re.search(r"TF_ASSERT_OK_AND_ASSIGN\(\s*(?:auto|std::unique_ptr<\w+>)\s+(\w+)",
                           statement)
    module_var_name = module_var.group(1) if module_var else result
    run = re.search(rf"verifier\(\)\.Run\(\s*{module_var_name}\.get\(\)\)", rest)
    if run is None:
        return ("parses", None, topology) if path != VERIFIER_TEST else None
    between = rest[:rest.rfind(";", 0, run.start()) + 1]
    if any(m in between for m in MUTATIONS):
        return None
    run_statement_end = rest.find(";", run.end())
    run_statement = rest[rest.rfind(";", 0, run.start()) + 1:run_statement_end]
    after = rest[run_statement_end:]
    if re.search(r"TF_(?:ASSERT|EXPECT)_OK\(", run_statement):
        return "accepted", None, topology
    if re.search(r"(?:EXPECT|ASSERT)_FALSE\(", run_statement):
        return _rejected_verifier(fixture, after, topology)
    if re.search(r"\.status\(\)\s*\.message\(\)", run_statement):
        if "HasSubstr" in run_statement:
            return _rejected_verifier(fixture, run_statement, topology)
        held = re.search(r"(\w+)\s*[(=]\s*verifier\(\)", run_statement)
        if held and re.search(rf"{held.group(1)}\s*,\s*HasSubstr", after):
            return _rejected_verifier(fixture, after, topology)
        return None
    status = re.search(r"(?:auto|absl::Status)\s+(\w+)\s*=", run_statement)
    if status is None:
        return None
    var = status.group(1)
    next_check = re.search(rf"[^;]*\b{var}\b[^;]*;", after)
    if next_check is None:
        return None
    check = next_check.group(0)
    if re.search(rf"(?:EXPECT|ASSERT)_TRUE\(\s*{var}\.ok\(\)|TF_(?:ASSERT|EXPECT)_OK\(\s*{var}"
                 rf"|IsOk\(\)\)", check) and "Not(" not in check:
        return "accepted", None, topology
    if re.search(rf"(?:EXPECT|ASSERT)_FALSE\(\s*{var}\.ok\(\)|StatusIs|{var}\.message\(\)|"
                 rf"Not\(IsOk", check):
        return _rejected_verifier(fixture, after, topology)
    return None


def _rejected_verifier(fixture: str, after: str,
                       topology: tuple[int | None, int | None] | None
                       ) -> tuple[str, str | None, tuple[int | None, int | None] | None] | None:
    """A verifier rejection, unless only a layout-sensitive verifier makes it."""
    if fixture in LAYOUT_SENSITIVE_FIXTURES:
        return None
    return "rejected_verifier", first_message(after), topology


def extract_tests(root: Path, path: str, limit: int | None = None) -> list[Module]:
    """The modules of the TEST bodies of one ``*_test.cc`` (at most ``limit``, 0 = none)."""
    source = (root / path).read_text(encoding="utf-8")
    masked, raws = mask_raw_strings(source)
    code = strip_comments(masked)
    mixed = fixture_mixed_precision(masked)
    heads = list(TEST_HEAD.finditer(code))
    preamble = code[:heads[0].start()] if heads else code
    globals_ = {m.group(1): raws[int(m.group(2)[4:-1])] for m in NAMED_RAW.finditer(preamble)}
    modules: list[Module] = []
    for index, head in enumerate(heads):
        end = heads[index + 1].start() if index + 1 < len(heads) else len(code)
        between = code[head.end():end]
        globals_.update({m.group(1): raws[int(m.group(2)[4:-1])]
                         for m in NAMED_RAW.finditer(between.split("\n}\n", 1)[-1])})
        body = between.split("\n}\n", 1)[0]
        modules += analyse_test(path, head.group(1), head.group(2), body, raws, globals_, mixed)
    if limit:
        modules = modules[:limit]
    return modules


def extract_parser_tables(root: Path) -> list[Module]:
    """The parser's round-trip tables (accepted, printed back verbatim) and its non-round-trip
    table (accepted; the printed form differs by design)."""
    source = (root / PARSER_TEST).read_text(encoding="utf-8")
    masked, raws = mask_raw_strings(source)
    code = strip_comments(masked)
    modules = []
    for table in ("CreateTestCases", "CreateShortTestCases", "CreateNonRoundtripTestCases"):
        start = code.index(f"> {table}() {{")
        end = code.index("\n}\n", start)
        body = code[start:end]
        entry = re.compile(r'\{\s*"(\w+)"\s*,\s*(@RAW\d+@)\s*((?:,\s*[^,{}]+?\s*)*)\}', re.S)
        for match in entry.finditer(body):
            name, token, extra = match.groups()
            fields = [f.strip() for f in extra.split(",") if f.strip()]
            text = raws[int(token[4:-1])]
            replicas = int(fields[0]) if fields and re.fullmatch(r"\d+", fields[0]) else None
            verify = not (len(fields) > 1 and fields[1] == "false")
            non_round_trip = table == "CreateNonRoundtripTestCases"
            modules.append(Module(
                PARSER_TEST, f"{table}.{name}", text,
                "accepted" if verify else "parses", round_trip=not non_round_trip,
                replica_count=replicas if not non_round_trip else None,
                allow_mixed_precision=True))
    return modules


def extract_fuzz(root: Path) -> list[Module]:
    """The ``.hlo`` files that ``xla/tests/fuzz`` runs (so parsed and verified)."""
    return [Module(f"{FUZZ_DIR}/{hlo.name}", "run_hlo_module", hlo.read_text(encoding="utf-8"),
                   "accepted", allow_mixed_precision=False)
            for hlo in sorted((root / FUZZ_DIR).glob("*.hlo"))]


def stem_of(source: str) -> str:
    """The directory a module's file goes in: its source file's stem (``fuzz`` for the fuzz
    directory's ``.hlo`` files)."""
    if source.startswith(FUZZ_DIR + "/"):
        return "fuzz"
    return Path(source).stem


def assign_files(modules: list[Module]) -> None:
    """``<stem>/<test-name>.hlo`` for each module, a numeric suffix where a name repeats."""
    used: set[str] = set()
    for module in modules:
        if module.source.startswith(FUZZ_DIR + "/"):
            base = f"fuzz/{Path(module.source).stem}"
        else:
            base = f"{stem_of(module.source)}/{module.test.split('.', 1)[1]}"
        name, counter = base, 1
        while name in used:
            counter += 1
            name = f"{base}_{counter}"
        used.add(name)
        module.file = name + ".hlo"

# Causes of disagreement, first match wins: (regex over "file | disagreement", cause).
CAUSES: tuple[tuple[str, str], ...] = (
    (r"internal error", "internal error (a crash, not a verdict)"),
    (r"slice_sizes", "parser: slice_sizes={{...},{...}} of the in-place collective-permute"),
    (r"dim_labels", "parser: dim_labels with '?'"),
    (r"CustomCallWithLiteral", "parser: custom-call literal= attribute"),
    (r"found '\.\d", "parser: instruction names that begin with a keyword (token.0)"),
    (r"Invalid integer data type", "parser: s4/u4 constants"),
    (r"expected 'atom'", "parser: NaN payloads nan(0x...) in constants"),
    (r"is out of range for u\d+", "parser: negative constants of unsigned types"),
    (r"Sparse|dot expects 2 operands|sparse", "opcodes: sparse dot (metadata operands)"),
    (r"mixed_precision|MixedPrecision|mixed precision", "checker stricter: mixed precision that allow_mixed_precision permits"),
    (r"round-trip case does not print back", "printer: a round-trip case is not printed verbatim"),
    (r"print -> parse -> print|does not parse back", "printer: printed text does not reparse "
     "to itself"),
    (r"XLA accepts, neuron-sim's checker.*\b(?:send|recv)", "checker stricter: send / recv "
     "shapes"),
    (r"XLA accepts, neuron-sim's checker", "checker stricter than XLA"),
    (r"XLA accepts, neuron-sim's parser", "parser stricter than XLA"),
    (r"Overflow|Underflow|out of range", "parser laxer: constants out of their type's range"),
    (r"Aliasing|BufferDonor", "parser laxer: input_output_alias / buffer_donor syntax"),
    (r"DimLevelType|SparseTiles|DensePhysical", "parser laxer: sparse layouts"),
    (r"parser_test/Async", "parser laxer: async wrapper start/update/done consistency"),
    (r"XLA's (?:parser|XLA) rejects", "parser laxer: other parse-time checks"),
    (r"[Tt]hread", "checker laxer: execution threads"),
    (r"[Cc]omposite", "checker laxer: composite calls"),
    (r"[Ss]harding", "checker laxer: shardings"),
    (r"requires one consumer|needs to be", "checker laxer: async start/done pairing"),
    (r"channel", "checker laxer: channel ids"),
    (r"XLA's verifier rejects", "checker laxer: other verifier rules"),
)


def cause_of(file: str, disagreement: str) -> str:
    """The cause a disagreement is filed under in the manifest and the documentation."""
    line = f"{file} | {disagreement}"
    return next((cause for pattern, cause in CAUSES if re.search(pattern, line)), "other")


def print_counts(entries: list[dict]) -> None:
    """A markdown table of the modules by source and expectation."""
    columns = ("accepted", "parses", "rejected_parser", "rejected_verifier", "rejected")
    rows: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for entry in entries:
        source = f"{FUZZ_DIR}/*.hlo" if entry["source"].startswith(FUZZ_DIR) else entry["source"]
        rows[source].update([entry["expectation"]] + ["round trip"] * entry["round_trip"]
                            + ["known"] * ("known" in entry))
    print("| source | modules | " + " | ".join(columns) + " | round trip | disagreements |")
    print("|---" * (len(columns) + 4) + "|")
    total: collections.Counter[str] = collections.Counter()
    for source, counts in sorted(rows.items(), key=lambda kv: -sum(kv[1][c] for c in columns)):
        total.update(counts)
        cells = [counts[c] for c in (*columns, "round trip", "known")]
        print(f"| `{source}` | {sum(counts[c] for c in columns)} | "
              + " | ".join(map(str, cells)) + " |")
    cells = [total[c] for c in (*columns, "round trip", "known")]
    print(f"| total | {len(entries)} | " + " | ".join(map(str, cells)) + " |\n")


def measure(out: Path) -> int:
    """Judge every module, rewrite the manifest's known notes, print the causes (markdown)."""
    test_path = Path(__file__).resolve().parents[1] / "tests/neuron_sim/test_xla_corpus.py"
    spec = importlib.util.spec_from_file_location("test_xla_corpus", test_path)
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = corpus
    spec.loader.exec_module(corpus)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    groups: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for entry in manifest["modules"]:
        entry.pop("known", None)
        found = corpus.disagreement(entry)
        if found:
            cause = cause_of(entry["file"], found)
            entry["known"] = f"{cause}: {found}"
            groups[cause].append((entry["file"], found))
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    total = len(manifest["modules"])
    known = sum(len(v) for v in groups.values())
    print_counts(manifest["modules"])
    print(f"agreement: {total - known}/{total} = {(total - known) / total:.1%}\n")
    for cause, items in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"### {cause} ({len(items)})\n")
        for file, found in items:
            print(f"- `{file}`: {found}")
        print()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Extract the corpus from a copy of XLA's sources and write the files and the manifest."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("src", type=Path, nargs="?", help="a copy of XLA's source tree")
    parser.add_argument("--measure", action="store_true",
                        help="judge the corpus with neuron-sim and record the disagreements")
    parser.add_argument("-o", "--out", type=Path, default=Path("tests/data/xla"))
    parser.add_argument("--commit", default="", help="the XLA commit the sources are from")
    parser.add_argument("--repository", default="openxla/xla")
    args = parser.parse_args(argv)
    if args.measure:
        return measure(args.out)
    if args.src is None:
        parser.error("give the directory of XLA's sources, or --measure")

    modules = extract_parser_tables(args.src) + extract_tests(args.src, PARSER_TEST)
    modules += extract_tests(args.src, VERIFIER_TEST)
    modules += extract_fuzz(args.src)
    for path in other_test_files(args.src):
        modules += extract_tests(args.src, path)
    seen: set[str] = set()
    unique = []
    for module in modules:
        if module.text not in seen:
            seen.add(module.text)
            unique.append(module)
    assign_files(unique)

    manifest_path = args.out / "manifest.json"
    known = {}
    if manifest_path.exists():
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
        known = {m["file"]: {k: m[k] for k in KEPT_NOTES if k in m} for m in old["modules"]}
    entries = []
    for module in unique:
        target = args.out / module.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(module.text, encoding="utf-8")
        entry = {"file": module.file, "source": module.source, "test": module.test,
                 "expectation": module.expectation, "message": module.message,
                 "round_trip": module.round_trip, "replica_count": module.replica_count,
                 "num_partitions": module.num_partitions,
                 "allow_mixed_precision": module.allow_mixed_precision}
        entry.update(known.get(module.file, {}))
        entries.append(entry)
    manifest = {"repository": args.repository, "commit": args.commit, "modules": entries}
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry["expectation"]] = counts.get(entry["expectation"], 0) + 1
    print(f"{len(entries)} modules: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
