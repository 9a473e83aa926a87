"""docs/passes.md's two tables — the passes and their options — written from the pass classes.

Each row is what its class declares (``HloPass``: ``name``, ``seed_says``, ``seed_status``,
``our_reading``, ``contract``, ``known_unsafety``, ``options``), in the registry's order, so
the page cannot drift from the code: a test holds the committed page equal to what this module
writes. After changing a pass's declarations, rewrite the page::

    python -m neuron_sim.passes.docs_tables            # rewrites docs/passes.md
    python -m neuron_sim.passes.docs_tables --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from neuron_sim.passes.base import HloPass
from neuron_sim.passes.options import PassOption
from neuron_sim.passes.registry import BUILTIN_PASSES

PASSES_HEADING = "## The passes"
OPTIONS_HEADING = "### Options"
PASSES_COLUMNS = ("pass", "registry key", "what the seed says", "seed status", "our reading",
                  "contract", "known unsafety")
OPTIONS_COLUMNS = ("option", "type", "default", "what it does")
NO_READING = "—"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [_row(columns), "|" + "---|" * len(columns)] + [_row(row) for row in rows]


def pass_row(cls: type[HloPass]) -> list[str]:
    """The cells of ``cls``'s row in the passes table. Raises ValueError for a pass that does
    not say what its seed says or what is known to be unsafe about it."""
    for attribute in ("seed_says", "known_unsafety"):
        if not getattr(cls, attribute):
            raise ValueError(f"pass {cls.name or cls.__name__} declares no {attribute} for its "
                             "row in docs/passes.md")
    return [f"`{cls.__name__}`", f"`{cls.name}`", cls.seed_says, str(cls.seed_status),
            cls.our_reading or NO_READING, cls.contract.name, cls.known_unsafety]


def default_text(value: Any) -> str:
    """An option's default as the table shows it: ``unset`` for None, ``true``/``false``,
    a sequence comma-separated (``none`` when empty)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def option_row(cls: type[HloPass], option: PassOption) -> list[str]:
    """The cells of one declared option's row in the options table."""
    return [f"`{cls.name}.{option.name}`", option.type_name, default_text(option.default),
            option.help]


def passes_table(classes: Sequence[type[HloPass]] = BUILTIN_PASSES) -> list[str]:
    """The passes table's lines, one row per class, in order."""
    return _table(PASSES_COLUMNS, [pass_row(cls) for cls in classes])


def options_table(classes: Sequence[type[HloPass]] = BUILTIN_PASSES) -> list[str]:
    """The options table's lines: every declared option, the passes in order."""
    return _table(OPTIONS_COLUMNS, [option_row(cls, option) for cls in classes
                                    for option in cls.options])


def _replace_table(lines: list[str], heading: str, table: list[str]) -> list[str]:
    """``lines`` with the first table after the line ``heading`` replaced by ``table``."""
    if heading not in lines:
        raise ValueError(f"docs/passes.md has no heading {heading!r}")
    start = lines.index(heading) + 1
    while start < len(lines) and not lines[start].startswith("|"):
        if lines[start].startswith("#"):
            raise ValueError(f"no table under {heading!r} in docs/passes.md")
        start += 1
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[:start] + table + lines[end:]


def with_tables(text: str, classes: Sequence[type[HloPass]] = BUILTIN_PASSES) -> str:
    """``text`` (docs/passes.md) with its options and passes tables written from ``classes``."""
    lines = text.split("\n")
    lines = _replace_table(lines, OPTIONS_HEADING, options_table(classes))
    lines = _replace_table(lines, PASSES_HEADING, passes_table(classes))
    return "\n".join(lines)


def docs_tables_command(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neuron_sim.passes.docs_tables",
                                     description="Write docs/passes.md's passes and options "
                                                 "tables from the pass classes.")
    parser.add_argument("page", nargs="?", default="docs/passes.md",
                        help="the page to rewrite (default: docs/passes.md)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if the page's tables are out of date")
    args = parser.parse_args(argv)
    page = Path(args.page)
    text = page.read_text(encoding="utf-8")
    written = with_tables(text)
    if args.check:
        if written != text:
            print(f"{page}: the pass tables are out of date; run python -m "
                  "neuron_sim.passes.docs_tables", file=sys.stderr)
            return 1
        return 0
    if written != text:
        page.write_text(written, encoding="utf-8")
        print(f"rewrote the pass tables of {page}")
    return 0


if __name__ == "__main__":
    sys.exit(docs_tables_command())
