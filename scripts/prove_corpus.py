"""Proof for all inputs over the project's corpora: the golden pairs, the seed-pass examples
and every JAX module against itself; prints one line per case and the counts.

    python scripts/prove_corpus.py [golden] [examples] [jax] [--limit N]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neuron_sim import parse_module  # noqa: E402
from neuron_sim.verify import VerifyOptions, check_modules, check_pass  # noqa: E402
from neuron_sim.verify.inputs import DEFAULT_TRIALS  # noqa: E402
from neuron_sim.proofs.all_inputs import prove  # noqa: E402
from neuron_sim.verify.report import read_pair_file  # noqa: E402
from neuron_sim.topology import Topology  # noqa: E402

# The seed passes each example is written for.
EXAMPLE_PASSES = {"ar_ds_multi": ("aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups",
                                  "rewrite_all_reduce_dynamic_slice_proven"),
                  "ar_ds": ("aws_neuron_rewrite_all_reduce_dynamic_slice",
                            "rewrite_all_reduce_dynamic_slice_proven"),
                  "delete_permute": ("aws_neuron_delete_permute", "delete_permute_guarded")}


def golden(limit: int | None) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for path in sorted((ROOT / "tests/data/verify").glob("*.hlo"))[:limit]:
        before, after, header = read_pair_file(path)
        result = check_modules(before, after, header.get("topologies", "").split() or None,
                               VerifyOptions(contract=header.get("contract", "exact"),
                                             trials=int(header.get("trials", DEFAULT_TRIALS)),
                                             minimize=False))
        kind = f"{result.status.value}/{result.proof}"
        counts[f"expected {header['status']} -> {kind}"] += 1
        print(f"golden {path.stem:45s} expected {header['status']:16s} {kind}")
    return counts


def examples(limit: int | None) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for path in sorted((ROOT / "examples").glob("*.hlo"))[:limit]:
        group = next(p for prefix, p in EXAMPLE_PASSES.items() if path.stem.startswith(prefix))
        for passes in group:
            result = check_pass(parse_module(path.read_text()), passes,
                                options=VerifyOptions(minimize=False))
            kind = f"{result.status.value}/{result.proof}"
            counts[kind] += 1
            notes = [n for n in result.notes if "no proof" in n]
            print(f"example {path.stem:34s} {passes:58s} {kind} {notes[:1]}")
    return counts


def jax(limit: int | None) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for path in sorted((ROOT / "tests/data/jax").glob("*.hlo"))[:limit]:
        try:
            module = parse_module(path.read_text())
        except Exception as exc:  # noqa: BLE001 - an unparsable dump is counted, not fatal
            counts["not parsed"] += 1
            print(f"jax {path.stem:50s} not parsed: {exc}")
            continue
        topology = Topology(module.replica_count, module.num_partitions)
        start = time.perf_counter()
        proof = prove(module, module.clone(), topology, timeout=60)
        reason = proof.reason.split(": ", 1)[-1] if proof.outcome == "unsupported" else ""
        counts[proof.outcome] += 1
        if reason:
            counts[f"  stopped: {reason[:70]}"] += 1
        print(f"jax {path.stem:50s} {proof.outcome:11s} terms={proof.terms:<8d} "
              f"{time.perf_counter() - start:6.2f}s {proof.reason[:150]}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("parts", nargs="*", default=["golden", "examples", "jax"])
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    for part in args.parts:
        counts = {"golden": golden, "examples": examples, "jax": jax}[part](args.limit)
        print(f"== {part}")
        for key, value in sorted(counts.items()):
            print(f"   {value:4d}  {key}")


if __name__ == "__main__":
    main()
