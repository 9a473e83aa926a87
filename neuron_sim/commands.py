"""Subcommands that need only the model of programs and machines: ``check``.

Also the topology options every command that runs or verifies a module shares
(``--replicas``, ``--partitions``, ``--device-assignment``), so they are spelled and checked once.
"""

from __future__ import annotations

import argparse
import json
import sys

from neuron_sim.hlo import HloModule, Opcode, parse_module_file
from neuron_sim.hlo.checker import check_module
from neuron_sim.topology import Topology, group_mode, parse_device_assignment, participant_groups


def add_topology_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("topology (defaults: the module header)")
    group.add_argument("--replicas", type=int, metavar="R",
                       help="replica count (default: the header's replica_count, else 1)")
    group.add_argument("--partitions", type=int, metavar="P",
                       help="partition count (default: the header's num_partitions, else 1)")
    group.add_argument("--device-assignment", metavar="'{{0,1},{2,3}}'",
                       help="R x P physical device ids, row r = replica r "
                            "(default: XLA's partition-major assignment)")


def topology_from_args(args: argparse.Namespace, module: HloModule) -> Topology:
    """The topology the user asked for, defaulting to the module header's counts."""
    replicas = args.replicas if args.replicas is not None else module.replica_count
    partitions = args.partitions if args.partitions is not None else module.num_partitions
    assignment = None
    if args.device_assignment:
        assignment = parse_device_assignment(args.device_assignment)
    return Topology(replicas, partitions, assignment)


def load_module(path: str) -> HloModule:
    """Parse a module file (HloParseError and OSError reach the CLI as one-line errors)."""
    return parse_module_file(path)


def describe_collectives(module: HloModule, topology: Topology) -> list[dict]:
    """One record per collective: instruction, opcode, group mode and participant groups."""
    records = []
    for comp in module.computations:
        for inst in comp.instructions:
            if not inst.opcode.is_collective:
                continue
            mode = group_mode(inst.opcode.spelling, inst.channel_id is not None,
                              inst.use_global_device_ids)
            record = {"computation": comp.name, "instruction": inst.name,
                      "opcode": inst.opcode.spelling, "group_mode": str(mode),
                      "channel_id": inst.channel_id}
            if inst.has("source_target_pairs"):
                record["source_target_pairs"] = [list(p) for p in inst.get("source_target_pairs").pairs]
            else:
                groups = participant_groups(mode, inst.replica_groups, topology)
                record["replica_groups"] = inst.replica_groups.to_text() if inst.replica_groups \
                    else "{}"
                record["participant_groups"] = [list(g) for g in groups]
            records.append(record)
    return records


def _check(args: argparse.Namespace) -> int:
    module = load_module(args.module)
    topology = topology_from_args(args, module)
    check_module(module, topology)
    collectives = describe_collectives(module, topology)
    n_instructions = sum(len(c.instructions) for c in module.computations)
    summary = {
        "module": module.name, "file": args.module, "ok": True,
        "computations": len(module.computations), "instructions": n_instructions,
        "entry": module.entry.name, "replica_count": topology.replica_count,
        "num_partitions": topology.num_partitions, "collectives": collectives,
    }
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.module}: OK — module {module.name}, {len(module.computations)} computations, "
          f"{n_instructions} instructions, topology {topology} "
          f"({topology.num_devices} devices)")
    if collectives:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{len(collectives)} collectives", title_justify="left")
        for column in ("instruction", "opcode", "group mode", "groups (flattened device ids)"):
            table.add_column(column)
        for rec in collectives:
            if "participant_groups" in rec:
                groups = _short_groups(rec["participant_groups"])
            else:
                groups = "pairs " + _short_groups(rec["source_target_pairs"])
            table.add_row("%" + rec["instruction"], rec["opcode"], rec["group_mode"], groups)
        Console(width=120).print(table)
    return 0


def _short_groups(groups: list[list[int]], limit: int = 8) -> str:
    text = ", ".join("{" + ",".join(map(str, g)) + "}" for g in groups[:limit])
    return text + (f", ... ({len(groups)} in all)" if len(groups) > limit else "")


def register(subparsers: argparse._SubParsersAction) -> None:
    check = subparsers.add_parser(
        "check", help="parse and verify a module; summarize its collectives",
        description="Parse MODULE.hlo, verify shapes and replica groups (XLA's rules), and print "
                    "its computations, instructions and collectives with their group modes.")
    check.add_argument("module", metavar="MODULE.hlo")
    add_topology_arguments(check)
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(handler=_check)
