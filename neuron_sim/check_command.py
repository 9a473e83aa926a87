"""``neuron-sim check``: parse and verify modules, and summarize their collectives.

    neuron-sim check PATH... [topology options] [--allow-mixed-precision] [--json]

Each PATH is an HLO file or a directory, such as an XLA ``--xla_dump_to`` folder: in a
directory, the ``*.hlo`` files and the ``*.txt`` files that begin with ``HloModule`` (XLA's
dumps of modules, ``module_0001.jit_f.before_optimizations.txt``; its buffer assignments and
memory reports are ``*.txt`` too, and are not HLO) are checked, in path order.

One line per file, beginning with its path: ``PATH: OK — ...`` for an accepted module,
``PATH:LINE:COL: message`` for a parse error, ``PATH: message`` for a rejection; then a summary
line when more than one file was checked. A single accepted module also gets its collectives'
table, a single parse error its source line and caret. Exit 0 when every module is accepted,
1 when any is rejected or does not parse, 2 for bad usage or an unreadable path.

When neither the options nor the header give replica_count / num_partitions (XLA's tests set
them in the module config), the smallest topology the collectives' groups are valid on is
used, and the OK line says it was inferred.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from neuron_sim.commands import (EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, add_command,
                                 add_json_argument, error_message, print_json,
                                 inferred_topology, topology_from_args)
from neuron_sim.errors import UserError
from neuron_sim.hlo.proto import ProtoError
from neuron_sim.hlo import HloModule, HloParseError, Opcode
from neuron_sim.hlo.checker import HloCheckError, check_module
from neuron_sim.physical_groups import flattened_replica_groups
from neuron_sim.topology import Topology, group_mode

_HLO_SUFFIXES = (".hlo",)
_DUMP_SUFFIXES = (".txt",)


# Past this many devices the participant groups are not listed (one Python list of every device
# id per collective: a header with num_partitions=2**62 would be listed for ever).
MAX_LISTED_DEVICES = 1 << 20
# Collectives whose peers are source-target pairs (none written: no pairs, every device gets 0).
_PAIR_OPCODES = frozenset({Opcode.COLLECTIVE_PERMUTE, Opcode.COLLECTIVE_PERMUTE_START})


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
            if inst.has("source_target_pairs") or inst.opcode in _PAIR_OPCODES:
                pairs = inst.get("source_target_pairs", None)
                record["source_target_pairs"] = [list(p) for p in pairs.pairs] if pairs else []
            elif topology.num_devices > MAX_LISTED_DEVICES:
                record["replica_groups"] = inst.replica_groups.to_text() if inst.replica_groups \
                    else "{}"
                record["participant_groups"] = None  # not listed: see MAX_LISTED_DEVICES
            else:
                try:
                    groups = flattened_replica_groups(inst, mode, topology)
                except UserError as exc:
                    raise HloCheckError(f"its replica groups name no participants on "
                                        f"topology {topology}: {exc}",
                                        computation=comp.name, instruction=inst.name,
                                        instruction_text=f"%{inst.name}") from None
                record["replica_groups"] = inst.replica_groups.to_text() if inst.replica_groups \
                    else "{}"
                record["participant_groups"] = [list(g) for g in groups]
            records.append(record)
    return records


def _is_hlo_text(path: Path) -> bool:
    """An HLO file by name (``*.hlo``; an HloModuleProto dump ``*.pb`` / ``*.pb.gz``), or a
    ``*.txt`` whose text begins with ``HloModule``."""
    if path.suffix in _HLO_SUFFIXES or path.name.endswith((".pb", ".pb.gz")):
        return True
    if path.suffix not in _DUMP_SUFFIXES:
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return True
    return head.lstrip().startswith("HloModule")


def module_files(paths: list[str]) -> list[str]:
    """The files to check: each file named, and the HLO text files under each directory (in
    path order). A path that does not exist is the user's error (exit 2)."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(str(p) for p in Path(path).rglob("*")
                           if p.is_file() and _is_hlo_text(p))
            if not found:
                raise UserError(f"{path}: no HLO text files (*.hlo, or *.txt beginning with "
                                f"HloModule) in this directory")
            files.extend(found)
        elif os.path.exists(path):
            files.append(path)
        else:
            raise FileNotFoundError(2, "No such file", path)
    return files


def _topology(args: argparse.Namespace, module: HloModule) -> tuple[Topology, bool]:
    """The topology options' topology, else the header's, the counts the header leaves out
    inferred from the collectives; and whether anything was inferred."""
    inferred = inferred_topology(args, module)
    return (inferred, True) if inferred is not None else (topology_from_args(args, module), False)


@dataclass
class FileVerdict:
    """What ``check`` found in one file; ``record`` is its JSON form."""

    path: str
    status: str
    line: str
    detail: list[str] = field(default_factory=list)
    record: dict = field(default_factory=dict)


def check_file(path: str, args: argparse.Namespace) -> FileVerdict:
    """Read, parse and verify one file. Unreadable files (OSError, not UTF-8) raise."""
    from neuron_sim.commands import load_module

    try:
        module = load_module(path)
    except HloParseError as exc:
        return FileVerdict(path, "unparsable", exc.one_line(),
                           [exc.source_line, " " * (exc.col - 1) + "^"],
                           {"file": path, "ok": False, "stage": "parser", "line": exc.line,
                            "column": exc.col, "error": exc.message})
    topology, inferred = _topology(args, module)
    try:
        check_module(module, topology, allow_mixed_precision=args.allow_mixed_precision)
        collectives = describe_collectives(module, topology)
    except HloCheckError as exc:
        return FileVerdict(path, "rejected", f"{path}: {exc}", [],
                           {"file": path, "ok": False, "stage": "checker", "error": str(exc),
                            "replica_count": topology.replica_count,
                            "num_partitions": topology.num_partitions,
                            "topology_inferred": inferred})
    n_instructions = sum(len(c.instructions) for c in module.computations)
    missing = " or ".join(k for k in ("replica_count", "num_partitions")
                          if k not in module.header)
    how = f", inferred from the collectives' groups: the header gives no {missing}" \
        if inferred else ""
    line = (f"{path}: OK — module {module.name}, {len(module.computations)} computations, "
            f"{n_instructions} instructions, topology {topology} "
            f"({topology.num_devices} devices{how})")
    record = {"module": module.name, "file": path, "ok": True,
              "computations": len(module.computations), "instructions": n_instructions,
              "entry": module.entry.name, "replica_count": topology.replica_count,
              "num_partitions": topology.num_partitions, "topology_inferred": inferred,
              "collectives": collectives}
    return FileVerdict(path, "accepted", line, _collective_table(collectives), record)


def _collective_table(collectives: list[dict]) -> list[str]:
    """The collectives as a rich table, rendered to lines (none without collectives)."""
    if not collectives:
        return []
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(collectives)} collectives", title_justify="left")
    for column in ("instruction", "opcode", "group mode", "groups (flattened device ids)"):
        table.add_column(column)
    for rec in collectives:
        if "participant_groups" in rec and rec["participant_groups"] is None:
            groups = (f"{rec['replica_groups']} (not listed: more than {MAX_LISTED_DEVICES} "
                      "devices)")
        elif "participant_groups" in rec:
            groups = _short_groups(rec["participant_groups"])
        else:
            groups = ("pairs " + _short_groups(rec["source_target_pairs"])
                      if rec["source_target_pairs"] else "no pairs: every device receives zeros")
        table.add_row("%" + rec["instruction"], rec["opcode"], rec["group_mode"], groups)
    console = Console(width=120)
    with console.capture() as capture:
        console.print(table)
    return capture.get().rstrip("\n").split("\n")


def _short_groups(groups: list[list[int]], limit: int = 8) -> str:
    text = ", ".join("{" + ",".join(map(str, g)) + "}" for g in groups[:limit])
    return text + (f", ... ({len(groups)} in all)" if len(groups) > limit else "")


def _summary(verdicts: list[FileVerdict], unreadable: int) -> dict:
    counts = {status: sum(v.status == status for v in verdicts)
              for status in ("accepted", "rejected", "unparsable")}
    counts["unreadable"] = unreadable
    counts["files"] = len(verdicts) + unreadable
    return counts


def _check(args: argparse.Namespace) -> int:
    files = module_files(args.paths)
    verdicts: list[FileVerdict] = []
    unreadable = 0
    single = len(files) == 1 and not any(os.path.isdir(p) for p in args.paths)
    for path in files:
        try:
            verdict = check_file(path, args)
        except (OSError, UnicodeDecodeError, ProtoError) as exc:
            if single:
                raise
            unreadable += 1
            if isinstance(exc, UnicodeDecodeError):
                message = f"{path}: not UTF-8 text"
            else:
                message = error_message(exc)
            print(f"neuron-sim: error: {message}", file=sys.stderr)
            continue
        verdicts.append(verdict)
        if not args.json:
            print(verdict.line)
            if single:
                for extra in verdict.detail:
                    print(extra)
    summary = _summary(verdicts, unreadable)
    if args.json:
        print_json(verdicts[0].record if single else
                   {"files": [v.record for v in verdicts], "summary": summary})
    elif not single:
        print(f"{summary['files']} files: {summary['accepted']} accepted, "
              f"{summary['rejected']} rejected, {summary['unparsable']} unparsable"
              + (f", {unreadable} unreadable" if unreadable else ""))
    if unreadable:
        return EXIT_USAGE
    return EXIT_OK if summary["accepted"] == len(verdicts) else EXIT_PROBLEM


def add_check_command(subparsers: argparse._SubParsersAction) -> None:
    check = add_command(
        subparsers, "check", handler=_check, module=None,
        help="parse and verify modules (files or dump directories); summarize collectives",
        description="Parse each PATH (an HLO file, or a directory such as an XLA "
                    "--xla_dump_to folder), verify shapes and replica groups (XLA's rules), "
                    "and print one line per module; a single module also gets its "
                    "collectives with their group modes. Exit 0: all accepted; 1: a module "
                    "is rejected or does not parse; 2: bad usage or an unreadable path.")
    check.add_argument("paths", metavar="PATH", nargs="+",
                       help="an HLO file or a directory of them")
    check.add_argument("--allow-mixed-precision", action="store_true",
                       help="let floating-point types of different precisions meet in one "
                            "instruction (XLA's HloVerifier allow_mixed_precision)")
    add_json_argument(check)
