"""The ``prove`` subcommand: z3 proofs of the all-reduce + dynamic-slice fold.

    neuron-sim prove MODULE.hlo [--replicas R] [--partitions P] [--device-assignment ...] [--json]
    neuron-sim prove --pools [--max-devices N] [--no-replay] [--json]

For every all-reduce + dynamic-slice pair of MODULE (also across fusion boundaries) it proves
that folding it into a reduce-scatter is sound on every device of the topology, or names the
smallest device that would read the wrong shard, and says whether each seed matcher accepts
the pair. ``--pools`` prints the constant-pool theorems of the seed's multiple-groups matcher:
per pool and group layout, the verdict for all G, g, s (G*g <= N), the smallest witness
(G, g, s, device) replayed through the interpreter, and the proven exact soundness condition.

Exit codes: 0 every pair (every pool) proven sound, 1 any refuted, 2 bad usage or input,
3 FAILED_TO_PROVE (an offset outside the index sub-language, or z3 gave up) and none refuted.
"""

from __future__ import annotations

import argparse
from typing import Any

from neuron_sim.commands import (EXIT_OK, EXIT_PROBLEM, UsageError, add_command,
                                 add_json_argument, module_and_topology, print_json)

EXIT_PROVEN = EXIT_OK
EXIT_REFUTED = EXIT_PROBLEM
EXIT_FAILED_TO_PROVE = 3


def add_prove_command(subparsers: argparse._SubParsersAction) -> None:
    prove = add_command(
        subparsers, "prove", handler=run_prove, module_nargs="?",
        help="prove with z3 that all-reduce + dynamic-slice folds are sound",
        description="Prove, for every all-reduce + dynamic-slice pair of MODULE.hlo, that "
                    "folding it into a reduce-scatter is sound on every device (or give the "
                    "device that reads the wrong shard), and say whether the seed matchers "
                    "accept it. With --pools, prove or refute the seed multiple-groups "
                    "matcher's constant pools for symbolic group count, width and shard.",
        epilog="exit codes: 0 proven, 1 refuted (with a witness device), 2 bad usage or "
               "input, 3 FAILED_TO_PROVE")
    prove.add_argument("--pools", action="store_true",
                       help="the constant-pool theorems instead of a module")
    prove.add_argument("--max-devices", type=int, default=4096, metavar="N",
                       help="--pools: bound on G*g (default 4096)")
    prove.add_argument("--no-replay", action="store_true",
                       help="--pools: do not replay refutations through the interpreter")
    add_json_argument(prove)


def run_prove(args: argparse.Namespace) -> int:
    if args.pools:
        if args.module:
            raise UsageError("give either MODULE.hlo or --pools, not both")
        return _prove_pools(args)
    if not args.module:
        raise UsageError("prove needs MODULE.hlo (or --pools)")
    return _prove_module(args)


# --- a module --------------------------------------------------------------------------------

def _prove_module(args: argparse.Namespace) -> int:
    from neuron_sim.proofs.index.ar_ds_pairs import find_ar_ds_pairs
    from neuron_sim.proofs.index.fold_proof import FoldStatus, pair_group_mode, prove_pair
    from neuron_sim.proofs.seed_matchers import seed_matches

    module, topology = module_and_topology(args)
    records = []
    for pair in find_ar_ds_pairs(module):
        proof = prove_pair(pair, topology)
        records.append((pair, proof, seed_matches(pair), pair_group_mode(pair)))
    statuses = [proof.status for _, proof, _, _ in records]
    code = (EXIT_REFUTED if FoldStatus.REFUTED in statuses
            else EXIT_FAILED_TO_PROVE if FoldStatus.FAILED_TO_PROVE in statuses else EXIT_PROVEN)
    counts = {str(s): statuses.count(s) for s in FoldStatus}
    if args.json:
        print_json({"module": module.name, "file": args.module, "topology": str(topology),
                    "devices": topology.num_devices,
                    "pairs": [{**proof.to_json(),
                               "seed_matchers": [m.to_json() for m in matches]}
                              for _, proof, matches, _ in records],
                    "summary": counts, "exit_code": code})
        return code
    noun = "pair" if len(records) == 1 else "pairs"
    print(f"{args.module}: {len(records)} all-reduce + dynamic-slice {noun}, topology "
          f"{topology} ({topology.num_devices} devices)")
    for pair, proof, matches, mode in records:
        print(f"  {pair.name}: dimension {pair.slice_dim}, shard {pair.slice_size} of "
              f"{pair.full}, {mode} groups {_groups_text(pair)}")
        print(f"    {proof.status}: {proof.reason} ({proof.seconds * 1000:.0f} ms)")
        if proof.witness is not None:
            print(f"    witness: {proof.witness.describe()}")
        for match in matches:
            verdict = "accepts" if match.accepted else "rejects"
            print(f"    seed {match.key}: {verdict}"
                  + ("" if match.accepted else f" ({match.reason})"))
    print(f"Summary: {counts['PROVEN']} proven, {counts['REFUTED']} refuted, "
          f"{counts['FAILED_TO_PROVE']} failed to prove")
    return code


def _groups_text(pair: Any, limit: int = 4) -> str:
    groups = pair.all_reduce.replica_groups
    if groups is None or groups.is_empty:
        return "{}"
    shown = groups.groups[:limit]
    text = ",".join("{" + ",".join(map(str, g[:8])) + (",..." if len(g) > 8 else "") + "}"
                    for g in shown)
    return "{" + text + (f",... ({len(groups.groups)} groups)" if len(groups.groups) > limit
                         else "") + "}"


# --- the pools -------------------------------------------------------------------------------

def _prove_pools(args: argparse.Namespace) -> int:
    from neuron_sim.proofs.pools import pool_table, prove_lemmas

    if not 1 <= args.max_devices <= 8191:
        raise UsageError(f"--max-devices must be between 1 and 8191, not {args.max_devices}")
    lemmas = prove_lemmas()
    if not all(lemmas.values()):
        raise RuntimeError("a lemma of the pool model failed: " + ", ".join(
            name for name, ok in lemmas.items() if not ok))
    rows = pool_table(max_devices=args.max_devices)
    replays = {}
    if not args.no_replay:
        from neuron_sim.proofs.replay import replay_pool_witness
        for row in rows:
            if row.verdict.witness is not None:
                replays[(row.pool, row.layout)] = replay_pool_witness(
                    row.pool, row.layout, row.verdict.witness)
    refuted = any(not row.verdict.proven for row in rows)
    unproven = [row for row in rows if not row.characterization.holds]
    disagreements = [key for key, replay in replays.items() if not replay.agrees]
    code = EXIT_REFUTED if refuted else EXIT_PROVEN
    if unproven or disagreements:
        code = EXIT_FAILED_TO_PROVE if not refuted else code
    if args.json:
        data = []
        for row in rows:
            item = row.to_json()
            replay = replays.get((row.pool, row.layout))
            if replay is not None:
                item["replay"] = {"seed_accepts": replay.seed_accepts,
                                  "mismatching_devices": list(replay.mismatching[:16]),
                                  "agrees": replay.agrees}
            data.append(item)
        print_json({"max_devices": args.max_devices, "model": _MODEL_TEXT, "rows": data,
                    "exit_code": code})
        return code
    _print_pool_table(rows, replays, args.max_devices)
    for row in unproven:
        print(f"WARNING: the stated condition for {row.pool}/{row.layout} was not proven: "
              f"{row.characterization}")
    for pool, layout in disagreements:
        print(f"WARNING: z3 and the interpreter disagree on {pool}/{layout}: "
              f"{replays[(pool, layout)]}")
    return code


_MODEL_TEXT = ("1 replica, G*g partitions, use_global_device_ids=true; G groups of width g "
               "(contiguous {k*g..k*g+g-1} or strided {k, k+G, ...}); shard s, extent g*s "
               "<= 2^31-1; offset = s32(s * POOL[partition-id]), dynamic-slice clamp exact")


def _print_pool_table(rows: list, replays: dict, max_devices: int) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"Constant pools of the multiple-groups matcher, G*g <= {max_devices}",
                  title_justify="left", caption=escape(_MODEL_TEXT), caption_justify="left")
    for column in ("pool", "layout", "verdict", "smallest witness (G, g, s, device)",
                   "replayed", "sound exactly when (proven)", "time"):
        table.add_column(column)
    for row in rows:
        witness = row.verdict.witness
        replay = replays.get((row.pool, row.layout))
        table.add_row(
            row.pool, str(row.layout), row.status,
            (f"({witness.groups}, {witness.width}, {witness.slice_size}, {witness.device}): "
             f"reads {witness.clamped}, block at {witness.expected}") if witness else "-",
            "-" if replay is None else ("agrees" if replay.agrees else "DISAGREES"),
            row.sound_when + ("" if row.characterization.holds else " (NOT PROVEN)"),
            f"{row.seconds:.1f}s")
    Console(width=160).print(table)

