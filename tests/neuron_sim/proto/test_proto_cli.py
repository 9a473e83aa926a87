"""Every command that reads a module reads a binary HloModuleProto (.pb, .pb.gz) too, and a
bad one is one sentence and exit code 2.

The .pb files are XLA's own serialization (tests/data/proto/, made by
scripts/make_proto_corpus.py from tests/data/jax/), so these also check that neuron-sim reads
what XLA writes.
"""

from __future__ import annotations

import gzip
import shutil

import pytest

from corpus import DATA
from neuron_sim.cli import main

PSUM = DATA / "proto" / "jax" / "spmd_psum_1d.pb"          # all-reduce over 8 devices
AR_DS = DATA / "proto" / "jax" / "spmd_ar_ds_idiom_1d.pb"   # all-reduce + dynamic-slice


@pytest.fixture
def pb(tmp_path):
    path = tmp_path / "m.pb"
    shutil.copy(PSUM, path)
    return path


def test_check_reads_pb_and_pb_gz(pb, tmp_path, capsys) -> None:
    packed = tmp_path / "m.pb.gz"
    packed.write_bytes(gzip.compress(pb.read_bytes()))
    assert main(["check", str(pb)]) == 0
    assert main(["check", str(packed)]) == 0
    out = capsys.readouterr().out
    assert "m.pb: OK" in out and "m.pb.gz: OK" in out and "all-reduce" in out


def test_check_dir_picks_up_pb_dumps(pb, tmp_path, capsys) -> None:
    (tmp_path / "other.hlo").write_text((DATA / "jax" / "spmd_psum_1d.hlo").read_text())
    assert main(["check", str(tmp_path)]) == 0
    assert "2 files: 2 accepted" in capsys.readouterr().out


def test_run_pb_gives_the_text_modules_outputs(pb, tmp_path) -> None:
    import numpy as np

    out_pb, out_text = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["run", str(pb), "--seed", "3", "-o", str(out_pb)]) == 0
    assert main(["run", str(DATA / "jax" / "spmd_psum_1d.hlo"), "--seed", "3",
                 "-o", str(out_text)]) == 0
    a, b = np.load(out_pb), np.load(out_text)
    assert sorted(a) == sorted(b)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)


def test_opt_writes_a_pb_that_neuron_sim_and_jaxlib_read_back(tmp_path) -> None:
    out = tmp_path / "out.pb"
    assert main(["opt", str(AR_DS), "--passes", "aws_neuron_default_metadata",
                 "-o", str(out)]) == 0
    assert main(["check", str(out)]) == 0
    hlo = pytest.importorskip("jaxlib._hlo")
    module = hlo.HloModule.from_serialized_hlo_module_proto(out.read_bytes())
    assert "all-reduce" in module.to_string()


def test_verify_prove_and_check_schedule_read_pb(tmp_path, capsys) -> None:
    after = tmp_path / "after.pb"
    assert main(["opt", str(AR_DS), "--passes", "aws_neuron_default_metadata",
                 "-o", str(after)]) == 0
    assert main(["verify", str(AR_DS), str(after), "--trials", "1"]) == 0
    assert main(["prove", str(AR_DS)]) in (0, 1)
    assert main(["check-schedule", str(AR_DS), "--pipeline",
                 "aws_neuron_default_metadata"]) in (0, 1)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("mutate,says", [
    (lambda b: b[: len(b) // 2], "corrupt or truncated"),
    (lambda b: b"\x08\x96\x01", "not an HloModuleProto"),
    (lambda b: gzip.compress(b)[:20], "gzip"),
    (lambda b: b"\x1a\xff\xff\xff\xff\x0f" + b[:10], "corrupt or truncated"),
])
def test_bad_protos_are_one_sentence_and_exit_2(pb, mutate, says, capsys) -> None:
    pb.write_bytes(mutate(pb.read_bytes()))
    assert main(["check", str(pb)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err and str(pb) in err, err
    assert main(["run", str(pb), "--seed", "1"]) == 2


def test_an_unbounded_dimension_reads_as_the_text_question_mark(tmp_path, capsys) -> None:
    """XLA marks an unbounded dimension dynamic (is_dynamic_dimension) with size INT64_MIN;
    it reads as the text's ``?``, which run refuses in one sentence (found by the hostile
    campaign: read as ``<=?`` it reached the interpreter and failed there)."""
    pb = DATA / "proto" / "xla" / "hlo_verifier_test" / "UnboundedDynamism.pb"
    from neuron_sim.hlo.proto import read_module_file

    assert "f32[?,784]" in read_module_file(pb).to_text()
    text_code = main(["run", str(DATA / "xla" / "hlo_verifier_test" / "UnboundedDynamism.hlo"),
                      "--seed", "1"])
    capsys.readouterr()
    assert main(["run", str(pb), "--seed", "1"]) == text_code
    err = capsys.readouterr().err
    assert "negative dimension" in err and "internal error" not in err
