"""The import direction of ARCHITECTURE.md: neuron_sim (except cli) <- interpreter, passes <- verify
<- neuron_sim/cli.py. passes must not import interpreter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("neuron_sim", "interpreter", "passes", "verify")
# What each package may import from the others.
ALLOWED = {
    "neuron_sim": {"neuron_sim"},
    "interpreter": {"neuron_sim", "interpreter"},
    "passes": {"neuron_sim", "passes"},
    "verify": {"neuron_sim", "interpreter", "passes", "verify"},
}
EXEMPT = {Path("neuron_sim/cli.py")}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & set(PACKAGES)


SOURCES = [p.relative_to(ROOT) for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


@pytest.mark.parametrize("path", SOURCES, ids=str)
def test_module_imports_only_packages_upstream_of_it(path: Path):
    if path in EXEMPT:
        return
    package = path.parts[0]
    forbidden = imported_packages(ROOT / path) - ALLOWED[package]
    assert not forbidden, f"{path} imports {sorted(forbidden)}, against ARCHITECTURE.md's direction"


def test_the_rule_catches_a_violation(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom interpreter.evaluator import run\n")
    assert imported_packages(bad) - ALLOWED["passes"] == {"interpreter"}
