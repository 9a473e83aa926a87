"""``neuron-sim check-schedule``: where would a pipeline rewrite something whose meaning depends
on context the pass does not check?

    neuron-sim check-schedule MODULE.hlo --pipeline p1,p2,... [--pass-option NAME=VALUE ...]
                              [topology options] [--topology RxP ...] [--suggest] [--no-confirm]
                              [--trials N] [--seed S] [--json]

One line per unsafe site (pass, computation, instruction, reason, witness) and a summary;
``--json`` prints ``{"unsafe": [...], "safe": n, ...}``. Exit code 1 when anything is unsafe, 0
otherwise, 2 for bad usage or input.
"""

from __future__ import annotations

import argparse

from neuron_sim.commands import (EXIT_OK, EXIT_PROBLEM, ProblemFound, UsageError, add_command,
                                 add_json_argument, add_seed_argument, add_topologies_argument,
                                 load_module, print_json, topologies_from_args)
from neuron_sim.hlo.ir import HloModule
from neuron_sim.topology import Topology
from neuron_sim.passes.base import HloPass, resolve_pass_options
from neuron_sim.passes.options import parse_pass_option_args
from neuron_sim.passes.named_pipelines import PIPELINES, left_out, named_pipeline
from neuron_sim.passes.registry import get_pass, parse_pass_list
from neuron_sim.verify.schedule.hazards import Site, context_dependent_keys
from neuron_sim.verify.schedule.runner import (CONFIRM_TRIALS, ScheduleReport, check_schedule,
                                   require_fit, suggest_positions)

SUGGESTED_PASS = "aws_neuron_delete_permute"


def pipeline_passes(text: str, skip: list[str] | None = None,
                    options: dict[str, str] | None = None) -> list[HloPass]:
    """``--pipeline``: a comma-separated list of pass keys, or the name of a named pipeline
    (``neuron_sim.passes.named_pipelines``) with its ``--skip`` keys left out, and the passes
    that need an option not among ``options`` (``named_pipelines.left_out``)."""
    if text in PIPELINES:
        return named_pipeline(text, skip or [], options or {})
    if skip:
        raise UsageError("--skip needs a named --pipeline (" + ", ".join(PIPELINES) + ")")
    return parse_pass_list(text)


def site_line(site: Site, topology: Topology) -> str:
    """``UNSAFE aws_neuron_delete_permute %ar in %main on 1x4: reason; witness: ...``."""
    line = (f"UNSAFE {site.pass_key} (pass {site.position + 1}) %{site.instruction} in "
            f"%{site.computation} on {topology}: {site.reason}")
    if site.witness:
        line += f"; witness: {site.witness}"
    for note in site.notes:
        line += f"; note: {note}"
    return line


def schedule_summary_line(reports: list[ScheduleReport]) -> str:
    unsafe = sum(len(r.unsafe) for r in reports)
    safe = sum(r.safe for r in reports)
    where = ", ".join(str(r.topology) for r in reports)
    judged = list(dict.fromkeys(key for r in reports for key in r.context_dependent))
    passes = (f"; context-dependent: {', '.join(judged)}" if judged
              else "; no context-dependent pass in the pipeline")
    return f"{unsafe} unsafe site(s), {safe} safe, on {where}{passes}"


def _checked(module: HloModule, topology: Topology, path: str) -> None:
    try:
        require_fit(module, topology)
    except ValueError as error:
        raise ProblemFound(f"{path}: {error}") from error


def _check_schedule(args: argparse.Namespace) -> int:
    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, not {args.trials}")
    module = load_module(args.module)
    options = parse_pass_option_args(args.pass_option)
    passes = pipeline_passes(args.pipeline, args.skip, options)
    resolve_pass_options(passes, options)
    absent = left_out(args.pipeline, options, args.skip) if args.pipeline in PIPELINES else []
    topologies = topologies_from_args(args, module)
    for topology in topologies:
        _checked(module, topology, args.module)
    reports = [check_schedule(module, passes, topology, options=options,
                              confirm=not args.no_confirm, trials=args.trials,
                              seed=args.seed)
               for topology in topologies]
    suggestions = []
    if args.suggest:
        candidate = get_pass(SUGGESTED_PASS)
        tried = list(topologies)
        if Topology(1, 1) not in tried:
            tried.append(Topology(1, 1))
        suggestions = [suggest_positions(module, passes, candidate, topology, options=options)
                       for topology in tried]
    if args.json:
        print_json({
            "unsafe": [{**site.to_json(), "topology": str(r.topology)}
                       for r in reports for site in r.unsafe],
            "safe": sum(r.safe for r in reports),
            "topologies": [str(r.topology) for r in reports],
            "pipeline": reports[0].pipeline if reports else [],
            "left_out": absent,
            "suggest": [{"pass": s.pass_key, "topology": str(s.topology), "valid": s.valid,
                         "safe_positions": s.safe_positions, "text": s.describe()}
                        for s in suggestions],
        })
    else:
        for report in reports:
            for site in report.unsafe:
                print(site_line(site, report.topology))
        print(schedule_summary_line(reports))
        for line in absent:
            print(f"note: {line}")
        for suggestion in suggestions:
            print("suggest: " + suggestion.describe())
    return EXIT_PROBLEM if any(r.unsafe for r in reports) else EXIT_OK


def add_schedule_command(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "check-schedule", handler=_check_schedule,
        help="find where a pipeline runs a context-dependent pass where it is unsafe",
        description="Run --pipeline on MODULE.hlo pass by pass and, before every pass whose "
                    "soundness depends on context it does not check ("
                    + ", ".join(context_dependent_keys()) + "), judge each instruction it would "
                    "rewrite on the topology, then confirm each unsafe one with the "
                    "differential verifier. Exit code 1 if anything is unsafe, 0 if not, 2 bad "
                    "usage or input.")
    parser.add_argument("--pipeline", required=True, metavar="p1,p2,...",
                        help="pass keys in order (see `neuron-sim passes`), or a named "
                             "pipeline: " + ", ".join(PIPELINES))
    parser.add_argument("--skip", action="append", default=[], metavar="KEY",
                        help="with a named --pipeline: leave this pass out (repeatable)")
    parser.add_argument("--pass-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the passes (repeatable): NAME or KEY.NAME")
    add_topologies_argument(parser, help="check on this topology (repeatable); only these "
                                         "unless the topology options are given too")
    parser.add_argument("--suggest", action="store_true",
                        help=f"also say where in the pipeline {SUGGESTED_PASS} could run with "
                             "every site safe (on these topologies and on 1x1)")
    parser.add_argument("--no-confirm", action="store_true",
                        help="judge statically only; skip the differential confirmation")
    parser.add_argument("--trials", type=int, default=CONFIRM_TRIALS, metavar="N",
                        help=f"input sets per confirmation (default {CONFIRM_TRIALS})")
    add_seed_argument(parser, default=0, help="seed of the confirmation's inputs (default 0)")
    add_json_argument(parser, help='{"unsafe": [{"pass", "computation", "instruction", '
                                   '"reason", "witness"}], "safe": n}')
