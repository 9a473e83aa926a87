"""The corpus the proto tests walk, and the two checks they make (a plain module, imported by
the tests and by ``scripts/make_proto_corpus.py --exceptions``)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data"
PROTO = DATA / "proto"
EXCEPTIONS = PROTO / "EXCEPTIONS.json"
# The committed text corpora whose XLA-serialized forms are under tests/data/proto/<name>/.
SOURCES = {"jax": DATA / "jax", "xla": DATA / "xla", "examples": REPO / "examples",
           "jax_0_12": DATA / "jax_0_12", "torch_xla": DATA / "torch_xla"}


def text_modules() -> list[Path]:
    """Every committed HLO text module: tests/data/**/*.hlo and examples/*.hlo."""
    return sorted(DATA.rglob("*.hlo")) + sorted((REPO / "examples").glob("*.hlo"))


def xla_protos() -> list[tuple[Path, Path]]:
    """(XLA-serialized .pb, the text it was made from) for every file the manifests list."""
    pairs = []
    for name, source in SOURCES.items():
        manifest = PROTO / name / "MANIFEST.json"
        if not manifest.exists():
            continue
        for rel in json.loads(manifest.read_text())["files"]:
            pairs.append((PROTO / name / rel, source / Path(rel).with_suffix(".hlo")))
    return pairs


def round_trip_problem(path: Path) -> str | None:
    """None when text -> IR -> HloModuleProtoWithConfig -> IR gives the same IR (module_key)
    as the text; else the reason. A text the parser refuses is not a module: None."""
    from neuron_sim.hlo.parser import HloParseError, parse_module
    from neuron_sim.hlo.proto import (ProtoError, ProtoWriteError, module_from_bytes,
                                      module_to_bytes)
    from neuron_sim.hlo.proto.compare import first_difference

    try:
        module = parse_module(path.read_text(encoding="utf-8"), str(path))
    except (HloParseError, UnicodeDecodeError):
        return None
    try:
        data = module_to_bytes(module, with_config=True)
    except ProtoWriteError as exc:
        return f"not writable: {exc}".replace(f"{REPO}/", "")[:160]
    try:
        back = module_from_bytes(data, str(path))
    except ProtoError as exc:
        return f"not readable back: {exc}".replace(f"{REPO}/", "")[:160]
    problem = first_difference(module, back)
    return problem.replace(f"{REPO}/", "")[:160] if problem else None


def xla_problem(pb: Path, text: Path) -> str | None:
    """None when XLA's serialization ``pb`` reads into the IR the text gives (the header
    compared only where HloModuleProto carries it); else the reason."""
    from neuron_sim.hlo.parser import parse_module
    from neuron_sim.hlo.proto import read_module_file
    from neuron_sim.hlo.proto.compare import PROTO_HEADER_KEYS, first_difference

    try:
        from_proto = read_module_file(pb)
    except Exception as exc:  # noqa: BLE001 - the reason is the result
        return f"unreadable: {exc}".replace(f"{REPO}/", "")[:160]
    try:
        from_text = parse_module(text.read_text(encoding="utf-8"), str(text))
    except Exception as exc:  # noqa: BLE001
        return f"text unparsable: {exc}".replace(f"{REPO}/", "")[:160]
    # XLA's parser renames an instruction whose name another computation uses (p0 -> p0.1):
    # instructions are matched by their place in the graph. The own round trip keeps names.
    problem = first_difference(from_text, from_proto, PROTO_HEADER_KEYS, by_structure=True)
    return problem.replace(f"{REPO}/", "")[:160] if problem else None


def exceptions() -> dict[str, dict[str, str]]:
    return json.loads(EXCEPTIONS.read_text()) if EXCEPTIONS.exists() else {}
