"""The ``sweep`` subcommand: where is folding all-reduce + dynamic-slice into reduce-scatter
sound, and which fold passes get it right?

    neuron-sim sweep [--passes KEYS] [--max-devices N] [--preset NAME] [--seed S]
                     [--jobs N] [--json OUT] [--plot OUT.png]

Exit codes: 0 every fold a pass made was sound, 1 a pass folded unsoundly somewhere (the
seed matchers do), 2 bad usage, 3 z3 and the differential verifier disagree on a verdict (a bug
of neuron-sim's, reported loudly).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Iterator

from neuron_sim.commands import (EXIT_OK, EXIT_PROBLEM, UsageError, add_command,
                                 add_seed_argument, terminal_progress)

EXIT_DISAGREEMENT = 3
MAX_GRID_DEVICES = 256


def add_sweep_command(subparsers: argparse._SubParsersAction) -> None:
    from neuron_sim.verify.sweep.generator import DEFAULT_MAX_DEVICES, PRESETS

    sweep = add_command(
        subparsers, "sweep", handler=run_sweep, module=None, topology=False,
        help="sweep all-reduce + dynamic-slice folds over topologies, groups and offset forms",
        description="Generate all-reduce + dynamic-slice modules over topologies (every R x P "
                    "up to --max-devices, and the Trainium presets), group layouts and modes, "
                    "device assignments, slice shapes and offset forms; decide for each, with "
                    "z3 and with the differential verifier, whether folding it into a "
                    "reduce-scatter is sound, and judge every fold pass on it: fired & sound, "
                    "fired & UNSOUND (with the witness), missed although sound, declined.",
        epilog="exit codes: 0 every fold made was sound, 1 a pass folded unsoundly, 2 bad "
               "usage, 3 z3 and the differential verifier disagree (a bug of ours). "
               "Presets: " + ", ".join(PRESETS))
    sweep.add_argument("--passes", metavar="KEYS",
                       help="comma-separated fold passes (default: the two seed matchers, "
                            "xla_reduce_scatter_creator and the proven fold)")
    sweep.add_argument("--max-devices", type=int, default=DEFAULT_MAX_DEVICES, metavar="N",
                       help=f"every R x P topology with R*P <= N (default "
                            f"{DEFAULT_MAX_DEVICES}; the presets are added whatever N is)")
    sweep.add_argument("--preset", action="append", metavar="NAME",
                       help="only this machine's cases (repeatable): " + ", ".join(PRESETS))
    add_seed_argument(sweep, default=0,
                      help="seed of the random device assignments and of the verifier's "
                           "inputs (default 0)")
    sweep.add_argument("--jobs", type=int, default=None, metavar="N",
                       help="run the cases in N worker processes (default: the cores this "
                            "process may use); the results do not depend on N")
    sweep.add_argument("--json", metavar="OUT",
                       help="write every case, the per-pass counts and the time to OUT")
    sweep.add_argument("--plot", metavar="OUT.png",
                       help="write a heatmap of topology x offset form per pass, as PNG, PDF "
                            "or SVG by OUT's suffix (needs matplotlib: pip install "
                            "'neuron-sim[plot]')")


def _check_plot_available() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed: "
                         "pip install 'neuron-sim[plot]'") from None


def run_sweep(args: argparse.Namespace) -> int:
    from neuron_sim.outputs import atomic_write_text, check_output_file, same_file
    from neuron_sim.passes.registry import parse_pass_list
    from neuron_sim.verify.sweep.generator import PRESETS, generate
    from neuron_sim.verify.sweep.report import (PLOT_FORMATS, plot_format, print_report, sweep_json,
                                     write_heatmap)
    from neuron_sim.verify.sweep.runner import default_passes, run_cases, usable_cores

    if not 2 <= args.max_devices <= MAX_GRID_DEVICES:
        raise UsageError(f"--max-devices must be between 2 and {MAX_GRID_DEVICES}, "
                         f"not {args.max_devices}")
    for name in args.preset or []:
        if name not in PRESETS:
            raise UsageError(f"unknown preset {name!r}; the presets are "
                             + ", ".join(PRESETS))
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, not {args.jobs}")
    jobs = args.jobs if args.jobs is not None else usable_cores()
    passes = [p.name for p in parse_pass_list(args.passes)] if args.passes is not None \
        else default_passes()
    if args.json and args.plot and same_file(args.json, args.plot):
        raise UsageError("--json and --plot name the same file")
    if args.plot:
        if plot_format(args.plot) is None:
            raise UsageError(f"--plot {args.plot}: the heatmap is written as "
                             + ", ".join(f".{f}" for f in PLOT_FORMATS)
                             + "; name a file with one of those suffixes")
        _check_plot_available()
        check_output_file(args.plot, option="--plot")
    if args.json:
        check_output_file(args.json, option="--json")

    started = time.perf_counter()
    cases, skips = generate(args.max_devices, presets=args.preset, seed=args.seed)
    with _progress(len(cases)) as progress:
        results = run_cases(cases, passes, seed=args.seed, progress=progress,
                            jobs=jobs)
    seconds = time.perf_counter() - started

    if args.json:
        document = sweep_json(results, skips, passes, seconds, seed=args.seed,
                              max_devices=args.max_devices)
        atomic_write_text(args.json, json.dumps(document, indent=1) + "\n")
    if args.plot:
        write_heatmap(args.plot, results, passes)
    print_report(results, skips, passes, seconds)
    if args.json:
        print(f"wrote {len(results)} cases to {args.json}")
    if args.plot:
        print(f"wrote the heatmap to {args.plot}")
    disagreements = [(r.case.id, where) for r in results for where in r.disagreements]
    if disagreements:
        sys.stderr.write(f"neuron-sim: BUG: z3 and the differential verifier disagree on "
                         f"{len(disagreements)} verdicts, first {disagreements[0][0]} "
                         f"({disagreements[0][1]}); please report it\n")
        return EXIT_DISAGREEMENT
    unsound = any(o.outcome == "fired_unsound" for r in results for o in r.passes.values())
    return EXIT_PROBLEM if unsound else EXIT_OK


@contextlib.contextmanager
def _progress(total: int) -> Iterator:
    """A progress callback showing a progress bar on stderr (a terminal only)."""
    with terminal_progress(lambda rp: (rp.TextColumn("sweep"), rp.BarColumn(),
                                       rp.MofNCompleteColumn(), rp.TimeElapsedColumn(),
                                       rp.TimeRemainingColumn(),
                                       rp.TextColumn("{task.description}")),
                           total=total) as update:
        if update is None:
            yield None
            return

        def shown(index: int, case: object) -> None:
            update(completed=index, description=getattr(case, "id", ""))

        yield shown
