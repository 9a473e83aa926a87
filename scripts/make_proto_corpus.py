"""Convert the committed HLO text corpora to HloModuleProto files written by XLA's own serializer.

Each module ``tests/data/<corpus>/<path>.hlo`` (and ``examples/*.hlo``) is parsed by XLA's HLO
parser (jaxlib's ``hlo_module_from_text``) and serialized by XLA
(``as_serialized_hlo_module_proto``) to ``tests/data/proto/<corpus>/<path>.pb``. A text XLA's
parser refuses is listed in the corpus's ``MANIFEST.json`` with XLA's reason, and so is the
jaxlib version that wrote the files. These files are the oracle of
``tests/neuron_sim/proto/test_xla_protos.py``: neuron-sim must read each one into the IR its
text gives.

    python scripts/make_proto_corpus.py                 # every corpus present
    python scripts/make_proto_corpus.py jax xla         # some of them
    python3.12 scripts/make_proto_corpus.py jax_0_12    # with jax/jaxlib 0.12 (Python 3.12),
                                                        # whose parser reads JAX 0.12's texts
    python scripts/make_proto_corpus.py --exceptions    # rewrite tests/data/proto/EXCEPTIONS.json

``--exceptions`` records, with its reason, each module whose round trip through neuron-sim's
own writer, or whose XLA-serialized form, does not give the IR of its text: the known
limitations the tests hold to (a module leaving the list, or a new one joining it, fails them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = {"jax": "tests/data/jax", "xla": "tests/data/xla", "examples": "examples",
           "jax_0_12": "tests/data/jax_0_12", "torch_xla": "tests/data/torch_xla"}
OUT = ROOT / "tests" / "data" / "proto"
MAX_FILE = 256 << 10  # bytes; bigger serializations (constants in full) are listed, not kept


def convert(corpus: str, source: Path) -> dict:
    import jax
    import jaxlib
    import jaxlib._hlo as hlo

    target = OUT / corpus
    written, refused, too_large = [], {}, {}
    for path in sorted(source.rglob("*.hlo")):
        rel = path.relative_to(source)
        try:
            text = path.read_text(encoding="utf-8")
            data = hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
        except Exception as exc:  # XLA's parser refuses it: record why
            refused[str(rel)] = " ".join(str(exc).split())[:300]
            continue
        if len(data) > MAX_FILE:  # a big constant written out in full: not committed
            too_large[str(rel)] = len(data)
            continue
        out = target / rel.with_suffix(".pb")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        written.append(str(rel.with_suffix(".pb")))
    manifest = {
        "source": CORPORA[corpus], "writer": "XLA (jaxlib hlo_module_from_text -> "
                                            "as_serialized_hlo_module_proto)",
        "jax_version": jax.__version__, "jaxlib_version": jaxlib.__version__,
        "python": sys.version.split()[0], "files": written, "refused_by_xla": refused,
        "too_large_bytes": too_large, "max_file_bytes": MAX_FILE,
    }
    target.mkdir(parents=True, exist_ok=True)
    (target / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def write_exceptions() -> int:
    sys.path.insert(0, str(ROOT / "tests" / "neuron_sim" / "proto"))
    sys.path.insert(0, str(ROOT))
    import corpus

    round_trip = {str(p.relative_to(ROOT)): problem for p in corpus.text_modules()
                  if (problem := corpus.round_trip_problem(p))}
    xla = {str(pb.relative_to(ROOT)): problem for pb, text in corpus.xla_protos()
           if (problem := corpus.xla_problem(pb, text))}
    corpus.EXCEPTIONS.write_text(json.dumps({"round_trip": round_trip, "xla": xla}, indent=1,
                                            sort_keys=True) + "\n")
    print(f"{len(round_trip)} round-trip and {len(xla)} XLA-form exceptions written")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="*", help=f"some of {', '.join(CORPORA)} "
                                                   "(default: every one present)")
    parser.add_argument("--exceptions", action="store_true",
                        help="rewrite tests/data/proto/EXCEPTIONS.json instead")
    args = parser.parse_args(argv)
    if args.exceptions:
        return write_exceptions()
    for corpus in args.corpora or list(CORPORA):
        source = ROOT / CORPORA[corpus]
        if not source.is_dir() or not any(source.rglob("*.hlo")):
            print(f"{corpus}: {CORPORA[corpus]} is not there; skipped")
            continue
        manifest = convert(corpus, source)
        print(f"{corpus}: {len(manifest['files'])} written, "
              f"{len(manifest['refused_by_xla'])} refused by XLA's parser "
              f"(jaxlib {manifest['jaxlib_version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
