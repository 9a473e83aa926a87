"""How many of the closer's CORRECT verdicts on a corpus are proofs for all inputs, and what
stops the others.

    python scripts/proof_coverage.py [--corpus jax|jax_0_12|torch_xla] [--every N] [--trials N]
                                     [--only PREFIX ...] [--json OUT]

For every N-th module of the corpus (default every second one; tests/data/jax/ by default:
MANIFEST.json ``runnable``; jax_0_12 the same; torch_xla every module of every entry, the
partitioned and the final one) on its header's topology: ``verify --pipeline neuron-closer``
without the debug injector (as ``scripts/closer_corpus.py``), and for each CORRECT verdict its
proof ("all-inputs"; "bounded": all inputs up to N loop iterations; or "sampled" with the
construct that stopped the proof, taken from the verdict's note). Prints one line per module,
then the table: verdicts, the share of CORRECT verdicts proved for all inputs (and up to a loop
bound), and the stopping constructs by frequency.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neuron_sim.hlo import parse_module_file  # noqa: E402
from neuron_sim.verify.api import VerifyOptions, check_pass  # noqa: E402
from neuron_sim.verify.result import Status  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from closer_corpus import closer_keys  # noqa: E402

CORPORA = ("jax", "jax_0_12", "torch_xla")


def corpus_modules(corpus: str, only: list[str]) -> list[Path]:
    """The corpus's module files in manifest order, those starting with a prefix of ``only``
    if any: the runnable ones of a JAX corpus, every module of a PyTorch/XLA entry."""
    directory = ROOT / "tests" / "data" / corpus
    manifest = json.loads((directory / "MANIFEST.json").read_text())
    if corpus == "torch_xla":
        files = [name for case in manifest for name in case["modules"]]
    else:
        files = [f"{case['name']}.hlo" for case in manifest if case.get("runnable")]
    return [directory / name for name in files
            if not only or any(name.startswith(prefix) for prefix in only)]

# What stopped a proof, read from the reason's words (most specific first).
CONSTRUCTS = (
    ("memory", r"would need about"),
    ("sort", r"sort"),
    ("argmax/argmin reduce", r"variadic|argmax|argmin"),
    ("gather indices", r"gather"),
    ("scatter indices", r"scatter"),
    ("dynamic-update-slice start", r"dynamic-update-slice"),
    ("dynamic-slice start", r"dynamic-slice|start ind"),
    ("conditional on data", r"conditional|branch"),
    ("while on data", r"while"),
    ("device-divergent control", r"differ between devices|divergent"),
    ("convolution", r"convolution"),
    ("reduce-window", r"reduce-window"),
    ("custom-call", r"custom-call"),
)


def construct_of(reason: str) -> str:
    """The stopping construct named by a proof's reason."""
    opaque = re.search(r"under an? ([\w-]+), which the proof compares only as a whole", reason)
    if opaque:
        return f"{opaque.group(1)} changed by the rewrite (compared only as a whole)"
    undecided = re.search(r"z3 could not decide \((.*?)\)(;|$)", reason)
    if undecided:
        why = undecided.group(1)
        return "z3: " + ("timeout" if "timeout" in why else why[:60])
    if not reason:
        return "not attempted (a pass fixed source values: sampled only)"
    for name, pattern in CONSTRUCTS:
        if re.search(pattern, reason):
            return name
    return "other: " + reason[:80]


def record_of(path: Path, trials: int) -> dict[str, Any]:
    """One module's verdict through the closer and what its proof established."""
    name = path.name.removesuffix(".hlo")
    module = parse_module_file(str(path))
    keys, _ = closer_keys(with_inject=False)
    started = time.perf_counter()
    result = check_pass(module, keys, options=VerifyOptions(trials=trials, minimize=False))
    record: dict[str, Any] = {"module": name, "status": str(result.status),
                              "proof": result.proof, "seconds": time.perf_counter() - started}
    if result.proof == "bounded":
        record["iterations"] = result.proof_iterations
    if result.status is Status.CORRECT and result.proof == "sampled":
        reasons = [n.split(": ", 1)[1] for n in result.notes
                   if n.startswith("no proof for all inputs")]
        record["stopped_by"] = reasons[0] if reasons else "; ".join(result.notes)[:200]
        record["construct"] = construct_of(record["stopped_by"])
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=CORPORA, default="jax")
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], metavar="PREFIX")
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args(argv)
    records = []
    for path in corpus_modules(args.corpus, args.only)[::args.every]:
        try:
            record = record_of(path, args.trials)
        except Exception as exc:  # noqa: BLE001 - one module's crash is its own line
            record = {"module": path.name, "status": "RAISED", "proof": None,
                      "stopped_by": f"{type(exc).__name__}: {exc}"[:200]}
        records.append(record)
        extra = f" ({record['construct']}: {record['stopped_by'][:100]})" \
            if "construct" in record else ""
        print(f"{record['module']}: {record['status']} {record['proof'] or ''}{extra}",
              flush=True)
    statuses = Counter(r["status"] for r in records)
    correct = [r for r in records if r["status"] == "CORRECT"]
    proved = sum(r["proof"] == "all-inputs" for r in correct)
    bounded = sum(r["proof"] == "bounded" for r in correct)
    constructs = Counter(r["construct"] for r in correct if "construct" in r)
    print(f"\n{len(records)} modules: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
    if correct:
        print(f"CORRECT proved for all inputs: {proved} of {len(correct)} "
              f"({100 * proved / len(correct):.1f} %); for all inputs up to a loop bound: "
              f"{bounded} more")
    print("\n| stopped by | CORRECT verdicts |\n|---|---|")
    for construct, count in constructs.most_common():
        print(f"| {construct} | {count} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
