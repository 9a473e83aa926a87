"""No two library modules define the same public class or function name.

A reader who meets ``Status`` or ``execute`` should not have to ask which one: the names a
module defines at top level without a leading underscore are unique across ``neuron_sim``.
(Methods and re-exports are not definitions here; an import ``from a import X`` in ``b`` is the
same X.)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def public_definitions() -> dict[str, list[str]]:
    """Public top-level function and class name -> the modules that define it."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "neuron_sim").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    return found


def test_the_scan_sees_the_library():
    names = public_definitions()
    assert "HloModule" in names and "check_pass" in names and len(names) > 500


def test_no_public_name_is_defined_in_two_modules():
    twice = {name: where for name, where in public_definitions().items() if len(where) > 1}
    assert not twice, f"defined in more than one module: {twice}"
