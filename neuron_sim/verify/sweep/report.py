"""What ``neuron-sim sweep`` reports: per-pass counts, the findings the sweep exists to show,
the JSON document and the heatmap.

The findings are checked claims, each with its evidence (a witness case) or its counterexample:

* the single-group seed matcher folds unsoundly on unsorted groups, and on topologies with
  several replicas;
* the multiple-groups seed matcher's soundness on the constant-pool cases is exactly the region
  the pool theorems state (``pool_theorems.CHARACTERIZATIONS``, evaluated on each case's G, g,
  s);
* XLA's ReduceScatterCreator never folds unsoundly;
* the proven fold never folds unsoundly and fires on every case where XLA's does (and on more);
* z3 and the differential verifier agree on every verdict.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from neuron_sim.lazy import LazyModule
from neuron_sim.verify.sweep.generator import PRESETS, Case, Skip
from neuron_sim.verify.sweep.runner import OUTCOMES, CaseResult
from neuron_sim.proofs.pools import CHARACTERIZATIONS, BitVecModel, GroupLayout

z3 = LazyModule("z3")

SEED_SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"
SEED_MULTIPLE = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"
XLA = "xla_reduce_scatter_creator"
PROVEN = "rewrite_all_reduce_dynamic_slice_proven"
OUTCOME_TITLES = {"fired_sound": "fired & sound", "fired_unsound": "fired & UNSOUND",
                  "missed": "missed although sound", "declined_unsound": "declined & unsound",
                  "error": "the pass raised"}


def pass_counts(results: Sequence[CaseResult], key: str) -> dict[str, int]:
    """``{"fired", "sound", "unsound", "missed"}`` and every outcome's count for one pass."""
    outcomes = collections.Counter(r.passes[key].outcome for r in results if key in r.passes)
    counts = {"fired": outcomes["fired_sound"] + outcomes["fired_unsound"],
              "sound": outcomes["fired_sound"], "unsound": outcomes["fired_unsound"],
              "missed": outcomes["missed"]}
    return {**counts, **{name: outcomes[name] for name in OUTCOMES}}


# --------------------------------------------------------------------------------------------
# The pool theorems, evaluated on a case.


def theorem_says_sound(pool: str, layout: GroupLayout, groups: int, width: int,
                       slice_size: int) -> bool:
    """The proven soundness condition of ``pool`` on ``layout`` at concrete G, g, s."""
    model = BitVecModel()
    condition = CHARACTERIZATIONS[(pool, layout)].condition(model)
    concrete = z3.substitute(condition, (model.G, model.id_value(groups)),
                             (model.g, model.id_value(width)),
                             (model.s, z3.BitVecVal(slice_size, 32)))
    value = z3.simplify(concrete)
    if not (z3.is_true(value) or z3.is_false(value)):
        raise ValueError(f"the {pool}/{layout} condition does not evaluate at G={groups}, "
                         f"g={width}, s={slice_size}")
    return z3.is_true(value)


def pool_theorem_case(case: Case) -> tuple[str, GroupLayout, int, int] | None:
    """(pool, layout, G, g) when the case is inside the pool theorems' model (one replica,
    G*g partitions, FlattenedID, contiguous or strided groups, an unfused pool offset, dimension
    0, a shard that tiles the extent), else None."""
    if not case.offset_form.startswith("pool_") or case.fused or case.replicas != 1 \
            or case.mode != "flattened" or case.slice_dim != 0 or case.assignment != "default":
        return None
    layout = {"one": GroupLayout.CONTIGUOUS, "contiguous": GroupLayout.CONTIGUOUS,
              "strided": GroupLayout.STRIDED}.get(case.layout)
    groups = case.replica_groups.groups
    if layout is None or not groups or not case.replica_groups.explicit:
        return None
    width = len(groups[0])
    if width * case.slice_size != case.full or len(groups) * width != case.partitions:
        return None
    return case.offset_form[len("pool_"):], layout, len(groups), width


# --------------------------------------------------------------------------------------------
# Findings.


@dataclass
class Claim:
    """A claim about the passes, whether this sweep's cases bear it out, and the evidence."""

    claim: str
    holds: bool | None          # None: the sweep has no case that could show it
    evidence: str

    def to_json(self) -> dict[str, Any]:
        return {"claim": self.claim, "holds": self.holds, "evidence": self.evidence}


def _witness_text(result: CaseResult, key: str) -> str:
    judgement = result.passes[key].judgement
    witness = (judgement.witness or {}) if judgement is not None else {}
    z3_witness = witness.get("z3")
    if z3_witness and "offset" in z3_witness:
        text = (f"device {z3_witness['device']} (replica {z3_witness['replica']}, partition "
                f"{z3_witness['partition']}) reads from {z3_witness['clamped_start']} "
                f"(offset {z3_witness['offset']}), its block starts at "
                f"{z3_witness['expected_start']}")
    elif z3_witness and "reduce_scatter_group" in z3_witness:
        text = (f"device {z3_witness['device']}: the reduce-scatter reduces over "
                f"{_short(z3_witness['reduce_scatter_group'])}, the all-reduce over "
                f"{_short(z3_witness['all_reduce_group'])}")
    else:
        text = judgement.detail if judgement is not None else ""
    diff = witness.get("differential")
    if diff:
        text += f"; the verifier sees device {diff['device']} differ"
    return f"{result.case.id}: {text}"


def _short(group: Sequence[int], limit: int = 6) -> str:
    return "{" + ",".join(map(str, group[:limit])) + (",..." if len(group) > limit else "") + "}"


def _unsound_example(results: Sequence[CaseResult], key: str, where: Any) -> Claim | None:
    cases = [r for r in results if key in r.passes and where(r.case)]
    if not cases:
        return None
    bad = [r for r in cases if r.passes[key].outcome == "fired_unsound"]
    evidence = (f"{len(bad)} of {len(cases)} such cases folded unsoundly; e.g. "
                + _witness_text(bad[0], key)) if bad else f"none of {len(cases)} cases"
    return Claim("", bool(bad), evidence)


def findings(results: Sequence[CaseResult], passes: Sequence[str]) -> list[Claim]:
    """The sweep's checked claims (see the module docstring)."""
    found: list[Claim] = []

    def claim(text: str, finding: Claim | None) -> None:
        if finding is None:
            found.append(Claim(text, None, "no case in this sweep can show it"))
        else:
            finding.claim = text
            found.append(finding)

    if SEED_SINGLE in passes:
        claim("the single-group seed matcher folds unsoundly on unsorted groups",
              _unsound_example(results, SEED_SINGLE, lambda c: c.layout == "unsorted"))
        claim("the single-group seed matcher folds unsoundly on multi-replica topologies",
              _unsound_example(results, SEED_SINGLE, lambda c: c.replicas > 1))
    if SEED_MULTIPLE in passes:
        claim("each constant pool's soundness region equals the z3 pool theorems",
              _pool_region(results))
    for key, name in ((XLA, "XLA's ReduceScatterCreator"), (PROVEN, "the proven fold")):
        if key in passes:
            counts = pass_counts(results, key)
            bad = [r for r in results if r.passes[key].outcome == "fired_unsound"]
            evidence = f"{counts['fired']} folds, {counts['unsound']} unsound" + (
                f"; e.g. {_witness_text(bad[0], key)}" if bad else "")
            found.append(Claim(f"{name} never folds unsoundly", not bad, evidence))
    if XLA in passes and PROVEN in passes:
        xla_only = [r for r in results if r.passes[XLA].fired and not r.passes[PROVEN].fired]
        proven_only = [r for r in results
                       if r.passes[PROVEN].fired and not r.passes[XLA].fired]
        evidence = f"it also fires on {len(proven_only)} cases XLA's declines" + (
            f"; XLA's fires alone on {len(xla_only)}, e.g. {xla_only[0].case.id}"
            if xla_only else "")
        found.append(Claim("the proven fold fires on every case where XLA's fires",
                             not xla_only, evidence))
    disagreements = [(r, where) for r in results for where in r.disagreements]
    evidence = f"{sum(1 + len(r.passes) for r in results)} verdicts" + (
        "; DISAGREE on " + ", ".join(f"{r.case.id} ({where})" for r, where in disagreements[:5])
        if disagreements else "")
    undecided = collections.Counter(r.case.offset_form for r in results
                                    if r.reference.z3 == "unknown")
    if undecided:
        evidence += (f"; z3 gave no verdict on {sum(undecided.values())} cases ("
                     + ", ".join(f"{n} {form}" for form, n in undecided.most_common())
                     + "), decided by execution alone")
    found.append(Claim("z3 and the differential verifier agree on every verdict",
                         not disagreements, evidence))
    judgements = [j for r in results
                  for j in (r.reference, *(o.judgement for o in r.passes.values()))
                  if j is not None and j.differential == "sound"]
    sampled = [j for j in judgements if j.proof != "all-inputs"]
    found.append(Claim(
        "every sound differential verdict is proved for all inputs (symbolic execution)",
        not sampled, f"{len(judgements) - len(sampled)} of {len(judgements)} proved for all "
                     "inputs" + (f"; sampled only: {len(sampled)}" if sampled else "")))
    return found


def _pool_region(results: Sequence[CaseResult]) -> Claim | None:
    checked, wrong = 0, []
    for result in results:
        inside = pool_theorem_case(result.case)
        if inside is None or SEED_MULTIPLE not in result.passes:
            continue
        pool, layout, groups, width = inside
        expected = theorem_says_sound(pool, layout, groups, width, result.case.slice_size)
        outcome = result.passes[SEED_MULTIPLE].outcome
        checked += 1
        if outcome not in ("fired_sound", "fired_unsound") or \
                (outcome == "fired_sound") != expected or result.sound != expected:
            wrong.append(f"{result.case.id}: theorem says {'sound' if expected else 'unsound'},"
                         f" the sweep {outcome}")
    if not checked:
        return None
    evidence = (f"{checked - len(wrong)} of {checked} pool cases as the theorems say"
                + (f"; e.g. {wrong[0]}" if wrong else ""))
    return Claim("", not wrong, evidence)


# --------------------------------------------------------------------------------------------
# JSON.


def sweep_json(results: Sequence[CaseResult], skips: Sequence[Skip], passes: Sequence[str],
               seconds: float, *, seed: int, max_devices: int) -> dict[str, Any]:
    """``{"cases": [...], "passes": {KEY: {"fired", "sound", "unsound", "missed", ...}},
    "seconds": s}`` plus the skipped combinations and the findings."""
    return {"cases": [r.to_json() for r in results],
            "passes": {key: pass_counts(results, key) for key in passes},
            "seconds": round(seconds, 3),
            "seed": seed, "max_devices": max_devices,
            "presets": {name: {"cores": p.cores, "cores_per_chip": p.cores_per_chip,
                               "splits": [{"tp": tp, "dp": dp} for tp, dp in p.splits],
                               "source": p.source} for name, p in PRESETS.items()},
            "skipped": [s.to_json() for s in skips],
            "skip_reasons": dict(collections.Counter(s.reason for s in skips).most_common()),
            "findings": [f.to_json() for f in findings(results, passes)]}


# --------------------------------------------------------------------------------------------
# Text.


def print_report(results: Sequence[CaseResult], skips: Sequence[Skip], passes: Sequence[str],
                 seconds: float, console: Any = None) -> None:
    """A table per pass (outcome, cases, where, an example with its witness), the findings
    and a summary line."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console(width=160)
    sound = sum(1 for r in results if r.sound)
    console.print(f"{len(results)} cases ({sound} where the fold is sound), "
                  f"{len(skips)} combinations skipped")
    for key in passes:
        table = Table(title=key, title_justify="left")
        for column in ("outcome", "cases", "layouts", "offset forms"):
            table.add_column(column)
        table.add_column("example", overflow="fold")
        for outcome in OUTCOMES:
            rows = [r for r in results if r.passes[key].outcome == outcome]
            if not rows and outcome == "error":
                continue
            layouts = collections.Counter(r.case.layout for r in rows).most_common(3)
            forms = collections.Counter(r.case.offset_form for r in rows).most_common(3)
            example = ""
            if rows:
                example = (_witness_text(rows[0], key) if outcome == "fired_unsound" else
                           f"{rows[0].case.id}: {rows[0].passes[key].error}"
                           if outcome == "error" else rows[0].case.id)
            table.add_row(OUTCOME_TITLES[outcome], str(len(rows)),
                          ", ".join(f"{n} {c}" for n, c in layouts),
                          ", ".join(f"{n} {c}" for n, c in forms), escape(example))
        console.print(table)
    table = Table(title="findings", title_justify="left")
    for column in ("claim", "holds"):
        table.add_column(column)
    table.add_column("evidence", overflow="fold")
    for finding in findings(results, passes):
        word = {True: "yes", False: "NO", None: "-"}[finding.holds]
        table.add_row(finding.claim, word, escape(finding.evidence))
    console.print(table)
    counts = ", ".join(f"{key}: {c['fired']} fired / {c['unsound']} unsound / "
                       f"{c['missed']} missed" for key in passes
                       for c in [pass_counts(results, key)])
    console.print(f"Summary: {len(results)} cases; {counts}; {seconds:.1f} s")


# --------------------------------------------------------------------------------------------
# The heatmap.

HEAT = {"fired_unsound": 0, "missed": 1, "error": 1, "fired_sound": 2, "declined_unsound": 3}
HEAT_COLORS = ("#d62728", "#ff7f0e", "#2ca02c", "#d9d9d9")
HEAT_LABELS = ("fired & unsound", "missed / error", "fired & sound", "declined & unsound")


def heat_grid(results: Sequence[CaseResult], key: str) -> tuple[list[str], list[str],
                                                                 list[list[float | None]]]:
    """Rows (topologies), columns (offset forms, "+fused" for fused ones) and per cell the worst
    outcome of ``key`` there (``HEAT`` codes; None: no case)."""
    rows = list(dict.fromkeys(r.case.topology_label for r in results))
    columns = list(dict.fromkeys(_column(r.case) for r in results))
    cells: list[list[float | None]] = [[None] * len(columns) for _ in rows]
    row_of = {label: i for i, label in enumerate(rows)}
    column_of = {label: j for j, label in enumerate(columns)}
    for result in results:
        i, j = row_of[result.case.topology_label], column_of[_column(result.case)]
        code = HEAT[result.passes[key].outcome]
        cells[i][j] = code if cells[i][j] is None else min(cells[i][j], code)
    return rows, columns, cells


def _column(case: Case) -> str:
    return case.offset_form + ("+fused" if case.fused else "")


PLOT_FORMATS = ("png", "pdf", "svg")


def plot_format(path: str | Path) -> str | None:
    """The image format a heatmap file name asks for (its suffix), None if not one of
    ``PLOT_FORMATS``."""
    suffix = Path(path).suffix.lower().lstrip(".")
    return suffix if suffix in PLOT_FORMATS else None


def write_heatmap(path: str, results: Sequence[CaseResult], passes: Sequence[str]) -> None:
    """An image (PNG, PDF or SVG by ``path``'s suffix): one panel per pass, topology x offset
    form, coloured by the worst outcome."""
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from neuron_sim.outputs import atomic_write

    grids = [heat_grid(results, key) for key in passes]
    rows = len(grids[0][0]) if grids else 1
    figure, axes = plt.subplots(1, len(passes), squeeze=False,
                                figsize=(4.5 * len(passes), 2 + 0.12 * rows))
    for axis, key, (row_labels, column_labels, cells) in zip(axes[0], passes, grids):
        data = np.array([[np.nan if v is None else v for v in row] for row in cells])
        axis.imshow(data, cmap=ListedColormap(HEAT_COLORS), vmin=-0.5, vmax=3.5,
                    aspect="auto", interpolation="nearest")
        axis.set_title(key, fontsize=7)
        axis.set_xticks(range(len(column_labels)), column_labels, rotation=90, fontsize=5)
        axis.set_yticks(range(len(row_labels)), row_labels,
                        fontsize=max(3.0, min(7.0, 400 / max(rows, 1))))
    figure.legend(handles=[Patch(color=c, label=l) for c, l in zip(HEAT_COLORS, HEAT_LABELS)],
                  loc="lower center", ncol=4, fontsize=7, bbox_to_anchor=(0.5, -0.02))
    buffer = io.BytesIO()
    figure.savefig(buffer, format=plot_format(path), dpi=150, bbox_inches="tight")
    plt.close(figure)
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))
