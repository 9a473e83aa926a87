"""Subcommands of the verifier: ``verify`` (like Alive2's alive-tv) and ``demo``.

    neuron-sim verify MODULE.hlo --passes a,b [topology options] [--trials N] [--seed S]
                      [--inputs IN.npz] [--json] [--out DIR] [--no-minimize]
    neuron-sim verify BEFORE.hlo AFTER.hlo [the same options, --contract C]
    neuron-sim demo

Exit codes: 0 every result CORRECT, 1 any UNSOUND, 2 bad usage or input, or no verdict (an
ERROR — our limitation, a target over ``--max-memory`` included — or FAILED_TO_PROVE); a
source over ``--max-memory`` is refused before anything runs (exit 2).
While it runs, and only when stderr is a terminal, a status line on stderr shows the execution
under way and the time spent.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, Iterator

from neuron_sim.interpreter.memory import default_memory_limit
from neuron_sim.commands import (UsageError, add_command, add_json_argument,
                                 add_max_memory_argument, add_seed_argument,
                                 add_timeout_argument, add_topologies_argument, load_module,
                                 print_json, terminal_progress, topologies_from_args)
from neuron_sim.hlo.ir import HloModule
from neuron_sim.io import fit_arguments, read_inputs
from neuron_sim.outputs import check_output_directory
from neuron_sim.passes.commands import (add_pass_arguments, check_skip, left_out_lines,
                                        passes_from_args)
from neuron_sim.topology import Topology
from neuron_sim.verify.execution import DEFAULT_TIMEOUT, Runner, default_runner
from neuron_sim.verify.inputs import DEFAULT_TRIALS


def _verify(args: argparse.Namespace) -> int:
    from neuron_sim.verify.options import VerifyOptions
    from neuron_sim.verify.report import exit_code, format_result, result_json, summary_line, \
        write_counterexample
    from neuron_sim.verify.verifier import Verifier

    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, not {args.trials}")
    if args.proof == "symbolic" and args.inputs:
        raise UsageError("--proof symbolic proves for all inputs, and --inputs asks about the "
                         "given ones only: give one or the other")
    if args.out:
        check_output_directory(args.out, [*args.modules, args.inputs])
    before = load_module(args.modules[0])
    if len(args.modules) > 2:
        raise UsageError("give one module and --passes, or two modules (BEFORE.hlo AFTER.hlo)")
    check_skip(args)
    rewriting = bool(args.passes or args.pipeline)
    if len(args.modules) == 2 and rewriting:
        raise UsageError("give either --passes / --pipeline or a second module, not both")
    if len(args.modules) == 1 and not rewriting:
        raise UsageError("give --passes a,b or --pipeline NAME to rewrite MODULE.hlo, or a "
                         "second module AFTER.hlo to compare with")
    topologies = topologies_from_args(args, before)
    inputs = read_inputs(args.inputs) if args.inputs else None
    if inputs is not None:  # judged once here, so that the error names the file
        shapes = [p.shape for p in before.entry.parameters]
        for topology in topologies:
            fit_arguments(inputs, shapes, topology.num_devices, source=args.inputs)
    max_memory = args.max_memory if args.max_memory is not None else default_memory_limit()
    with _progress(default_runner(args.backend, max_memory), args.modules[0]) as runner:
        options = VerifyOptions(topologies=topologies, trials=args.trials, seed=args.seed,
                                inputs=inputs, runner=runner, max_memory=max_memory,
                                minimize=not args.no_minimize, name=args.modules[0],
                                timeout=None if args.timeout == float("inf") else args.timeout,
                                proof=args.proof)
        if rewriting:
            hlo_passes, pass_options = passes_from_args(args)
            verifier = Verifier(options.replace(pass_options=pass_options,
                                                name_breaking_pass=True))
            result = verifier.check_pass(before, hlo_passes)
        else:
            after = load_module(args.modules[1])
            result = Verifier(options.replace(contract=args.contract)).check_modules(before, after)
    files = write_counterexample(result, args.out) if args.out else {}
    if args.json:
        data = result_json(result)
        data["summary"] = summary_line([result])
        if rewriting:
            data["breaking_pass"] = result.breaking_pass
            data["left_out"] = left_out_lines(args)
        if files:
            data["files"] = files
        print_json(data)
    else:
        print(format_result(result))
        for line in left_out_lines(args) if rewriting else []:
            print(f"note: {line}")
        if files:
            print(f"wrote {', '.join(Path(p).name for p in files.values())} to {args.out}")
            print(f"reproduce: sh {files['reproduce']}")
        print(summary_line([result]))
    return exit_code([result])


@contextlib.contextmanager
def _progress(runner: Runner, name: str) -> Iterator[Runner]:
    """``runner``, showing each execution on a status line on stderr while it runs (only
    when stderr is a terminal: piped and captured output stay as they are)."""
    with terminal_progress(lambda rp: (rp.SpinnerColumn(), rp.TextColumn("{task.description}"),
                                       rp.TimeElapsedColumn()),
                           description=f"{name}: starting") as update:
        if update is None:
            yield runner
            return
        executions = [0]

        def shown(module: HloModule, inputs: list, topology: Topology, seed: int,
                  **devices: Any) -> list:
            executions[0] += 1
            update(description=f"{name}: execution {executions[0]} ({module.name} on "
                               f"topology {topology})")
            try:
                return runner(module, inputs, topology, seed, **devices)
            finally:
                update(advance=1)

        shown.takes_devices = getattr(runner, "takes_devices", False)  # type: ignore[attr-defined]
        run_trials = getattr(runner, "run_trials", None)
        if run_trials is not None:  # several input sets in one execute (verify/trial_batches.py)
            def shown_trials(module: HloModule, sets: list, topology: Topology,
                             seed: int) -> list:
                executions[0] += len(sets)
                update(description=f"{name}: executions {executions[0] - len(sets) + 1}-"
                                   f"{executions[0]} ({module.name} on topology {topology}, "
                                   f"{len(sets)} input sets at once)")
                try:
                    return run_trials(module, sets, topology, seed)
                finally:
                    update(advance=len(sets))

            shown.run_trials = shown_trials  # type: ignore[attr-defined]
        yield shown


def _demo(args: argparse.Namespace) -> int:
    from neuron_sim.verify.demo import run_demo

    return run_demo(sys.stdout, trials=args.trials, seed=args.seed)


def add_verify_commands(subparsers: argparse._SubParsersAction) -> None:
    verify = add_command(
        subparsers, "verify", handler=_verify, module=None,
        help="check that a rewrite preserves the program on every device (like alive-tv)",
        description="Run MODULE.hlo before and after --passes (or BEFORE.hlo against AFTER.hlo) "
                    "on every device of each topology, with inputs drawn to find bugs, and "
                    "report CORRECT, UNSOUND (with a minimized counterexample), FAILED_TO_PROVE "
                    "or ERROR. Exit code 0 all correct, 1 unsound, 2 bad input or no verdict.")
    verify.add_argument("modules", nargs="+", metavar="MODULE.hlo",
                        help="MODULE.hlo with --passes, or BEFORE.hlo AFTER.hlo")
    add_pass_arguments(verify, required=False)
    add_topologies_argument(verify, help="verify on this topology (repeatable), e.g. "
                                         "--topology 2x2; only these unless the topology "
                                         "options are given too")
    verify.add_argument("--trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                        help=f"input sets per topology (default {DEFAULT_TRIALS}, one of each "
                             "style: distinct per device with ties, exactly representable, the "
                             "module's constants, signed zeros and infinities, NaN, extremes)")
    add_seed_argument(verify, default=0, help="seed of the input generator (default 0)")
    verify.add_argument("--inputs", metavar="IN.npz",
                        help="check exactly these inputs (arg{i}, shaped [D, *shape] or shape)")
    verify.add_argument("--contract", default="exact",
                        choices=("exact", "refinement", "changes-results"),
                        help="comparison for BEFORE/AFTER (with --passes: the passes' contract)")
    add_timeout_argument(verify, default=DEFAULT_TIMEOUT,
                         help=f"time limit of one execution of the source (default "
                              f"{DEFAULT_TIMEOUT:g}; inf: none); a source that runs longer is "
                              "not compared on that input, a target may take the longer of "
                              "this and 20 times the source's time")
    add_max_memory_argument(verify, help="refuse a source whose estimated memory exceeds SIZE, "
                                         "e.g. 8G, before drawing inputs (a target over it: an "
                                         "ERROR verdict; default: half of the memory available)")
    verify.add_argument("--backend", default="local", choices=("local", "mpi"),
                        help="interpreter backend (default local)")
    verify.add_argument("--proof", default="auto", choices=("auto", "symbolic", "sampled"),
                        help="auto: prove a CORRECT verdict for all inputs where symbolic "
                             "execution can, else keep the sampled one; symbolic: require the "
                             "proof (not with --inputs, which asks about those inputs only); "
                             "sampled: inputs only (default auto)")
    verify.add_argument("--no-minimize", action="store_true",
                        help="report the first counterexample as found, without shrinking it")
    verify.add_argument("--out", metavar="DIR",
                        help="write before.hlo, after.hlo, inputs.npz, report.json and "
                             "reproduce.sh into DIR, a new or empty directory (nothing in it "
                             "is replaced)")
    add_json_argument(verify, help="machine-readable report")

    demo = add_command(
        subparsers, "demo", handler=_demo, module=None, topology=False,
        help="a short tour: the seed passes on the bundled examples, and the verdicts",
        description="Verify the seed passes on the six bundled examples (sorted and unsorted "
                    "single-group fold, contiguous and strided multiple-groups fold, "
                    "DeletePermute on singleton and real groups) and explain each verdict. Exit "
                    "code 0 if every verdict is the documented one.")
    demo.add_argument("--trials", type=int, default=DEFAULT_TRIALS, metavar="N",
                      help=argparse.SUPPRESS)
    add_seed_argument(demo, default=0, help=argparse.SUPPRESS)
