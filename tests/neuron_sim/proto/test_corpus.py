"""The whole committed corpus through HloModuleProto.

* Round trip: text -> IR -> HloModuleProtoWithConfig (neuron-sim's writer) -> IR gives the
  IR of the text (``compare.module_key``: same instructions, attributes, constants, header).
  The tests take every corpus but tests/data/xla whole and every 16th module of that one (it
  has ~3900); ``scripts/make_proto_corpus.py --exceptions`` walks the whole of each.
* XLA is the oracle: each ``tests/data/proto/<corpus>/*.pb`` was written by XLA's own
  serializer from the text beside it (``scripts/make_proto_corpus.py``); reading it must give
  the IR the text gives, and 30 of them (a fixed sample) must execute to the same bits.

Modules that do not hold yet are listed with their reason in tests/data/proto/EXCEPTIONS.json;
a module joining the list or leaving it fails the test, so the list stays exact.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from corpus import (REPO, exceptions, round_trip_problem, text_modules, xla_problem,
                    xla_protos)


def _round_trip_sample() -> list:
    """Every text module but those of tests/data/xla, of which every 16th (by sorted path):
    the whole corpus takes minutes (``make_proto_corpus.py --exceptions`` walks it all)."""
    modules = text_modules()
    xla = [p for p in modules if "tests/data/xla/" in p.as_posix()]
    skip = set(xla)
    return [p for p in modules if p not in skip] + xla[::16]


def test_round_trip_over_the_corpus() -> None:
    sample = _round_trip_sample()
    assert len(sample) > 500
    found = {str(p.relative_to(REPO)): problem for p in sample
             if (problem := round_trip_problem(p))}
    sampled = set(sample)
    known = {k: v for k, v in exceptions().get("round_trip", {}).items()
             if REPO / k in sampled}
    assert sorted(set(found) - set(known)) == [], "new round-trip failures"
    assert sorted(set(known) - set(found)) == [], "fixed: remove them from EXCEPTIONS.json"


def _xla_sample() -> list:
    """Every XLA-serialized module but those made from tests/data/xla, of which every 16th."""
    pairs = xla_protos()
    xla = [pair for pair in pairs if "/proto/xla/" in pair[0].as_posix()]
    skip = set(xla)
    return [pair for pair in pairs if pair not in skip] + xla[::16]


def test_xla_serialized_modules_read_into_the_ir_of_their_text() -> None:
    pairs = _xla_sample()
    assert len(pairs) > 600
    found = {str(pb.relative_to(REPO)): problem for pb, text in pairs
             if (problem := xla_problem(pb, text))}
    sampled = {str(pb.relative_to(REPO)) for pb, _ in pairs}
    known = {k: v for k, v in exceptions().get("xla", {}).items() if k in sampled}
    assert sorted(set(found) - set(known)) == [], "new differences from XLA's form"
    assert sorted(set(known) - set(found)) == [], "fixed: remove them from EXCEPTIONS.json"


def _executable_sample(count: int) -> list:
    known = exceptions().get("xla", {})
    # Compiled (partitioned) JAX programs small enough to execute quickly (text under 6 KB).
    pairs = [(pb, text) for pb, text in xla_protos() if str(pb.relative_to(REPO)) not in known
             and "/proto/jax/" in pb.as_posix() and text.stat().st_size < 6000
             and pb.name.startswith(("compiled_", "spmd_"))]
    random.Random(0).shuffle(pairs)
    return pairs[:count]


@pytest.mark.parametrize("pb,text", _executable_sample(30),
                         ids=lambda value: value.name if hasattr(value, "name") else "")
def test_xla_serialized_module_runs_bit_identically_to_its_text(pb, text) -> None:
    from neuron_sim.hlo.parser import parse_module
    from neuron_sim.hlo.proto import read_module_file
    from neuron_sim.interpreter.api import execute
    from neuron_sim.topology import Topology

    from neuron_sim.io import read_npz

    from_text = parse_module(text.read_text(), str(text))
    from_proto = read_module_file(pb)
    topology = Topology(from_text.replica_count, from_text.num_partitions)
    # JAX's own inputs: drawn ones can keep a data-dependent loop (the Collatz programs)
    # running for minutes.
    data = read_npz(text.with_suffix(".npz"))
    args = [data[f"arg{i}"] for i in range(len(from_text.entry.parameters))]
    a = execute(from_text, args, topology).outputs
    b = execute(from_proto, args, topology).outputs
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
