"""Reading the attribute text the parser keeps as written (``frontend_attributes``,
``sharding``, ``origin``, a computation's trailing ``execution_thread``): the rules that judge
those attributes parse what they need here, so the parser stays a parser of syntax.
"""

from __future__ import annotations

import re
from typing import Any

from neuron_sim.hlo.attributes import Raw
from neuron_sim.hlo.ir import HloComputation

MAIN_THREAD = "main"
"""XLA's HloInstruction::kMainExecutionThread: the thread of a computation that names none."""

_EXECUTION_THREAD = re.compile(r'execution_thread\s*=\s*"([^"]*)"')


def raw_text(value: Any) -> str:
    """An attribute value as its text."""
    return value.text if isinstance(value, Raw) else str(value)


def split_top_level(text: str) -> list[str]:
    """The comma-separated items of ``{a, b, ...}`` that are not nested in brackets or quotes;
    ValueError if ``text`` is not braced."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise ValueError(text)
    inner = inner[1:-1]
    items, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(inner):
        if ch == '"' and (i == 0 or inner[i - 1] != "\\"):
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    return [item.strip() for item in items if item.strip()]


def unquote(text: str) -> str:
    """A quoted HLO string's value (``"a\\"b"`` -> ``a"b``); unquoted text as it is."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def frontend_attributes(value: Any) -> dict[str, str]:
    """``frontend_attributes={k="v", d={...}}`` as a map: quoted values unquoted, braced ones
    kept as their text (XLA's ParseFrontendAttributes keeps a JSON-like dict as written).
    ValueError if the text is not of that form."""
    result: dict[str, str] = {}
    for item in split_top_level(raw_text(value)):
        key, sep, rest = item.partition("=")
        if not sep:
            raise ValueError(item)
        result[key.strip()] = unquote(rest)
    return result


def execution_thread(comp: HloComputation) -> str | None:
    """The ``execution_thread="..."`` written after the computation's closing brace, if any."""
    match = _EXECUTION_THREAD.search(comp.trailing or "")
    return match.group(1) if match else None
