"""Verify the neuron-closer pipeline over every runnable module of tests/data/jax/.

    python scripts/closer_corpus.py [--only PREFIX ...] [--trials N] [--json OUT.json]

For each runnable module (MANIFEST.json ``runnable``) on its header's topology: the closer
without InjectNumericalErrors, verified under its composed contract — CORRECT, UNSOUND (with the
first breaking pass and the counterexample) or ERROR (with the pass that raised, or the reason)
— and the closer's wall time on that topology; then the closer with InjectNumericalErrors
(``targets=root``), which must be UNSOUND on every module it changes (verify names the first
pass that breaks it: InjectNumericalErrors). Where the drawn inputs leave nothing to compare (a
loop that does not end on them: FAILED_TO_PROVE), the module is verified again on the inputs JAX
ran it on (its ``.npz``). A module whose verification raises is an ERROR record, not a crash. Prints one line per module and the counts; exit code 1 if the
closer is UNSOUND somewhere or a positive control went undetected.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neuron_sim.hlo import HloModule, parse_module_file  # noqa: E402
from neuron_sim.io import read_npz  # noqa: E402
from neuron_sim.topology import Topology  # noqa: E402
from neuron_sim.passes import PassContext, PassPipeline  # noqa: E402
from neuron_sim.passes.named_pipelines import PIPELINES  # noqa: E402
from neuron_sim.passes.registry import pass_keys  # noqa: E402
from neuron_sim.verify.api import VerifyOptions, check_pass  # noqa: E402
from neuron_sim.verify.result import Status, VerificationResult  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "jax"
INJECT = "aws_neuron_inject_numerical_errors"
CONTROL_OPTIONS = {f"{INJECT}.targets": "root"}


def closer_keys(with_inject: bool) -> tuple[list[str], list[str]]:
    """The closer's registered keys in order, and the unregistered ones."""
    registered = set(pass_keys())
    keys = [key for _, key in PIPELINES["neuron-closer"] if with_inject or key != INJECT]
    return [k for k in keys if k in registered], [k for k in keys if k not in registered]


def runnable_modules(only: list[str]) -> list[str]:
    """Names of the corpus's runnable modules, those starting with a prefix of ``only`` if any."""
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    return [case["name"] for case in manifest if case.get("runnable")
            and (not only or any(case["name"].startswith(p) for p in only))]


def jax_inputs(name: str) -> list[Any]:
    """The inputs JAX ran module ``name`` on (``argI`` of its .npz), in parameter order."""
    arrays = read_npz(CORPUS / f"{name}.npz")
    return [arrays[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in arrays))]


def timed_closer(module: HloModule, keys: list[str]) -> tuple[float, str | None]:
    """The closer's wall time on a copy of ``module`` on its header's topology, and the key of
    the pass that raised (None if none did)."""
    pipeline = PassPipeline(keys, name="neuron-closer")
    topology = Topology(module.replica_count, module.num_partitions)
    started = time.perf_counter()
    try:
        pipeline.run(module.clone(), PassContext(topology=topology))
    except Exception:  # noqa: BLE001 - check_pass reports the failure as the ERROR verdict
        return time.perf_counter() - started, keys[len(pipeline.results)]
    return time.perf_counter() - started, None


def verified(name: str, module: HloModule, keys: list[str],
             options: VerifyOptions) -> tuple[VerificationResult, bool]:
    """``check_pass`` under ``options`` (unminimized) on drawn inputs, again on JAX's inputs
    if the drawn ones compared nothing; the result and whether JAX's inputs decided it."""
    options = options.replace(minimize=False)
    result = check_pass(module, keys, options=options)
    if result.status is Status.FAILED_TO_PROVE:
        return check_pass(module, keys, options=options.replace(inputs=jax_inputs(name))), True
    return result, False


def verify_module(name: str, trials: int) -> dict[str, Any]:
    """One module's record: the closer's verdict and time, and the positive control's."""
    module = parse_module_file(str(CORPUS / f"{name}.hlo"))
    keys, _ = closer_keys(with_inject=False)
    seconds, failing_pass = timed_closer(module, keys)
    options = VerifyOptions(trials=trials, name_breaking_pass=True)
    result, on_jax_inputs = verified(name, module, keys, options)
    record = {"module": name, "status": str(result.status), "closer_seconds": seconds,
              "changed": bool(result.changed), "breaking_pass": result.breaking_pass,
              "failing_pass": failing_pass, "on_jax_inputs": on_jax_inputs,
              "error_line": result.error_line, "detail": result.detail[:400]}
    if result.counterexample is not None:
        record["counterexample"] = str(result.counterexample)[:400]
    inject_keys, _ = closer_keys(with_inject=True)
    control, _ = verified(name, module, inject_keys,
                          options.replace(pass_options=CONTROL_OPTIONS))
    record["control_status"] = str(control.status)
    record["control_breaking_pass"] = control.breaking_pass
    record["control_changed"] = bool(control.changed)
    record["control_detected"] = (not control.changed) or control.status is Status.UNSOUND
    return record


def crashed_record(name: str, exc: Exception) -> dict[str, Any]:
    """The record of a module whose verification raised: an ERROR with the reason."""
    reason = f"{type(exc).__name__}: {exc}"[:400]
    return {"module": name, "status": "ERROR", "closer_seconds": None, "changed": False,
            "breaking_pass": None, "failing_pass": None, "on_jax_inputs": False,
            "error_line": "ERROR: the verification raised", "detail": reason,
            "control_status": "ERROR", "control_breaking_pass": None, "control_changed": False,
            "control_detected": False}


def record_line(record: dict[str, Any]) -> str:
    """One line per module: verdict, who broke or failed it, time, the control's verdict."""
    why = (f" broken by {record['breaking_pass']}" if record["breaking_pass"] else
           f" ({record['failing_pass']} raised)" if record["failing_pass"] else
           f" ({record['detail']})" if record["status"] == "ERROR" else "")
    jax = ", on JAX's inputs" if record["on_jax_inputs"] else ""
    took = (f"closer {record['closer_seconds'] * 1e3:.0f} ms, "
            if record["closer_seconds"] is not None else "")
    return (f"{record['module']}: {record['status']}{why} ({took}"
            f"{'changed' if record['changed'] else 'no change'}{jax}); control "
            f"{record['control_status']}"
            + (f" broken by {record['control_breaking_pass']}"
               if record["control_breaking_pass"] else "")
            + ("" if record["control_detected"] else " UNDETECTED"))


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per verdict, the positive control's counts and the closer's wall times."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    changed = [r for r in records if r["control_changed"]]
    times = [r["closer_seconds"] for r in records if r["closer_seconds"] is not None]
    return {"modules": len(records), "counts": counts,
            "control_changed": len(changed),
            "control_unsound": sum(r["control_status"] == "UNSOUND" for r in changed),
            "control_broken_by_inject": sum(r["control_breaking_pass"] == INJECT for r in changed),
            "control_undetected": [r["module"] for r in records if not r["control_detected"]],
            "median_ms": statistics.median(times) * 1e3 if times else None,
            "max_ms": max(times) * 1e3 if times else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], metavar="PREFIX")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args(argv)
    _, missing = closer_keys(with_inject=True)
    if missing:
        print(f"not registered, left out: {', '.join(missing)}")
    records = []
    for name in runnable_modules(args.only):
        try:
            record = verify_module(name, args.trials)
        except Exception as exc:  # noqa: BLE001 - one module's crash is its ERROR verdict
            record = crashed_record(name, exc)
        records.append(record)
        print(record_line(record), flush=True)
    totals = summary(records)
    timing = (f"; closer time median {totals['median_ms']:.0f} ms, max {totals['max_ms']:.0f} ms"
              if totals["median_ms"] is not None else "")
    print(f"{totals['modules']} modules: "
          + ", ".join(f"{n} {s}" for s, n in sorted(totals["counts"].items()))
          + f"; positive control changed {totals['control_changed']}, UNSOUND on "
          f"{totals['control_unsound']} (broken by {INJECT} on {totals['control_broken_by_inject']}), "
          f"undetected on {len(totals['control_undetected'])}"
          + timing)
    if args.json:
        Path(args.json).write_text(json.dumps({"records": records, "summary": totals,
                                               "missing": missing}, indent=1))
    unsound = totals["counts"].get("UNSOUND", 0)
    return 1 if totals["control_undetected"] or unsound else 0


if __name__ == "__main__":
    sys.exit(main())
