"""The registry is one explicit list: complete (every pass class under passes/neuron and
passes/xla), resolvable in a fresh process, and equal to docs/passes.md's tables, which are
written from the pass classes' own declarations (neuron_sim.passes.docs_tables)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import neuron_sim.passes.neuron
import neuron_sim.passes.xla
from neuron_sim.passes import HloPass, get_pass, list_passes, pass_class, pass_keys
from neuron_sim.passes.docs_tables import docs_tables_command as docs_tables_main
from neuron_sim.passes.docs_tables import pass_row, with_tables
from neuron_sim.passes.registry import BUILTIN_PASSES

ROOT = Path(__file__).resolve().parents[2]


def pass_classes_defined_under(package) -> set[type[HloPass]]:
    found: set[type[HloPass]] = set()
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        found |= {cls for _, cls in inspect.getmembers(module, inspect.isclass)
                  if issubclass(cls, HloPass) and cls.__module__ == module.__name__
                  and cls.name}
    return found


def test_every_pass_class_under_neuron_and_xla_is_listed():
    defined = pass_classes_defined_under(neuron_sim.passes.neuron) | pass_classes_defined_under(neuron_sim.passes.xla)
    assert defined == set(BUILTIN_PASSES)
    assert len({cls.name for cls in BUILTIN_PASSES}) == len(BUILTIN_PASSES)


@pytest.mark.parametrize("cls", BUILTIN_PASSES, ids=lambda cls: cls.name)
def test_every_listed_pass_resolves_by_key_and_class_name(cls):
    assert pass_class(cls.name) is cls and pass_class(cls.__name__) is cls
    assert type(get_pass(cls.name)) is cls


def test_every_key_resolves_in_a_fresh_process_without_the_verifier():
    script = ("import sys\nimport neuron_sim.passes as passes\n"
              "keys = passes.pass_keys()\n"
              "[passes.get_pass(k) for k in keys]\n"
              "assert 'rewrite_all_reduce_dynamic_slice_proven' in keys, keys\n"
              "assert not any(m.startswith(('neuron_sim.verify', 'neuron_sim.interpreter')) "
              "for m in sys.modules)\n"
              "print(len(keys))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(pass_keys())


def docs_table_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "passes.md").read_text()
    section = text.split("## The passes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_the_docs_table_lists_exactly_the_registry():
    documented = {(row[0].strip("`"), row[1].strip("`"), row[3], row[5])
                  for row in docs_table_rows()}
    registered = {(info.class_name, info.key, info.seed_status, info.contract)
                  for info in list_passes()}
    assert documented == registered


def test_the_docs_name_every_declared_option():
    text = (ROOT / "docs" / "passes.md").read_text()
    for cls in BUILTIN_PASSES:
        for option in cls.options:
            assert f"`{cls.name}.{option.name}`" in text


# --- the tables are written from the classes -------------------------------------------------

DOCS = ROOT / "docs" / "passes.md"


def test_the_committed_tables_are_the_ones_the_classes_write():
    """docs/passes.md is what ``python -m neuron_sim.passes.docs_tables`` writes: after changing a
    pass's declarations, run it."""
    text = DOCS.read_text(encoding="utf-8")
    assert with_tables(text) == text


@pytest.mark.parametrize("cls", BUILTIN_PASSES, ids=lambda cls: cls.name)
def test_every_pass_declares_its_own_row(cls):
    """Each listed class states the seed's words and the known unsafety itself: a subclass must
    not show its parent's row."""
    assert cls.__dict__.get("seed_says") and cls.__dict__.get("known_unsafety"), cls.__name__


def test_an_edited_row_is_written_back_from_the_class():
    text = DOCS.read_text(encoding="utf-8")
    edited = text.replace("| deletes **every** all-reduce", "| deletes some all-reduces", 1)
    assert edited != text
    assert with_tables(edited) == text


def test_a_pass_without_its_facts_has_no_row():
    class Undocumented(HloPass):
        name = "undocumented"

    with pytest.raises(ValueError, match="undocumented declares no seed_says"):
        pass_row(Undocumented)


def test_the_row_cells_come_from_the_declarations():
    """DeletePermute's row, read off its declarations: class, key, seed status ``faithful``, no
    reading of its own (the dash), contract ``exact``."""
    from neuron_sim.passes.neuron.delete_permute import DeletePermute

    row = pass_row(DeletePermute)
    assert row[:2] == ["`DeletePermute`", "`aws_neuron_delete_permute`"]
    assert row[3:6] == ["faithful", "—", "exact"]


def test_check_says_whether_a_page_is_out_of_date(tmp_path, capsys):
    page = tmp_path / "passes.md"
    page.write_text(DOCS.read_text(encoding="utf-8"), encoding="utf-8")
    assert docs_tables_main([str(page), "--check"]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("| faithful |", "| inferred |", 1),
                    encoding="utf-8")
    assert docs_tables_main([str(page), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert docs_tables_main([str(page)]) == 0
    assert page.read_text(encoding="utf-8") == DOCS.read_text(encoding="utf-8")
