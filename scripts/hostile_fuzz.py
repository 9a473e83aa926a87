"""The tool under hostile input: mutated modules through ``check``, ``run`` and ``verify``.

Starts from every HLO file of the corpus (``tests/data/**/*.hlo``) and breaks them as text, the
way a hand edit, a bad tool or a hostile user would:

=================  ============================================================================
``swap-tokens``    two tokens trade places (in one line, or anywhere in the module)
``change-number``  an integer becomes another (0, -1, a neighbour, a double, 2^31, 2^63, ...)
``delete-line``    a line disappears
``duplicate-line`` a line appears twice, in place or somewhere else
``drop-attribute`` one ``name=value`` attribute of an instruction disappears
``alter-shape``    a shape gets another element type, a dimension changed, added or removed
``shuffle-groups`` replica groups / source-target pairs: members shuffled, dropped, repeated
``truncate``       the file ends early
=================  ============================================================================

Every mutant goes through ``check``; of those that still check, a share is run (``run
--timeout 10``) and a share verified (``verify`` against a registered pass, or against the
unmutated module, ``--trials 1``). Each command runs IN-PROCESS through ``neuron_sim.cli.main``
(stdout and stderr captured), in worker processes (``--jobs``) that cap their own memory, so a
command that allocates without asking is an error here rather than a swapping machine. A
failure is: a Python traceback or an "internal error" on stderr, an exception escaping
``main``, an exit code other than 0/1/2, or a command running past its time limit. Mutants are
drawn from ``--seed``: the same seed and corpus give the same mutants.

    python scripts/hostile_fuzz.py --count 7000             # the full campaign, counts printed
    python scripts/hostile_fuzz.py --count 300 --keep DIR   # also write each failing mutant
    python scripts/hostile_fuzz.py --count 3000 --json      # machine-readable report
    python scripts/hostile_fuzz.py --proto 3000             # mutated HloModuleProto files

Exit code 0 when no failure was found, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "data"
RUN_TIMEOUT = 10.0          # run --timeout
LIMIT_GRACE = 1.5           # a command ends within 1 s of its limit (interrupts.hard_deadline)
VERIFY_TIMEOUT = 2.0        # verify --timeout: the source's limit per execution
CHECK_LIMIT = 20.0          # seconds a check may take
RUN_GRACE = 5.0             # parsing, checking and writing on top of --timeout
VERIFY_LIMIT = 90.0         # seconds a whole verify may take (several executions, a minimizer)
MEMORY_CAP = 8 << 30        # address space of a worker process
MAX_MEMORY = "2G"           # --max-memory: what the tool must refuse before allocating
ALLOWED_CODES = {"check": {0, 1, 2}, "run": {0, 1, 2}, "verify": {0, 1, 2}}


# --------------------------------------------------------------------------------------------
# Mutations: (text, rng) -> mutated text, or None when the text offers no site.

TOKEN = re.compile(r"%[\w.\-]+|[A-Za-z_][\w.\-]*|-?\d+(?:\.\d+)?|[{}\[\](),=]")
NUMBER = re.compile(r"(?<![\w%.\-])-?\d+(?![\w.])")
SHAPE = re.compile(r"\b(pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128|"
                   r"f8e4m3fn|f8e5m2)\[([0-9,]*)\]")
ELEMENT_TYPES = ("pred", "s8", "s32", "s64", "u8", "u32", "f16", "bf16", "f32", "f64", "c64")
ATTRIBUTE = re.compile(r",\s*([a-z_]+)=")
GROUPS = re.compile(r"(replica_groups|source_target_pairs)=\{((?:\{[\d,\s]*\},?\s*)*)\}")


def swap_tokens(text: str, rng: random.Random) -> str | None:
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if len(TOKEN.findall(line)) >= 2]
    if not candidates:
        return None
    if rng.random() < 0.6:
        i = rng.choice(candidates)
        spans = [m.span() for m in TOKEN.finditer(lines[i])]
        (a0, a1), (b0, b1) = sorted(rng.sample(spans, 2))
        line = lines[i]
        lines[i] = line[:a0] + line[b0:b1] + line[a1:b0] + line[a0:a1] + line[b1:]
        return "\n".join(lines)
    spans = [m.span() for m in TOKEN.finditer(text)]
    (a0, a1), (b0, b1) = sorted(rng.sample(spans, 2))
    return text[:a0] + text[b0:b1] + text[a1:b0] + text[a0:a1] + text[b1:]


def change_number(text: str, rng: random.Random) -> str | None:
    sites = list(NUMBER.finditer(text))
    if not sites:
        return None
    site = rng.choice(sites)
    n = int(site.group())
    value = rng.choice([0, 1, -1, n + 1, n - 1, 2 * n, n * 1000, 2**31, 2**63, 10**6,
                        rng.randrange(17)])
    return text[:site.start()] + str(value) + text[site.end():]


def _body_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if line.strip()]


def delete_line(text: str, rng: random.Random) -> str | None:
    lines = text.split("\n")
    sites = _body_lines(text)
    if not sites:
        return None
    del lines[rng.choice(sites)]
    return "\n".join(lines)


def duplicate_line(text: str, rng: random.Random) -> str | None:
    lines = text.split("\n")
    sites = _body_lines(text)
    if not sites:
        return None
    line = lines[rng.choice(sites)]
    lines.insert(rng.randrange(len(lines) + 1) if rng.random() < 0.4 else sites[0] + 1, line)
    return "\n".join(lines)


def _value_end(text: str, start: int) -> int:
    """Where an attribute value starting at ``start`` ends: the next ``,`` or ``)`` or line
    end outside braces, brackets and quotes."""
    depth, quoted, i = 0, False, start
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            if depth == 0:
                return i
            depth -= 1
        elif c in ",\n" and depth == 0:
            return i
        i += 1
    return i


def drop_attribute(text: str, rng: random.Random) -> str | None:
    sites = list(ATTRIBUTE.finditer(text))
    if not sites:
        return None
    site = rng.choice(sites)
    return text[:site.start()] + text[_value_end(text, site.end()):]


def alter_shape(text: str, rng: random.Random) -> str | None:
    sites = list(SHAPE.finditer(text))
    if not sites:
        return None
    site = rng.choice(sites)
    element_type, dims = site.group(1), [d for d in site.group(2).split(",") if d]
    choice = rng.randrange(4)
    if choice == 0:
        element_type = rng.choice(ELEMENT_TYPES)
    elif choice == 1 and dims:
        k = rng.randrange(len(dims))
        dims[k] = str(rng.choice([0, 1, int(dims[k]) + 1, 2 * int(dims[k]), 100000]))
    elif choice == 2:
        dims.insert(rng.randrange(len(dims) + 1), str(rng.choice([1, 2, 3])))
    elif dims:
        del dims[rng.randrange(len(dims))]
    else:
        dims = ["2"]
    return text[:site.start()] + f"{element_type}[{','.join(dims)}]" + text[site.end():]


def shuffle_groups(text: str, rng: random.Random) -> str | None:
    sites = list(GROUPS.finditer(text))
    if not sites:
        return None
    site = rng.choice(sites)
    groups = [[int(x) for x in g.split(",") if x.strip()]
              for g in re.findall(r"\{([\d,\s]*)\}", site.group(2))]
    members = [m for g in groups for m in g]
    choice = rng.randrange(5)
    if choice == 0 and members:        # shuffled across the groups, sizes kept
        rng.shuffle(members)
        it = iter(members)
        groups = [[next(it) for _ in g] for g in groups]
    elif choice == 1 and groups:       # a member dropped
        g = rng.choice([g for g in groups if g] or [groups[0]])
        if g:
            g.pop(rng.randrange(len(g)))
    elif choice == 2 and members:      # a member repeated
        rng.choice(groups).append(rng.choice(members))
    elif choice == 3 and len(groups) >= 2:  # two groups merged
        a, b = rng.sample(range(len(groups)), 2)
        groups[a] += groups[b]
        del groups[b]
    else:                              # every group emptied, or one more group
        groups = [] if groups and rng.random() < 0.5 else groups + [[max(members or [0]) + 1]]
    body = ",".join("{" + ",".join(map(str, g)) + "}" for g in groups)
    return text[:site.start()] + f"{site.group(1)}={{{body}}}" + text[site.end():]


def truncate(text: str, rng: random.Random) -> str | None:
    return text[:rng.randrange(len(text))] if text else None


MUTATIONS: dict[str, Callable[[str, random.Random], str | None]] = {
    "swap-tokens": swap_tokens, "change-number": change_number, "delete-line": delete_line,
    "duplicate-line": duplicate_line, "drop-attribute": drop_attribute,
    "alter-shape": alter_shape, "shuffle-groups": shuffle_groups, "truncate": truncate,
}
# Relative frequencies: truncation breaks nearly everything the same way; keep it rare.
WEIGHTS = {"truncate": 1}


@dataclass(frozen=True)
class Mutant:
    index: int
    base: str               # corpus path, relative to tests/data
    mutations: tuple[str, ...]
    text: str
    base_text: str


def corpus(root: Path = CORPUS) -> list[tuple[str, str]]:
    """Every HLO file under ``root`` as (relative path, text), sorted by path."""
    files = sorted(root.rglob("*.hlo"))
    return [(str(p.relative_to(root)), p.read_text(encoding="utf-8", errors="replace"))
            for p in files]


def mutant(index: int, seed: int, bases: Sequence[tuple[str, str]]) -> Mutant:
    """Mutant ``index`` of campaign ``seed``: one to three mutations of one corpus file."""
    rng = random.Random(f"{seed}:{index}")
    name, base_text = bases[rng.randrange(len(bases))]
    names = list(MUTATIONS)
    weights = [WEIGHTS.get(n, 6) for n in names]
    text, applied = base_text, []
    wanted = rng.choice((1, 1, 1, 2, 3))
    for _ in range(20):  # a mutation without a site in this module is drawn again
        if len(applied) == wanted:
            break
        kind = rng.choices(names, weights)[0]
        changed = MUTATIONS[kind](text, rng)
        if changed is not None and changed != text:
            text, applied = changed, applied + [kind]
    return Mutant(index, name, tuple(applied), text, base_text)


# --------------------------------------------------------------------------------------------
# Running one command in-process and judging what the user would see.


class Overtime(BaseException):
    """Raised by the guard alarm: the command ran past its hard limit."""


@dataclass
class Outcome:
    command: str
    code: int | None
    seconds: float
    failure: str | None     # None, "traceback", "internal error", "exit code", "time limit"
    stderr: str


def invoke(argv: Sequence[str], command: str, limit: float, cwd: Path) -> Outcome:
    """``neuron-sim ARGV`` through ``neuron_sim.cli.main`` in ``cwd``, judged."""
    from neuron_sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    escaped = None
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit * 2 + 10)
    started = time.monotonic()
    here = os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    except Overtime:
        escaped = "time limit"
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 2
    except BaseException as exc:  # noqa: BLE001 - an exception escaping main is the finding
        escaped = f"{type(exc).__name__}: {exc}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
    seconds = time.monotonic() - started
    stderr = err.getvalue()
    failure = judge(command, code, seconds, limit, stderr)
    if escaped is not None:
        failure = "time limit" if escaped == "time limit" else "traceback"
        stderr += f"\n[escaped main] {escaped}"
    return Outcome(command, code, seconds, failure, stderr[-2000:])


def _alarm(signum, frame) -> None:  # noqa: ARG001
    raise Overtime()


def judge(command: str, code: int | None, seconds: float, limit: float,
          stderr: str) -> str | None:
    """The failure class of one command's result, or None when the user got a clean answer."""
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    if "internal error" in stderr:
        return "internal error"
    if code not in ALLOWED_CODES[command]:
        return "exit code"
    if seconds > limit + LIMIT_GRACE:
        return "time limit"
    return None


def check_argv(path: str) -> list[str]:
    return ["check", path]


def run_argv(path: str, out: str) -> list[str]:
    return ["run", path, "--seed", "1", "--timeout", f"{RUN_TIMEOUT:g}", "--max-memory",
            MAX_MEMORY, "-o", out]


def verify_argv(path: str, base: str | None, pass_key: str | None,
                minimize: bool) -> list[str]:
    argv = ["verify", path] + ([base] if base else ["--passes", pass_key or "dce"])
    argv += ["--trials", "1", "--timeout", f"{VERIFY_TIMEOUT:g}", "--max-memory", MAX_MEMORY]
    return argv + ([] if minimize else ["--no-minimize"])


# --------------------------------------------------------------------------------------------
# A shard of the campaign (one worker process) and the whole campaign.


@dataclass
class Failure:
    failure: str
    command: str
    argv: list[str]
    base: str
    mutations: list[str]
    index: int
    stderr: str
    text: str


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)        # command -> mutants run through it
    codes: Counter = field(default_factory=Counter)         # "command:code" -> how many
    seconds: Counter = field(default_factory=Counter)       # command -> total seconds
    failures: list[Failure] = field(default_factory=list)

    def merge(self, other: "Report") -> None:
        self.counts.update(other.counts)
        self.codes.update(other.codes)
        self.seconds.update(other.seconds)
        self.failures.extend(other.failures)

    def to_json(self) -> dict:
        return {"counts": dict(self.counts), "codes": dict(sorted(self.codes.items())),
                "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
                "failures": [asdict(f) for f in self.failures]}

    @classmethod
    def from_json(cls, data: dict) -> "Report":
        return cls(Counter(data["counts"]), Counter(data["codes"]), Counter(data["seconds"]),
                   [Failure(**f) for f in data["failures"]])


def shard(indices: Sequence[int], runs: int, verifies: int, seed: int, minimize: bool,
          emit: Callable[[dict], None]) -> None:
    """Check mutants ``indices``; run the first ``runs`` that check, verify the first
    ``verifies`` (alternately against a pass and against the unmutated module). ``emit``
    receives a ``start`` event before each command and a ``done`` event after it."""
    from neuron_sim.passes.registry import pass_keys

    bases = corpus()
    keys = pass_keys()
    done = Counter()
    with tempfile.TemporaryDirectory(prefix="hostile-fuzz-") as scratch:
        work = Path(scratch)

        def command(m: Mutant, argv: list[str], name: str, limit: float) -> int | None:
            emit({"event": "start", "index": m.index, "command": name, "argv": argv,
                  "limit": limit, "base": m.base, "mutations": list(m.mutations),
                  "text": m.text})
            outcome = invoke(argv, name, limit, work)
            done[name] += 1
            emit({"event": "done", "index": m.index, "base": m.base,
                  "mutations": list(m.mutations), "argv": argv, "text": m.text,
                  **asdict(outcome)})
            return outcome.code

        for index in indices:
            m = mutant(index, seed, bases)
            path = work / f"m{index}.hlo"
            path.write_text(m.text, encoding="utf-8")
            checked = command(m, check_argv(path.name), "check", CHECK_LIMIT)
            if checked == 0 and done["run"] < runs:
                command(m, run_argv(path.name, f"out{index}.npz"), "run",
                        RUN_TIMEOUT + RUN_GRACE)
            if checked == 0 and done["verify"] < verifies:
                base = None
                if index % 2:
                    base = work / f"base{index}.hlo"
                    base.write_text(m.base_text, encoding="utf-8")
                command(m, verify_argv(path.name, base.name if base else None,
                                       random.Random(index).choice(keys), minimize),
                        "verify", VERIFY_LIMIT)
            for leftover in work.iterdir():
                _remove_tree(leftover) if leftover.is_dir() else leftover.unlink()


def _remove_tree(path: Path) -> None:
    for child in path.iterdir():
        _remove_tree(child) if child.is_dir() else child.unlink()
    path.rmdir()


def _record(report: Report, event: dict) -> None:
    name = event["command"]
    report.counts[name] += 1
    report.codes[f"{name}:{event['code']}"] += 1
    report.seconds[name] += event["seconds"]
    if event["failure"]:
        report.failures.append(Failure(event["failure"], name, event["argv"], event["base"],
                                       event["mutations"], event["index"], event["stderr"],
                                       event["text"]))


class _Worker:
    """A worker process and a thread reading its events (one JSON object a line)."""

    def __init__(self, spec: dict) -> None:
        import queue
        import threading

        self.events: "queue.Queue[dict | None]" = queue.Queue()
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
            stdout=subprocess.PIPE, text=True, cwd=ROOT)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)


def campaign(count: int, runs: int, verifies: int, *, seed: int = 0, jobs: int = 2,
             minimize: bool = True) -> Report:
    """``count`` mutants through check, ``runs`` of those that check through run, ``verifies``
    through verify, in ``jobs`` worker processes (worker k takes every jobs-th mutant).

    A worker silent past a command's hard limit (twice its limit plus 10 s: a command stuck
    where no alarm reaches it) is killed, the command recorded as past its time limit, and a
    new worker goes on with the next mutant."""
    import queue

    report = Report()
    pending = []
    for k in range(jobs):
        pending.append({"indices": list(range(k, count, jobs)), "runs": _share(runs, jobs, k),
                        "verifies": _share(verifies, jobs, k), "seed": seed,
                        "minimize": minimize})
    import threading

    parts = [Report() for _ in pending]
    threads = [threading.Thread(target=_drive, args=(spec, part, queue))
               for spec, part in zip(pending, parts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for part in parts:
        report.merge(part)
    report.failures.sort(key=lambda f: (f.index, f.command))
    return report


def _drive(spec: dict, report: Report, queue) -> None:
    """Run one shard to its end, replacing its worker when a command hangs it."""
    while spec["indices"]:
        worker = _Worker(spec)
        started: dict | None = None
        while True:
            wait = None if started is None else max(
                0.0, started["at"] + 2 * started["limit"] + 10 - time.monotonic())
            try:
                event = worker.events.get(timeout=wait)
            except queue.Empty:
                worker.process.kill()
                worker.process.wait()
                _record(report, {**started, "code": None, "seconds": 2 * started["limit"] + 10,
                                 "failure": "time limit", "stderr": "[killed: no answer]"})
                spec["indices"] = [i for i in spec["indices"] if i > started["index"]]
                quota = QUOTAS.get(started["command"])
                if quota:
                    spec[quota] = max(0, spec[quota] - 1)
                break
            if event is None:
                worker.process.wait()
                if started is not None:
                    # The command ended the process, as the real command line ends itself past
                    # its limit (interrupts.hard_deadline): judge it as that process's exit.
                    seconds = time.monotonic() - started["at"]
                    code = worker.process.returncode
                    _record(report, {**started, "code": code, "seconds": seconds,
                                     "failure": judge(started["command"], code, seconds,
                                                      started["limit"], ""),
                                     "stderr": "[the command ended the process]"})
                    spec["indices"] = [i for i in spec["indices"] if i > started["index"]]
                    quota = QUOTAS.get(started["command"])
                    if quota:
                        spec[quota] = max(0, spec[quota] - 1)
                    break
                if worker.process.returncode != 0:
                    raise RuntimeError(f"a fuzz worker ended with exit code "
                                       f"{worker.process.returncode}")
                return
            if event["event"] == "start":
                started = {**event, "at": time.monotonic()}
            else:
                started = None
                _record(report, event)
                spec["indices"] = [i for i in spec["indices"] if i >= event["index"]]
                quota = QUOTAS.get(event["command"])
                if quota:
                    spec[quota] = max(0, spec[quota] - 1)


QUOTAS = {"run": "runs", "verify": "verifies"}


def _share(total: int, parts: int, k: int) -> int:
    return total // parts + (k < total % parts)


def _worker(spec: dict) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = MEMORY_CAP if hard == resource.RLIM_INFINITY else min(MEMORY_CAP, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    def emit(event: dict) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    from neuron_sim.interrupts import own_process

    own_process()  # commands may end this worker past their limit, as they end the real CLI
    shard(spec["indices"], spec["runs"], spec["verifies"], spec["seed"], spec["minimize"], emit)


# --------------------------------------------------------------------------------------------
# Mutated protobuf modules (--proto N): XLA-serialized HloModuleProto files broken as bytes.
#
#   truncate        the file ends early           flip-bits       1-8 bits flipped
#   wrong-wire-type a field tag's wire type bits   huge-length     a length prefix made ~2^35
#   delete-bytes    a run of bytes removed         duplicate-bytes a run of bytes repeated
#   splice          the tail of another module     field-damage    decoded, one field set to a
#   gzip            compressed, maybe truncated                    bad value, re-encoded
#
# Each mutant goes through ``check``; of those that check, a share through ``run``.

PROTO_CORPUS = CORPUS / "proto"


def proto_corpus(root: Path = PROTO_CORPUS) -> list[tuple[str, bytes]]:
    """Every XLA-serialized module under ``root`` as (relative path, bytes), sorted."""
    return [(str(p.relative_to(root)), p.read_bytes()) for p in sorted(root.rglob("*.pb"))]


def _tags(data: bytes) -> list[int]:
    """Offsets of the top-level field tags of ``data`` (a best-effort walk)."""
    offsets, pos = [], 0
    while pos < len(data) and len(offsets) < 64:
        offsets.append(pos)
        tag, pos = _varint(data, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            break
    return offsets


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80 or shift > 63:
            break
    return value, pos


def _field_damage(data: bytes, rng: random.Random) -> bytes | None:
    from neuron_sim.hlo.proto.schema import new

    module = new("HloModuleProto")
    try:
        module.ParseFromString(data)
    except Exception:  # noqa: BLE001 - not decodable any more: no field to damage
        return None
    instructions = [i for c in module.computations for i in c.instructions]
    if not instructions:
        return None
    inst = rng.choice(instructions)
    bad = rng.choice((-1, 0, 1 << 31, (1 << 62), rng.randrange(1 << 16)))
    choice = rng.randrange(10)
    if choice == 0:
        inst.opcode = rng.choice(("", "no-such-op", "add", "tuple", "all-reduce", "while"))
    elif choice == 1:
        inst.operand_ids.append(bad)
    elif choice == 2:
        inst.shape.dimensions.append(abs(bad))
    elif choice == 3:
        inst.shape.element_type = rng.choice((0, 13, 99, 17, 30))
    elif choice == 4:
        inst.called_computation_ids.append(rng.choice([c.id for c in module.computations]))
    elif choice == 5:
        rng.choice(module.computations).root_id = bad
    elif choice == 6:
        inst.shape.layout.minor_to_major.append(bad)
    elif choice == 7:
        inst.literal.f32s.extend([1.0] * rng.randrange(1, 5))
    elif choice == 8:
        module.entry_computation_id = bad
        module.entry_computation_name = "nothing"
    else:
        inst.id = rng.choice(instructions).id
    return module.SerializeToString()


def _proto_mutation(kind: str, data: bytes, rng: random.Random,
                    bases: Sequence[tuple[str, bytes]]) -> bytes | None:
    import gzip

    if not data:
        return None
    at = rng.randrange(len(data))
    if kind == "truncate":
        return data[:at]
    if kind == "flip-bits":
        out = bytearray(data)
        for _ in range(rng.randrange(1, 9)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "wrong-wire-type":
        tags = _tags(data)
        pos = rng.choice(tags)
        out = bytearray(data)
        out[pos] = (out[pos] & ~7) | rng.choice((0, 1, 2, 3, 4, 5, 6, 7))
        return bytes(out)
    if kind == "huge-length":
        tags = [t for t in _tags(data) if data[t] & 7 == 2]
        if not tags:
            return None
        pos = rng.choice(tags)
        _, after_tag = _varint(data, pos)
        _, after_len = _varint(data, after_tag)
        return data[:after_tag] + b"\xff\xff\xff\xff\x8f\x01" + data[after_len:]
    if kind == "delete-bytes":
        return data[:at] + data[at + rng.randrange(1, 64):]
    if kind == "duplicate-bytes":
        chunk = data[at:at + rng.randrange(1, 64)]
        return data[:at] + chunk + chunk + data[at + len(chunk):]
    if kind == "splice":
        other = rng.choice(bases)[1]
        return data[:at] + other[rng.randrange(len(other)):]
    if kind == "field-damage":
        return _field_damage(data, rng)
    if kind == "gzip":
        packed = gzip.compress(data)
        return packed if rng.random() < 0.3 else packed[:rng.randrange(len(packed))]
    raise ValueError(kind)


PROTO_MUTATIONS = ("truncate", "flip-bits", "wrong-wire-type", "huge-length", "delete-bytes",
                   "duplicate-bytes", "splice", "field-damage", "gzip")


@dataclass(frozen=True)
class ProtoMutant:
    index: int
    base: str
    mutations: tuple[str, ...]
    data: bytes


def proto_mutant(index: int, seed: int, bases: Sequence[tuple[str, bytes]]) -> ProtoMutant:
    """Protobuf mutant ``index`` of campaign ``seed``: one or two byte-level mutations."""
    rng = random.Random(f"proto:{seed}:{index}")
    name, data = bases[rng.randrange(len(bases))]
    applied: list[str] = []
    for _ in range(20):
        if len(applied) == rng.choice((1, 1, 2)):
            break
        kind = rng.choice(PROTO_MUTATIONS)
        changed = _proto_mutation(kind, data, rng, bases)
        if changed is not None and changed != data:
            data, applied = changed, applied + [kind]
    return ProtoMutant(index, name, tuple(applied), data)


def proto_campaign(count: int, runs: int, *, seed: int = 0) -> Report:
    """``count`` protobuf mutants through ``check`` and the first ``runs`` that check through
    ``run``, in this process; the same judgement as the text campaign."""
    import base64

    bases = proto_corpus()
    report = Report()
    with tempfile.TemporaryDirectory(prefix="hostile-proto-") as scratch:
        work = Path(scratch)
        for index in range(count):
            m = proto_mutant(index, seed, bases)
            path = work / f"m{index}.pb"
            path.write_bytes(m.data)
            plan = [("check", check_argv(path.name), CHECK_LIMIT)]
            for step, (name, argv, limit) in enumerate(plan):
                outcome = invoke(argv, name, limit, work)
                report.counts[name] += 1
                report.codes[f"{name}:{outcome.code}"] += 1
                report.seconds[name] += outcome.seconds
                if outcome.failure:
                    report.failures.append(Failure(
                        outcome.failure, name, list(argv), m.base, list(m.mutations), index,
                        outcome.stderr, base64.b64encode(m.data).decode("ascii")))
                if name == "check" and outcome.code == 0 and report.counts["run"] < runs:
                    plan.append(("run", run_argv(path.name, f"out{index}.npz"),
                                 RUN_TIMEOUT + RUN_GRACE))
            for leftover in work.iterdir():
                _remove_tree(leftover) if leftover.is_dir() else leftover.unlink()
    return report


def summary(report: Report) -> Iterator[str]:
    """The counts, the exit codes, and each failure class with its first example."""
    for command in ("check", "run", "verify"):
        codes = {k.split(":")[1]: v for k, v in report.codes.items()
                 if k.startswith(command + ":")}
        yield (f"{command:7} {report.counts[command]:6d} mutants  "
               f"{report.seconds[command]:7.1f} s  exit codes "
               + ", ".join(f"{c}: {n}" for c, n in sorted(codes.items())))
    by_class: dict[tuple[str, str], list[Failure]] = {}
    for f in report.failures:
        by_class.setdefault((f.failure, f.command), []).append(f)
    yield f"failures: {len(report.failures)}"
    for (kind, command), found in sorted(by_class.items()):
        first = found[0]
        last_line = first.stderr.strip().splitlines()[-1] if first.stderr.strip() else ""
        yield (f"  {kind} in {command}: {len(found)} (e.g. mutant {first.index} of "
               f"{first.base} by {'+'.join(first.mutations)}: {last_line[:300]})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=7000, help="mutants through check")
    parser.add_argument("--runs", type=int, help="of those that check, how many to run "
                                                 "(default count/6)")
    parser.add_argument("--verifies", type=int, help="how many to verify (default count/10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--no-minimize", action="store_true",
                        help="verify without shrinking counterexamples (faster)")
    parser.add_argument("--keep", metavar="DIR", help="write each failing mutant here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--proto", type=int, metavar="N",
                        help="instead: N mutated HloModuleProto files (tests/data/proto) "
                             "through check, and --runs of those that check through run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(json.loads(args.worker))
        return 0
    started = time.monotonic()
    if args.proto is not None:
        report = proto_campaign(args.proto, args.proto // 10 if args.runs is None
                                else args.runs, seed=args.seed)
        print(json.dumps(report.to_json(), indent=1) if args.json
              else "\n".join(summary(report)))
        return 1 if report.failures else 0
    report = campaign(args.count, args.count // 6 if args.runs is None else args.runs,
                      args.count // 10 if args.verifies is None else args.verifies,
                      seed=args.seed, jobs=args.jobs, minimize=not args.no_minimize)
    if args.keep:
        keep = Path(args.keep)
        keep.mkdir(parents=True, exist_ok=True)
        for f in report.failures:
            (keep / f"mutant{f.index}.hlo").write_text(f.text, encoding="utf-8")
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print("\n".join(summary(report)))
        print(f"({time.monotonic() - started:.0f} s, seed {args.seed}, {args.jobs} jobs)")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
