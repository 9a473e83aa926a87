"""The ``fuzz`` subcommand: random modules that reach the passes, verified.

    neuron-sim fuzz --passes a,b [--examples N | --time 60s] [--seed S] [--corpus DIR]
                    [--json OUT] [--devices D] [--trials T]
    neuron-sim fuzz --oracle xla [--examples N | --time 60s] [--seed S] [--corpus DIR]
                    [--json OUT] [--devices D]

With ``--oracle xla`` the same random modules are run on XLA:CPU and on the interpreter and
compared (``neuron_sim.verify.fuzz.oracle``); ``--passes`` may then be left out. Exit code 1
also for an unexplained disagreement.

Exit codes: 0 no pass crashed, produced a malformed module or an UNSOUND rewrite; 1 some pass
did (the failures are in the table, the JSON and the corpus); 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import time
from typing import Iterator

from neuron_sim.commands import (EXIT_OK, EXIT_PROBLEM, UsageError, add_command,
                                 add_seed_argument, terminal_progress)

DEFAULT_EXAMPLES = 200
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(s|m|h)?\s*$")
_UNIT = {None: 1, "s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """``60s``, ``2m``, ``90`` -> seconds."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive duration such as 60s, 2m or 90, not {text!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


def add_fuzz_command(subparsers: argparse._SubParsersAction) -> None:
    fuzz = add_command(
        subparsers, "fuzz", handler=run_fuzz, module=None, topology=False,
        help="run passes on random modules and idioms with collectives, and verify them",
        description="Draw random well-typed modules and the collective idioms the seed passes "
                    "look for (neuron_sim.verify.strategies), deterministically from --seed; run each "
                    "pass on each module, verify it on the module's topology and classify it: "
                    "crashed, malformed, unsound, correct, unchanged (inconclusive: our own "
                    "limit). Each new failure is minimized and, with --corpus, saved as a "
                    "before/after pair with its inputs and the command that reproduces it; "
                    "failures with the same signature are counted once.",
        epilog="exit codes: 0 no failure, 1 a pass crashed, was malformed or unsound, "
               "2 bad usage")
    fuzz.add_argument("--passes", metavar="KEYS",
                      help="comma-separated registry keys, each fuzzed on its own (required "
                           "unless --oracle is given)")
    fuzz.add_argument("--oracle", choices=("xla",),
                      help="also run every module on XLA:CPU and on the interpreter and "
                           "compare them per device and output (needs jaxlib: the xla extra; "
                           "docs/run.md)")
    budget = fuzz.add_mutually_exclusive_group()
    budget.add_argument("--examples", type=int, metavar="N",
                        help=f"modules to draw (default {DEFAULT_EXAMPLES} without --time)")
    budget.add_argument("--time", type=parse_duration, metavar="DURATION",
                        help="draw modules for this long (60s, 2m)")
    add_seed_argument(fuzz, default=0, help="seed of the modules and inputs (default 0)")
    fuzz.add_argument("--corpus", metavar="DIR",
                      help="save each new distinct failure under DIR/KEY-HASH/")
    fuzz.add_argument("--json", metavar="OUT", help="write the campaign as JSON to OUT")
    fuzz.add_argument("--devices", type=int, default=8, metavar="D",
                      help="devices of every drawn topology (default 8)")
    fuzz.add_argument("--trials", type=int, default=None, metavar="T",
                      help="input sets per verification (default 1)")


def run_fuzz(args: argparse.Namespace) -> int:
    from neuron_sim.outputs import atomic_write_text, check_output_file
    from neuron_sim.passes.registry import parse_pass_list
    from neuron_sim.verify.fuzz.report import campaign_json, campaign_table
    from neuron_sim.verify.fuzz.runner import FAILURE_CLASSES, TRIALS, run_campaign

    if args.passes is None and args.oracle is None:
        raise UsageError("give --passes KEYS, --oracle xla, or both")
    if args.oracle is not None:
        from neuron_sim.xla_cpu import jaxlib_installed
        if not jaxlib_installed():
            raise UsageError("--oracle xla needs jaxlib: pip install 'neuron-sim[xla]'")
    passes = parse_pass_list(args.passes) if args.passes is not None else []
    if args.examples is not None and args.examples < 1:
        raise UsageError(f"--examples must be at least 1, not {args.examples}")
    if not 1 <= args.devices <= 64:
        raise UsageError(f"--devices must be between 1 and 64, not {args.devices}")
    trials = TRIALS if args.trials is None else args.trials
    if trials < 1:
        raise UsageError(f"--trials must be at least 1, not {trials}")
    if args.json:
        check_output_file(args.json, option="--json")
    examples = args.examples if args.examples is not None or args.time is not None \
        else DEFAULT_EXAMPLES
    # With both, the time is shared: half for the passes, half for the oracle.
    seconds = args.time / 2 if args.time is not None and passes and args.oracle else args.time
    document: dict = {}
    failed = False
    if passes:
        with _progress(examples, seconds) as progress:
            campaign = run_campaign(passes, examples=examples, seconds=seconds,
                                    seed=args.seed, corpus=args.corpus, devices=args.devices,
                                    trials=trials, progress=progress)
        document = campaign_json(campaign)
        print(campaign_table(campaign))
        failed = any(campaign.counts[name][klass] for name in campaign.passes
                     for klass in FAILURE_CLASSES)
    if args.oracle is not None:
        from neuron_sim.verify.fuzz.oracle import oracle_table, run_oracle_campaign
        from neuron_sim.xla_cpu import XlaError

        with _progress(examples, seconds) as progress:
            try:
                oracle = run_oracle_campaign(examples=examples, seconds=seconds,
                                             seed=args.seed, devices=args.devices,
                                             corpus=args.corpus, progress=progress)
            except XlaError as error:
                raise UsageError(f"--oracle xla: {error}") from None
        if passes:
            print()
        print(oracle_table(oracle))
        document.setdefault("seed", args.seed)
        document["oracle"] = oracle.to_json()
        failed |= oracle.unexplained > 0
    if args.json:
        atomic_write_text(args.json, json.dumps(document, indent=1) + "\n")
        print(f"wrote the campaign to {args.json}")
    return EXIT_PROBLEM if failed else EXIT_OK


@contextlib.contextmanager
def _progress(examples: int | None, seconds: float | None) -> Iterator:
    """A progress bar on stderr (a terminal only): by modules with ``--examples``, by elapsed
    time with ``--time``."""
    started = time.perf_counter()
    with terminal_progress(lambda rp: (rp.TextColumn("fuzz"), rp.BarColumn(),
                                       rp.TimeElapsedColumn(),
                                       rp.TextColumn("{task.description}")),
                           total=examples if seconds is None else seconds) as update:
        if update is None:
            yield None
            return

        def shown(done: int, campaign) -> None:
            elapsed = time.perf_counter() - started
            update(completed=done if seconds is None else elapsed,
                   description=f"{done} modules, {len(campaign.failures)} distinct failures")

        yield shown
