"""Every document the code, scripts, tests and docs cite exists in this repository.

A citation is a repository path to a Markdown page (``docs/<page>.md``, ``README.md``) or, in
the documents, to a source file (``neuron_sim/...py``, or short as ``passes/base.py``). (XLA's
own sources are cited by their paths in XLA, ``xla/...``, which are not this repository's.)
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md|README\.md|[A-Z]+\.md)\b")


def cited() -> dict[str, list[str]]:
    """Cited path -> the files citing it."""
    found: dict[str, list[str]] = {}
    sources = [*ROOT.glob("neuron_sim/**/*.py"), *ROOT.glob("scripts/**/*.py"),
               *ROOT.glob("tests/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md",
               ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
    for path in sources:
        if "data" in path.relative_to(ROOT).parts[:2]:
            continue
        for match in CITATION.finditer(path.read_text(errors="replace")):
            found.setdefault(match.group(1), []).append(str(path.relative_to(ROOT)))
    return found


def test_the_scan_finds_the_citations_it_is_meant_to():
    citations = cited()
    assert "docs/semantics.md" in citations and "docs/architecture.md" in citations


def test_every_cited_document_exists():
    missing = {name: sorted(set(where))[:5] for name, where in cited().items()
               if not (ROOT / name).is_file()}
    assert not missing, f"cited but not in the repository: {missing}"


SOURCE = re.compile(r"`([\w/.-]+\.py)`")


def test_every_source_file_the_documents_name_exists():
    """docs/*.md and README.md name source files by repository path or by the tail of one (a
    section about passes says ``base.py``): each must be the tail of a file in the repository,
    so a moved or renamed module cannot leave a document pointing at nothing."""
    files = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if ".git" not in p.parts]
    missing = {}
    for doc in [*ROOT.glob("docs/*.md"), ROOT / "README.md"]:
        for match in SOURCE.finditer(doc.read_text()):
            name = match.group(1).lstrip("./")
            if not any(f == name or f.endswith("/" + name) for f in files):
                missing.setdefault(name, set()).add(doc.name)
    assert not missing, f"documents name source files that do not exist: {missing}"
