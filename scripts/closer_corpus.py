"""Verify the neuron-closer pipeline over every runnable module of tests/data/jax/.

    python scripts/closer_corpus.py [--only PREFIX ...] [--trials N] [--json OUT.json]

For each runnable module (MANIFEST.json ``runnable``) on its header's topology: the closer
without InjectNumericalErrors, verified under its composed contract (CORRECT, UNSOUND with the
first breaking pass and the counterexample, or no verdict), with the closer's wall time; then
the closer with InjectNumericalErrors (``targets=root``), which must be UNSOUND on every module it
changes. A pass of the closer that is not registered is reported and left out. Prints one line
per module and the counts; exit code 1 if a positive control went undetected.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from neuron_sim.hlo import parse_module_file  # noqa: E402
from passes import PassContext, PassPipeline  # noqa: E402
from passes.pipelines import PIPELINES  # noqa: E402
from passes.registry import pass_keys  # noqa: E402
from verify.api import check_pass  # noqa: E402
from verify.result import Status  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "jax"
INJECT = "aws_neuron_inject_numerical_errors"


def closer_keys(with_inject: bool) -> tuple[list[str], list[str]]:
    """The closer's registered keys in order, and the unregistered ones."""
    registered = set(pass_keys())
    keys = [key for _, key in PIPELINES["neuron-closer"] if with_inject or key != INJECT]
    return [k for k in keys if k in registered], [k for k in keys if k not in registered]


def runnable_modules(only: list[str]) -> list[str]:
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    return [case["name"] for case in manifest if case.get("runnable")
            and (not only or any(case["name"].startswith(p) for p in only))]


def verify_module(name: str, trials: int) -> dict:
    """One module's record: the closer's verdict and time, and the positive control's."""
    module = parse_module_file(str(CORPUS / f"{name}.hlo"))
    keys, _ = closer_keys(with_inject=False)
    started = time.perf_counter()
    try:
        PassPipeline(keys).run(module.clone(), PassContext())
    except Exception:  # noqa: BLE001 - check_pass reports the failing pass as an ERROR verdict
        pass
    seconds = time.perf_counter() - started
    result = check_pass(module, keys, None, trials=trials, minimize=False,
                        name_breaking_pass=True)
    record = {"module": name, "status": str(result.status), "closer_seconds": seconds,
              "changed": bool(result.changed), "breaking_pass": result.breaking_pass,
              "error_line": result.error_line, "detail": result.detail[:300]}
    inject_keys, _ = closer_keys(with_inject=True)
    control = check_pass(module, inject_keys, None, trials=trials, minimize=False,
                         pass_options={f"{INJECT}.targets": "root"})
    record["control_status"] = str(control.status)
    record["control_changed"] = bool(control.changed)
    record["control_detected"] = (not control.changed) or control.status is Status.UNSOUND
    return record


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
        record = verify_module(name, args.trials)
        records.append(record)
        extra = f" broken by {record['breaking_pass']}" if record["breaking_pass"] else ""
        print(f"{name}: {record['status']}{extra} (closer {record['closer_seconds'] * 1e3:.0f} ms"
              f"{', changed' if record['changed'] else ', no change'}); control "
              f"{record['control_status']}{'' if record['control_detected'] else ' UNDETECTED'}")
    counts: dict[str, int] = {}
    for record in records:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    undetected = [r["module"] for r in records if not r["control_detected"]]
    times = sorted(r["closer_seconds"] for r in records)
    print(f"{len(records)} modules: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
          + f"; positive control undetected on {len(undetected)}"
          + (f"; closer time median {times[len(times) // 2] * 1e3:.0f} ms, max "
             f"{times[-1] * 1e3:.0f} ms" if times else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({"records": records, "counts": counts,
                                               "missing": missing}, indent=1))
    return 1 if undetected else 0


if __name__ == "__main__":
    sys.exit(main())
