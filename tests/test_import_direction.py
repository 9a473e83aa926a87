"""The import rules of docs/architecture.md, module by module.

Everything lives in the ``neuron_sim`` package; its layers, bottom up:

* the core (``neuron_sim.hlo``, ``topology``, ``semantics``, ``numerics``, ``io`` ... everything
  not named below) imports only the core;
* ``neuron_sim.proofs.index`` (index arithmetic as z3 terms) imports the core;
* ``neuron_sim.interpreter`` imports the core;
* ``neuron_sim.passes`` imports the core and ``proofs.index`` -- never the interpreter;
* ``neuron_sim.proofs.symbolic`` (the interpreter on symbols) imports the core and the interpreter;
* the rest of ``neuron_sim.proofs`` imports all of the above;
* ``neuron_sim.verify`` imports all of the above;
* ``neuron_sim.cli`` sits on top: nothing imports it.

No import cycle between any two modules, counting imports inside functions and
``importlib.import_module("literal")`` calls (a cycle hidden in a function body is still a cycle).

A module's edges are what it names: ``import a.b`` and ``from a import b`` (when ``a/b`` is a
module) point at ``a.b``; ``from a.b import name`` points at ``a.b``. The implicit import of a
parent package (``import a.b`` runs ``a/__init__``) is not an edge, since it is Python's, not the
author's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("neuron_sim",)
TOP = "neuron_sim.cli"
# Layers by module prefix, most specific first; a module is in the first layer whose prefix it has.
LAYERS = (
    ("neuron_sim.cli", "cli"),
    ("neuron_sim.verify", "verify"),
    ("neuron_sim.proofs.index", "proofs.index"),
    ("neuron_sim.proofs.symbolic", "proofs.symbolic"),
    ("neuron_sim.proofs", "proofs"),
    ("neuron_sim.passes", "passes"),
    ("neuron_sim.interpreter", "interpreter"),
    ("neuron_sim", "core"),
)
# What each layer may import.
ALLOWED = {
    "core": {"core"},
    "proofs.index": {"core", "proofs.index"},
    "interpreter": {"core", "interpreter"},
    "passes": {"core", "proofs.index", "passes"},
    "proofs.symbolic": {"core", "interpreter", "proofs.symbolic"},
    "proofs": {"core", "proofs.index", "interpreter", "passes", "proofs.symbolic", "proofs"},
    "verify": {"core", "proofs.index", "interpreter", "passes", "proofs.symbolic", "proofs",
               "verify"},
}


def layer_of(module: str) -> str:
    """The layer of ``module`` (a dotted name inside ``neuron_sim``)."""
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise ValueError(f"{module} is outside the neuron_sim package")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_modules(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """The modules of ``known`` that the module at ``path`` imports (anywhere in its body)."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path, root)
    package = here if _is_package(path) else here.rpartition(".")[0]
    targets: set[str] = set()

    def add(name: str) -> None:
        # The longest known prefix: `a.b.c` where only `a.b` is a module means `a.b`.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            targets.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                child = f"{origin}.{alias.name}"
                add(child if child in known else origin)
        elif isinstance(node, ast.Call) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                add(node.args[0].value)
    targets.discard(here)
    return targets


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}
    known = set(files)
    return {name: imported_modules(path, known, root) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for succ in edges:
                if succ not in graph:
                    continue
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


GRAPH = import_graph()


@pytest.mark.parametrize("module", sorted(GRAPH), ids=str)
def test_module_imports_only_packages_upstream_of_it(module: str):
    if module == TOP:
        return
    layer = layer_of(module)
    forbidden = sorted(m for m in GRAPH[module] if layer_of(m) not in ALLOWED[layer])
    assert not forbidden, f"{module} ({layer}) imports {forbidden}, against docs/architecture.md"


def test_nothing_imports_the_command_line_on_top():
    importers = sorted(m for m, targets in GRAPH.items() if TOP in targets)
    assert not importers, f"{importers} import {TOP}, which must sit on top of everything"


def test_no_import_cycle_between_modules():
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    known = {module_name(tmp_path / n, tmp_path) for n in files}
    return {module_name(tmp_path / n, tmp_path): imported_modules(tmp_path / n, known, tmp_path)
            for n in files}


def test_the_rules_see_function_level_relative_and_importlib_imports(tmp_path: Path):
    graph = _tree(tmp_path, {
        "passes/__init__.py": "",
        "passes/a.py": "def f():\n    from passes.b import g\n",
        "passes/b.py": "import importlib\nimportlib.import_module('passes.c')\n",
        "passes/c.py": "from . import a\nfrom interpreter.evaluator import run\n",
        "interpreter/__init__.py": "",
        "interpreter/evaluator.py": "",
    })
    assert graph["passes.a"] == {"passes.b"}
    assert graph["passes.b"] == {"passes.c"}
    assert graph["passes.c"] == {"passes.a", "interpreter.evaluator"}
    assert cycles(graph) == [["passes.a", "passes.b", "passes.c"]]


def test_a_package_init_and_its_own_modules_are_no_cycle_unless_named(tmp_path: Path):
    graph = _tree(tmp_path, {
        "verify/__init__.py": "from verify.api import check\n",
        "verify/api.py": "from verify.result import R\n",
        "verify/result.py": "",
    })
    assert cycles(graph) == []
    graph["verify.result"].add("verify")
    assert cycles(graph) == [["verify", "verify.api", "verify.result"]]


def test_the_cli_starts_without_z3():
    """z3 takes a tenth of a second to import and only the proofs use it (issue 18's start-up
    goal): importing the CLI, with every command and every registered pass, must not load it."""
    import subprocess
    import sys

    code = "import sys, neuron_sim.cli; print('z3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_every_module_imports_first_in_a_fresh_interpreter():
    """Any module can be the first a program imports: ``from neuron_sim.topology import
    Topology`` once failed with a circular import through ``neuron_sim.hlo``'s package init,
    which the module graph above does not see (a package's ``__init__`` runs implicitly).
    Every module below ``proofs`` and ``verify`` (those two import nearly everything and cost
    most of a minute together; the command line imports them after the rest)."""
    import subprocess
    import sys

    code = (
        "import importlib, sys\n"
        f"names = {sorted(m for m in GRAPH if layer_of(m) not in ('proofs', 'verify'))!r}\n"
        "bad = []\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] == 'neuron_sim']:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {exc!r}')\n"
        "print('\\n'.join(bad))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    assert not done.stdout.strip(), done.stdout
