"""Run every committed corpus module on XLA:CPU (``run --backend xla``) and on the interpreter
(the local backend), and print how each agrees with the recorded outputs and with the other.

    python scripts/xla_oracle_corpus.py [--corpus tests/data/jax ...] [--json OUT] [--fast]

Corpora: tests/data/jax, tests/data/jax_0_12 and tests/data/torch_xla (each with its
MANIFEST.json; modules marked not runnable are skipped). For each module: its recorded inputs
(``arg{i}``) go to both executors; each result is compared with the recorded ``out{j}`` and
with the other by the oracle's rule (neuron_sim.verify.fuzz.oracle_compare: exact, or within
the stated tolerance where the module has an op whose order or algorithm is XLA's choice).
A cell reads ``exact``, ``tol`` (within the tolerance), ``DIFF`` (with the first mismatch in
the details) or ``refused`` (the executor would not run it). XLA compiles with its default
options (``--fast``: the fuzz campaign's faster ones). The table in docs/run.md is this
script's output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neuron_sim.hlo import parse_module  # noqa: E402
from neuron_sim.io import read_npz  # noqa: E402
from neuron_sim.topology import Topology  # noqa: E402
from neuron_sim.verify.fuzz.oracle_compare import compare_outputs  # noqa: E402
from neuron_sim.xla_cpu import XlaCpu, XlaRefused  # noqa: E402
from neuron_sim.xla_cpu.client import per_device_arguments  # noqa: E402
import neuron_sim.interpreter as interpreter  # noqa: E402

CORPORA = ("tests/data/jax", "tests/data/jax_0_12", "tests/data/torch_xla")
SHORT = {"exact": "exact", "tolerance": "tol", "differ": "DIFF"}


def cases(corpus: Path):
    """(name, module path, npz path, topology) of every runnable module of a corpus."""
    for entry in json.loads((corpus / "MANIFEST.json").read_text()):
        if not entry.get("runnable", True):
            continue
        modules = entry.get("modules") or [f"{entry['name']}.hlo"]
        data = corpus / (entry.get("data") or f"{entry['name']}.npz")
        topology = Topology(entry.get("replica_count") or 1, entry.get("num_partitions") or 1)
        for module in modules:
            yield f"{corpus.name}/{module}", corpus / module, data, topology, \
                entry.get("kind", module.rsplit(".", 2)[-2] if module.count(".") > 1 else "")


def verdict(module, a: list, b: list) -> tuple[str, str]:
    # Recorded bf16 / f8 arrays are raw bytes (|V2, |V1): read them as the executor's type.
    b = [y.view(x.dtype) if y.dtype.kind == "V" and y.dtype != x.dtype and
         y.dtype.itemsize == x.dtype.itemsize else y for x, y in zip(a, b)]
    try:
        comparison = compare_outputs(module, a, b)
    except ValueError as error:
        return "DIFF", str(error)
    detail = "; ".join(m.summary() for m in comparison.mismatches[:1])
    return SHORT[comparison.verdict], detail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", help="a corpus directory (repeatable)")
    parser.add_argument("--json", help="write every row as JSON to this file")
    parser.add_argument("--fast", action="store_true", help="the fuzz campaign's compile options")
    parser.add_argument("--limit", type=int, default=None, help="modules per corpus")
    args = parser.parse_args(argv)
    corpora = [Path(c) for c in (args.corpus or [str(ROOT / c) for c in CORPORA])]
    xla = XlaCpu(8, run_seconds=300, fast_compile=args.fast)
    rows = []
    started = time.perf_counter()
    for corpus in corpora:
        if not (corpus / "MANIFEST.json").exists():
            print(f"{corpus}: no MANIFEST.json, skipped", file=sys.stderr)
            continue
        for count, (name, path, data, topology, kind) in enumerate(cases(corpus)):
            if args.limit is not None and count >= args.limit:
                break
            module = parse_module(path.read_text())
            arrays = read_npz(data)
            inputs = {k: v for k, v in arrays.items() if k.startswith("arg")}
            recorded = [arrays[f"out{j}"] for j in range(sum(1 for k in arrays
                                                             if k.startswith("out")))]
            if topology.num_devices > xla.devices:
                xla.close()
                xla = XlaCpu(topology.num_devices, run_seconds=300, fast_compile=args.fast)
            row = {"name": name, "kind": kind, "topology": str(topology)}
            try:
                ours = interpreter.execute(module, inputs, topology, seed=0).outputs
            except Exception as error:  # noqa: BLE001 - reported in the table
                ours, row["ours_error"] = None, f"{type(error).__name__}: {error}"
            try:
                theirs = xla.run(module, per_device_arguments(module, inputs,
                                                              topology.num_devices), topology)
            except XlaRefused as error:
                theirs, row["xla_error"] = None, str(error)
            row["local_vs_recorded"], row["local_detail"] = verdict(module, ours, recorded) \
                if ours is not None else ("refused", row["ours_error"])
            row["xla_vs_recorded"], row["xla_detail"] = verdict(module, theirs, recorded) \
                if theirs is not None else ("refused", row["xla_error"])
            row["xla_vs_local"], row["pair_detail"] = verdict(module, ours, theirs) \
                if ours is not None and theirs is not None else ("-", "")
            rows.append(row)
            print(f"{name:<60} {row['topology']:<5} local {row['local_vs_recorded']:<7} "
                  f"xla {row['xla_vs_recorded']:<7} xla-vs-local {row['xla_vs_local']}",
                  flush=True)
    xla.close()
    print()
    print(summary(rows))
    print(f"{len(rows)} modules in {time.perf_counter() - started:.0f} s")
    for row in rows:
        for key in ("local_detail", "xla_detail", "pair_detail"):
            if row[key] and row[key.replace("detail", "vs_recorded") if key != "pair_detail"
                            else "xla_vs_local"] not in ("exact", "tol"):
                print(f"  {row['name']}: {key.split('_')[0]}: {row[key][:300]}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def summary(rows: list[dict]) -> str:
    """The agreement table: per corpus, how many modules compare exact / tol / DIFF /
    refused in each column."""
    lines = ["| corpus | modules | local = recorded | XLA = recorded | XLA = local |",
             "|---|---:|---|---|---|"]
    by_corpus: dict[str, list[dict]] = {}
    for row in rows:
        by_corpus.setdefault(row["name"].split("/")[0], []).append(row)
    for corpus, group in by_corpus.items():
        cells = []
        for key in ("local_vs_recorded", "xla_vs_recorded", "xla_vs_local"):
            counts = Counter(r[key] for r in group)
            cells.append(", ".join(f"{counts[k]} {k}" for k in ("exact", "tol", "DIFF",
                                                                  "refused", "-") if counts[k]))
        lines.append(f"| {corpus} | {len(group)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
