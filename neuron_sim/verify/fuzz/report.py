"""The fuzz campaign's final table and its JSON document.

The table has a row per pass: the count of each class, the distinct failures (by signature)
and the pass's modules per second (modules over the CPU time spent running and verifying that
pass, minimizing included); then one line per distinct failure, and a total line with the
campaign's modules per second of wall time and of CPU time (generation included).
"""

from __future__ import annotations

from neuron_sim.verify.fuzz.runner import CLASSES, Campaign


def campaign_json(campaign: Campaign) -> dict:
    """``{"modules", "seconds", "seed", "passes", "by_pass": {KEY: {class: count, ...,
    "distinct_failures", "modules_per_second"}}, "failures": [...]}``."""
    by_pass = {}
    for name in campaign.passes:
        counts = {klass: campaign.counts[name][klass] for klass in CLASSES}
        spent = campaign.pass_seconds[name]
        by_pass[name] = dict(counts, distinct_failures=campaign.distinct(name),
                             modules_per_second=round(campaign.modules / spent, 1)
                             if spent else None)
    return {"modules": campaign.modules, "seconds": round(campaign.seconds, 3),
            "seed": campaign.seed, "passes": list(campaign.passes),
            "cpu_seconds": round(campaign.cpu_seconds, 3),
            "modules_per_second": round(campaign.modules / campaign.seconds, 1)
            if campaign.seconds else None,
            "modules_per_cpu_second": round(campaign.modules / campaign.cpu_seconds, 1)
            if campaign.cpu_seconds else None,
            "minimize_seconds": round(campaign.minimize_seconds, 3),
            "minimizations": campaign.minimizations,
            "repeats": campaign.repeats, "deferred": campaign.deferred,
            "by_pass": by_pass, "failures": [f.to_json() for f in campaign.failures]}


def campaign_table(campaign: Campaign) -> str:
    """The text report."""
    header = ["pass", *CLASSES, "distinct", "modules/s"]
    rows = [header]
    document = campaign_json(campaign)
    for name, entry in document["by_pass"].items():
        rate = entry["modules_per_second"]
        rows.append([name, *(str(entry[k]) for k in CLASSES), str(entry["distinct_failures"]),
                     "-" if rate is None else f"{rate:.1f}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))) for row in rows]
    if campaign.failures:
        lines.append("")
        lines.append("distinct failures:")
        for f in campaign.failures:
            where = f" -> {f.directory}" if f.directory else ""
            lines.append(f"  {f.pass_name}: {f.klass} ({f.check}), {f.size} instructions "
                         f"(from {f.original_size}), seen {f.count}x, topology {f.topology}: "
                         f"{', '.join(f.shape)}{where}")
    rate = document["modules_per_second"]
    lines.append("")
    cpu_rate = document["modules_per_cpu_second"]
    lines.append(f"{campaign.modules} modules in {campaign.seconds:.1f} s "
                 f"({rate if rate is not None else '-'} modules/s; "
                 f"{campaign.cpu_seconds:.1f} CPU s, "
                 f"{cpu_rate if cpu_rate is not None else '-'} modules per CPU second, "
                 f"{campaign.minimize_seconds:.1f} of them minimizing), seed {campaign.seed}, "
                 f"{sum(f.count for f in campaign.failures)} failures minimized into "
                 f"{len(campaign.failures)} distinct, {campaign.repeats} repeats not minimized"
                 + (f", {campaign.deferred} not minimized (over the budget)" if campaign.deferred
                    else ""))
    return "\n".join(lines)
