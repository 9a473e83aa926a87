"""Subcommands of the pass framework: ``opt`` (like XLA's hlo-opt) and ``passes``.

    neuron-sim opt MODULE.hlo --passes a,b [--pass-option NAME=VALUE ...] [topology options]
                   [-o OUT.hlo] [--json] [--explain]
    neuron-sim passes [--json]

``opt`` prints the rewritten module in XLA syntax on stdout (or writes it atomically with
``-o``) and one line per rewrite on stderr. The passes run with a ``PassContext``: the topology
of the topology options (default: the module header's) and the ``--pass-option`` values. Errors
(unknown pass or option, unreadable module, a pass that fails) are user errors: the CLI prints
them as one sentence and exits with code 2.

``add_pass_arguments`` / ``passes_from_args`` are the one spelling of ``--passes`` and
``--pass-option`` for every command that runs passes (``opt``, ``verify``).
"""

from __future__ import annotations

import argparse
import sys

from neuron_sim.commands import (EXIT_OK, add_command, add_json_argument,
                                 module_and_topology, print_json)
from neuron_sim.errors import UserError
from neuron_sim.hlo import HloModule
from neuron_sim.outputs import atomic_write_text, check_output_file
from neuron_sim.passes.base import HloPass, resolve_pass_options
from neuron_sim.passes.context import PassContext
from neuron_sim.passes.options import parse_pass_option_args
from neuron_sim.passes.named_pipelines import PIPELINES, left_out, named_pipeline, pipeline_entries
from neuron_sim.passes.pass_pipeline import PassPipeline
from neuron_sim.passes.registry import list_passes, parse_pass_list, pass_class


def add_pass_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--passes a,b`` or ``--pipeline NAME`` (with repeatable ``--skip KEY``), and the
    repeatable ``--pass-option NAME=VALUE``; ``required``: one of the two must be given."""
    which = parser.add_mutually_exclusive_group(required=required)
    which.add_argument("--passes", metavar="a,b",
                       help="registry keys or class names; see `neuron-sim passes`")
    which.add_argument("--pipeline", metavar="NAME", choices=sorted(PIPELINES),
                       help="a named pipeline, its passes in order (" + ", ".join(PIPELINES)
                            + "); see `neuron-sim passes --pipeline NAME`")
    parser.add_argument("--skip", action="append", default=[], metavar="KEY",
                        help="with --pipeline: leave this pass out (repeatable)")
    parser.add_argument("--pass-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of the passes (repeatable): NAME for every pass that "
                             "declares it, or KEY.NAME for one pass; see docs/passes.md")


def check_skip(args: argparse.Namespace) -> None:
    """Refuse ``--skip`` without ``--pipeline`` (a UserError, exit 2): it only means something
    as a pass left out of a named pipeline."""
    if args.skip and not args.pipeline:
        raise UserError("--skip needs --pipeline (it leaves a pass of the pipeline out)")


def passes_from_args(args: argparse.Namespace) -> tuple[list[HloPass], dict[str, str]]:
    """The passes of ``--passes`` or ``--pipeline`` (less ``--skip``) and the options of
    ``--pass-option``, checked against what the passes declare (an unknown option or a bad
    value is a user error, exit 2)."""
    check_skip(args)
    options = parse_pass_option_args(args.pass_option)
    hlo_passes = (named_pipeline(args.pipeline, args.skip, options) if args.pipeline
                  else parse_pass_list(args.passes))
    resolve_pass_options(hlo_passes, options)
    return hlo_passes, options


def left_out_lines(args: argparse.Namespace) -> list[str]:
    """What ``--pipeline`` left out for want of an option (``named_pipelines.left_out``): one
    line each, for the command to report beside its result; none for ``--passes``."""
    if not getattr(args, "pipeline", None) or args.pipeline not in PIPELINES:
        return []
    return left_out(args.pipeline, parse_pass_option_args(args.pass_option), args.skip)


def explain_lines(pipeline_passes: list[HloPass], module: HloModule) -> list[str]:
    """For every pass that can explain its matcher: why each candidate matched or not.

    Only instructions that get past the matcher's first check (the opcode gate) are listed;
    those in fusion computations are marked, since OpExpanderPass never visits them.
    """
    lines = []
    fusion = module.fusion_computations()
    for hlo_pass in pipeline_passes:
        explain = getattr(hlo_pass, "explain", None)
        if explain is None:
            continue
        for comp in module.computations:
            for inst in comp.instructions:
                where = " (in fusion computation %s: not visited)" % comp.name \
                    if comp in fusion else ""
                try:
                    result = explain(inst)
                except ValueError as exc:
                    lines.append(f"{hlo_pass.name}: %{inst.name}{where}: the matcher raises: {exc}")
                    continue
                if result.check == 1:
                    continue
                verdict = "matches" if result.matched else \
                    f"rejected at check {result.check}: {result.reason}"
                lines.append(f"{hlo_pass.name}: %{inst.name}{where}: {verdict}")
    return lines


def _opt(args: argparse.Namespace) -> int:
    if args.output:
        check_output_file(args.output, [args.module])
    pipeline_passes, options = passes_from_args(args)
    module, topology = module_and_topology(args)
    explanations = explain_lines(pipeline_passes, module) if args.explain else []
    pipeline = PassPipeline(pipeline_passes, name="opt")
    changed = pipeline.run(module, PassContext(topology=topology, options=options))
    text = module.to_text()
    if args.output and str(args.output).endswith(".pb"):
        from neuron_sim.hlo.proto import module_to_bytes
        from neuron_sim.outputs import atomic_write

        data = module_to_bytes(module)  # an HloModuleProto (docs/proto.md)
        atomic_write(args.output, lambda handle: handle.write(data))
    elif args.output:
        atomic_write_text(args.output, text)
    if args.json:
        report = {
            "input": args.module, "output": args.output, "module": module.name,
            "changed": changed, "left_out": left_out_lines(args),
            "passes": [{"name": p.name, "class": type(p).__name__, "changed": c,
                        "rewrites": list(p.rewrites), "warnings": list(p.warnings)}
                       for p, c in pipeline.results],
        }
        if args.explain:
            report["explain"] = explanations
        if not args.output:
            report["text"] = text
        print_json(report)
        return EXIT_OK
    if not args.output:
        sys.stdout.write(text)
    for line in explanations + left_out_lines(args):
        print(line, file=sys.stderr)
    for hlo_pass, pass_changed in pipeline.results:
        for line in hlo_pass.warnings:
            print(f"{hlo_pass.name}: warning: {line}", file=sys.stderr)
        if not pass_changed:
            print(f"{hlo_pass.name}: no change", file=sys.stderr)
        for line in hlo_pass.rewrites:
            print(f"{hlo_pass.name}: {line}", file=sys.stderr)
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def _passes(args: argparse.Namespace) -> int:
    infos = list_passes()
    if args.pipeline:
        by_key = {info.key: info for info in infos}
        entries = pipeline_entries(args.pipeline)
        if args.json:
            print_json([{"number": number, "key": key, "registered": key in by_key,
                         "only_with": pass_class(key).pipeline_only_with,
                         **(by_key[key].to_json() if key in by_key else {})}
                        for number, key in entries])
            return EXIT_OK
        header = ("#", "key", "class", "seed status", "contract")
        rows = [(f"#{number}", key + _only_with(key)) + ((by_key[key].class_name, by_key[key].seed_status,
                                        by_key[key].contract) if key in by_key
                                       else ("(not registered)", "", ""))
                for number, key in entries]
        _print_table(header, rows)
        return EXIT_OK
    if args.json:
        print_json([info.to_json() for info in infos])
        return EXIT_OK
    header = ("key", "class", "seed status", "contract")
    rows = [(info.key, info.class_name, info.seed_status, info.contract) for info in infos]
    _print_table(header, rows)
    return EXIT_OK


def _only_with(key: str) -> str:
    """`` (only with targets)`` for a pass that joins named pipelines only with that option."""
    needed = pass_class(key).pipeline_only_with
    return f" (only with {needed})" if needed else ""


def _print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def add_pass_commands(subparsers: argparse._SubParsersAction) -> None:
    opt = add_command(
        subparsers, "opt", handler=_opt,
        help="run passes on a module and print the result (like XLA's hlo-opt)",
        description="Parse MODULE.hlo, run the comma-separated passes in order (all or nothing: "
                    "if one fails the module is unchanged and the command exits with 2), print "
                    "the rewritten module in XLA syntax and one line per rewrite on stderr.")
    add_pass_arguments(opt, required=True)
    opt.add_argument("-o", "--output", metavar="OUT.hlo",
                     help="write the module here (atomically) instead of stdout; a name "
                          "ending in .pb gets a binary HloModuleProto")
    add_json_argument(opt, help="machine-readable report on stdout (module text under 'text')")
    opt.add_argument("--explain", action="store_true",
                     help="say, for each candidate of an explaining matcher, which check "
                          "rejected it")

    listing = add_command(
        subparsers, "passes", handler=_passes, module=None, topology=False,
        help="list every pass: key, class, seed status, contract",
        description="List every registered pass with its registry key, class, how faithfully "
                    "it follows its seed (faithful / our reading / inferred) and its "
                    "verification contract (exact / refinement / changes-results).")
    listing.add_argument("--pipeline", metavar="NAME", choices=sorted(PIPELINES),
                         help="list this named pipeline's passes in order, with their #NN")
    add_json_argument(listing, help="machine-readable list (adds seed section and summary)")
