"""z3 proof times (not a timed test): to be merged into scripts/bench.py as one section.

1. Per all-reduce + dynamic-slice pair, at 8, 64 and 4096 devices, for the offsets that matter:
   the JAX idiom inside a fusion (and-mask, convert, multiply, select guard; PROVEN), a
   position table undoing shuffled groups (PROVEN), strided groups with ``pid / G`` (PROVEN)
   and with the seed's repeated pool (REFUTED, the witness minimized over the device ids).
2. The constant-pool table (6 theorems over symbolic G, g, s with G*g <= 4096, each with its
   smallest witness and its exact soundness condition).

    PYTHONPATH=. python scripts/bench_symbolic.py [--repeat N] [--json] [--no-pools]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from neuron_sim.hlo import parse_module  # noqa: E402
from neuron_sim.topology import Topology  # noqa: E402
from passes.neuron.offset_pools import pool_repeated  # noqa: E402
from verify.symbolic import find_ar_ds_pairs, prove_pair  # noqa: E402
from verify.symbolic.idioms import (ArDsIdiom, offset_divmod, offset_jax, offset_pool,  # noqa
                                    offset_table)

DEVICE_COUNTS = (8, 64, 4096)
WIDTH = 8
SHARD = 4


def idioms(devices: int) -> dict[str, ArDsIdiom]:
    """One idiom per offset family on ``devices`` partitions in groups of WIDTH."""
    count = devices // WIDTH
    contiguous = tuple(tuple(range(k * WIDTH, (k + 1) * WIDTH)) for k in range(count))
    strided = tuple(tuple(k + count * j for j in range(WIDTH)) for k in range(count))
    ids = list(range(devices))
    random.Random(devices).shuffle(ids)
    shuffled = tuple(tuple(ids[k:k + WIDTH]) for k in range(0, devices, WIDTH))
    position = {f: i for group in shuffled for i, f in enumerate(group)}
    full = WIDTH * SHARD
    return {
        "jax_fused_contiguous": ArDsIdiom(
            "jax", 1, devices, contiguous, "flattened", full, SHARD,
            offset_jax(SHARD, full, mask=WIDTH - 1, fused=True), fused=True),
        "table_shuffled": ArDsIdiom(
            "table", 1, devices, shuffled, "flattened", full, SHARD,
            offset_table([position[p] for p in range(devices)], SHARD)),
        "divide_strided": ArDsIdiom(
            "divide", 1, devices, strided, "flattened", full, SHARD,
            offset_divmod(SHARD, divisor=count, use_remainder=False)),
        "repeated_pool_strided": ArDsIdiom(
            "pool", 1, devices, strided, "flattened", full, SHARD,
            offset_pool(pool_repeated(count, WIDTH, SHARD), SHARD)),
    }


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median wall time of ``repeat`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def bench_pairs(repeat: int = 3) -> list[dict[str, Any]]:
    """Proof time per pair (parsing excluded), per idiom and device count."""
    rows = []
    for devices in DEVICE_COUNTS:
        topology = Topology(1, devices)
        for name, idiom in idioms(devices).items():
            (pair,) = find_ar_ds_pairs(parse_module(idiom.text()))
            seconds, proof = timed(lambda: prove_pair(pair, topology), repeat)
            rows.append({"idiom": name, "devices": devices, "status": str(proof.status),
                         "witness_device": proof.witness.device if proof.witness else None,
                         "seconds": round(seconds, 4)})
    return rows


def bench_pools(max_devices: int = 4096) -> dict[str, Any]:
    """The whole pools table, and each row's share."""
    from verify.symbolic.pool_theorems import pool_table

    started = time.perf_counter()
    rows = pool_table(max_devices=max_devices)
    total = time.perf_counter() - started
    return {"max_devices": max_devices, "seconds": round(total, 2),
            "rows": [{"pool": r.pool, "layout": str(r.layout), "verdict": r.status,
                      "seconds": round(r.seconds, 2)} for r in rows]}


def bench(repeat: int = 3, pools: bool = True) -> dict[str, Any]:
    """Everything, as one JSON-able dict (the section scripts/bench.py will print)."""
    result: dict[str, Any] = {"pairs": bench_pairs(repeat)}
    if pools:
        result["pools"] = bench_pools()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-pools", action="store_true")
    args = parser.parse_args(argv)
    result = bench(args.repeat, pools=not args.no_pools)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("z3 fold proofs, per all-reduce + dynamic-slice pair (median of "
          f"{args.repeat}; groups of {WIDTH}, shard {SHARD}):")
    print(f"  {'idiom':<24} {'devices':>7}  {'verdict':<8} {'witness':>7}  {'time':>9}")
    for row in result["pairs"]:
        witness = "-" if row["witness_device"] is None else str(row["witness_device"])
        print(f"  {row['idiom']:<24} {row['devices']:>7}  {row['status']:<8} {witness:>7}  "
              f"{row['seconds'] * 1000:>7.1f}ms")
    if "pools" in result:
        pools = result["pools"]
        print(f"constant-pool table (G*g <= {pools['max_devices']}): {pools['seconds']:.1f}s")
        for row in pools["rows"]:
            print(f"  {row['pool']:<10} {row['layout']:<10} {row['verdict']:<8} "
                  f"{row['seconds']:>6.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
