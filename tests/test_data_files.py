"""The committed data files (tests/data) carry no path of the machine that generated them.

Generators dump HLO with debug info (XLA's FileNames section, ``source_file=`` in metadata) that
names Python files by absolute path; a checkout elsewhere must not depend on, or leak, those
paths. ``scripts/make_jax_corpus.py`` makes them repo-relative (``scrub_paths``).
"""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
MACHINE_PREFIXES = (b"/work/", b"/tmp/", b"/home/", b"/root/")


def test_no_data_file_holds_an_absolute_path_of_the_generating_machine():
    files = [path for path in sorted(DATA.rglob("*")) if path.is_file()]
    assert len(files) > 100
    offenders = []
    for path in files:
        content = path.read_bytes()
        for prefix in MACHINE_PREFIXES:
            at = content.find(prefix)
            if at >= 0:
                line = content[:at].count(b"\n") + 1
                offenders.append(f"{path.relative_to(DATA)}:{line}: {prefix.decode()}")
                break
    assert not offenders, "absolute machine paths in test data:\n" + "\n".join(offenders)
