"""``neuron-sim check``: parse and verify a module, and summarize its collectives.

    neuron-sim check MODULE.hlo [topology options] [--json]

It needs only the model of programs and machines: the parser, the checker (XLA's verifier rules,
replica groups judged for the topology) and the participant groups of every collective.
"""

from __future__ import annotations

import argparse

from neuron_sim.commands import (EXIT_OK, add_command, add_json_argument, module_and_topology,
                                 print_json)
from neuron_sim.hlo import HloModule
from neuron_sim.hlo.checker import check_module
from neuron_sim.topology import Topology, group_mode, participant_groups


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
                record["source_target_pairs"] = [list(p) for p in
                                                 inst.get("source_target_pairs").pairs]
            else:
                groups = participant_groups(mode, inst.replica_groups, topology)
                record["replica_groups"] = inst.replica_groups.to_text() if inst.replica_groups \
                    else "{}"
                record["participant_groups"] = [list(g) for g in groups]
            records.append(record)
    return records


def _check(args: argparse.Namespace) -> int:
    module, topology = module_and_topology(args)
    check_module(module, topology)
    collectives = describe_collectives(module, topology)
    n_instructions = sum(len(c.instructions) for c in module.computations)
    if args.json:
        print_json({
            "module": module.name, "file": args.module, "ok": True,
            "computations": len(module.computations), "instructions": n_instructions,
            "entry": module.entry.name, "replica_count": topology.replica_count,
            "num_partitions": topology.num_partitions, "collectives": collectives,
        })
        return EXIT_OK
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
    return EXIT_OK


def _short_groups(groups: list[list[int]], limit: int = 8) -> str:
    text = ", ".join("{" + ",".join(map(str, g)) + "}" for g in groups[:limit])
    return text + (f", ... ({len(groups)} in all)" if len(groups) > limit else "")


def register(subparsers: argparse._SubParsersAction) -> None:
    check = add_command(
        subparsers, "check", handler=_check,
        help="parse and verify a module; summarize its collectives",
        description="Parse MODULE.hlo, verify shapes and replica groups (XLA's rules), and print "
                    "its computations, instructions and collectives with their group modes.")
    add_json_argument(check)
