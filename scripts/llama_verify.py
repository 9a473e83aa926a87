"""Verify the Llama-3-8B-shaped decoder layers of ``tests/data/llama/`` at full size through the
closer and the proven reduce-scatter fold, and report per run: verdict, proof, method, wall
time and peak memory (of the ``neuron-sim verify`` process, from ``getrusage``).

    python scripts/llama_verify.py [--modules llama3_8b_tp32 llama3_8b_tp64]

Each run is one ``neuron-sim verify MODULE --json`` subprocess with ``--pipeline
neuron-closer`` or ``--passes rewrite_all_reduce_dynamic_slice_proven`` and default options.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "llama"
RUNS = {"closer": ["--pipeline", "neuron-closer"],
        "proven fold": ["--passes", "rewrite_all_reduce_dynamic_slice_proven"]}


def verify(module: Path, options: list[str]) -> dict:
    """One verify run in a child process: its JSON result, wall time and peak memory."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "result.json"
        command = [sys.executable, "-m", "neuron_sim.cli", "verify", str(module), *options,
                   "--json"]
        errors = Path(scratch) / "stderr.txt"
        start = time.perf_counter()
        with open(errors, "w") as stderr:
            with open(out, "w") as stdout:
                child = subprocess.Popen(command, stdout=stdout, stderr=stderr)
                _, status, usage = os.wait4(child.pid, 0)  # this child's own peak
        seconds = time.perf_counter() - start
        result = json.loads(out.read_text()) if out.exists() else {}
        stderr_text = errors.read_text().strip()[-300:]
    return {"exit": os.waitstatus_to_exitcode(status), "seconds": seconds,
            "peak_bytes": usage.ru_maxrss * 1024, "result": result, "stderr": stderr_text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", nargs="*", default=["llama3_8b_tp32", "llama3_8b_tp64"])
    args = parser.parse_args()
    print("| module | run | verdict | proof | method | proof s | wall s | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.modules:
        for label, options in RUNS.items():
            run = verify(CORPUS / f"{name}.hlo", options)
            result = run["result"]
            results = result.get("results", [result]) if result else [{}]
            first = results[0] if results else {}
            topology = (first.get("topology_results") or [{}])[0]
            print(f"| {name} | {label} | {first.get('status', 'exit ' + str(run['exit']))} | "
                  f"{first.get('proof')} | {topology.get('proof_method')} | "
                  f"{topology.get('proof_seconds', 0):.1f} | {run['seconds']:.1f} | "
                  f"{run['peak_bytes'] / 2**20:.0f} |", flush=True)
            if run["exit"] not in (0, 1):
                print(f"  stderr: {run['stderr']}", flush=True)


if __name__ == "__main__":
    main()
