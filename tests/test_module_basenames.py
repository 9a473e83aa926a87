"""pytest imports test files without packages by their basename (rootdir-relative "rootdir"
import mode), so two test (or helper) files with one basename stop the whole run at collection
("import file mismatch") in a fresh checkout, though a warm cache may hide it; conftest.py
files are imported per directory and may repeat."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_basename() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "data" in path.relative_to(TESTS).parts or path.name in ("__init__.py", "conftest.py"):
            continue
        seen[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
