"""send/recv/send-done/recv-done: the point-to-point exchange of one channel.

Expectations are derived by hand from the pairs (XLA: a send and a recv of one channel_id move
the send's operand from each pair's source to its target; ``_xla_send_recv_source_target_pairs``
is read like source_target_pairs, partition ids when channel_id > 0); a device that is no target
receives zeros, as a collective-permute's does. The MPI test runs real ``mpiexec`` processes
and requires the local backend's bits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module
from neuron_sim.hlo.checker import check_module
from neuron_sim.interpreter import InterpreterError
from neuron_sim.io import read_npz, write_npz
from neuron_sim.topology import Topology

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"

PAIRS = '_xla_send_recv_source_target_pairs="{{0,1},{1,2}}"'


def exchange(pairs: str = PAIRS, *, header: str = "num_partitions=4", channel: int = 1,
             send_pairs: str | None = None, recv_pairs: str | None = None) -> str:
    """XLA's form: recv and send on fresh tokens, then their dones."""
    recv_attr = f", frontend_attributes={{{recv_pairs if recv_pairs is not None else pairs}}}" \
        if (recv_pairs if recv_pairs is not None else pairs) else ""
    send_attr = f", frontend_attributes={{{send_pairs if send_pairs is not None else pairs}}}" \
        if (send_pairs if send_pairs is not None else pairs) else ""
    return f"""HloModule m, {header}
ENTRY e {{
  x = f32[2] parameter(0)
  t = token[] after-all()
  r = (f32[2], u32[], token[]) recv(t), channel_id={channel}{recv_attr}
  s = (f32[2], u32[], token[]) send(x, t), channel_id={channel}{send_attr}
  d = (f32[2], token[]) recv-done(r), channel_id={channel}
  sd = token[] send-done(s), channel_id={channel}
  ROOT g = f32[2] get-tuple-element(d), index=0
}}
"""


X4 = np.arange(8, dtype=np.float32).reshape(4, 2) + 1  # device d holds [2d+1, 2d+2]


def test_cross_partition_pairs_move_the_source_data_to_the_target():
    """Pairs {0,1},{1,2} on 4 partitions: device 1 receives device 0's [1, 2], device 2
    receives device 1's [3, 4]; devices 0 and 3 are no target and receive zeros."""
    module = parse_module(exchange())
    check_module(module)
    (out,) = interpreter.run(module, [X4])
    assert out.tolist() == [[0, 0], [1, 2], [3, 4], [0, 0]]


def test_cross_replica_when_the_channel_id_is_zero():
    """channel_id=0: the ids are replica ids. On 2 replicas x 2 partitions pair {1,0} moves
    (replica 1, p) to (replica 0, p): flattened devices 2 -> 0 and 3 -> 1."""
    module = parse_module(exchange('_xla_send_recv_source_target_pairs="{{1,0}}"',
                                   header="replica_count=2, num_partitions=2", channel=0))
    (out,) = interpreter.run(module, [X4])
    assert out.tolist() == [[5, 6], [7, 8], [0, 0], [0, 0]]


TORCH_XLA_FORM = """HloModule IrToHlo.20, num_partitions=2
ENTRY %IrToHlo.20 (p0.3: f32[], p1.4: f32[2]) -> (f32[2], f32[2]) {
  %p1.4 = f32[2]{0} parameter(1)
  %p0.3 = f32[] parameter(0)
  %send.8 = (f32[2]{0}, u32[], token[]) send(f32[2]{0} %p1.4, f32[] %p0.3), channel_id=7, \
frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,0}}"}
  %send-done.9 = token[] send-done((f32[2]{0}, u32[], token[]) %send.8), channel_id=7
  %recv.12 = (f32[2]{0}, u32[], token[]) recv(token[] %send-done.9), channel_id=7, \
frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,0}}"}
  %recv-done.13 = (f32[2]{0}, token[]) recv-done((f32[2]{0}, u32[], token[]) %recv.12), \
channel_id=7
  %get-tuple-element.14 = f32[2]{0} get-tuple-element((f32[2]{0}, token[]) %recv-done.13), \
index=0
  ROOT %tuple.19 = (f32[2]{0}, f32[2]{0}) tuple(%get-tuple-element.14, %p1.4)
}
"""


def test_torch_xla_form_with_an_f32_token_operand_and_a_swap():
    """PyTorch/XLA's order (send, send-done, recv on the send-done's token, recv-done) with an
    f32[] where XLA passes a token; pairs {0,1},{1,0} swap the two devices' data."""
    module = parse_module(TORCH_XLA_FORM)
    check_module(module)
    received, sent = interpreter.run(module, [np.zeros((2,), np.float32), X4[:2]])
    assert received.tolist() == [[3, 4], [1, 2]] and sent.tolist() == X4[:2].tolist()


@pytest.mark.parametrize("text,phrase", [
    (exchange(""), "needs the frontend attribute _xla_send_recv_source_target_pairs"),
    (exchange(recv_pairs='_xla_send_recv_source_target_pairs="{{0,2}}"'),
     "give different pairs"),
    (exchange('_xla_send_recv_source_target_pairs="{{0,7}}"'), "out of range"),
    (exchange('_xla_send_recv_source_target_pairs="{{0,1,2}}"'), "source,target"),
    (exchange().replace("send(x, t), channel_id=1", "send(x, t), channel_id=2")
     .replace("sd = token[] send-done(s), channel_id=1", "sd = token[] send-done(s), channel_id=2"),
     "has no recv"),
    ("\n".join(line for line in exchange().splitlines()
               if not line.lstrip().startswith(("s =", "sd ="))), "has no send"),
])
def test_unreadable_exchanges_are_errors_naming_the_instruction(text, phrase):
    with pytest.raises(InterpreterError) as info:
        interpreter.run(parse_module(text), [X4])
    message = str(info.value)
    assert phrase in message and "%" in message, message


def test_a_recv_done_before_its_send_is_refused():
    text = exchange().replace(
        "  s = (f32[2], u32[], token[]) send(x, t), channel_id=1, frontend_attributes="
        "{" + PAIRS + "}\n  d = (f32[2], token[]) recv-done(r), channel_id=1\n",
        "  d = (f32[2], token[]) recv-done(r), channel_id=1\n"
        "  s = (f32[2], u32[], token[]) send(x, t), channel_id=1, frontend_attributes="
        "{" + PAIRS + "}\n")
    assert text.index("recv-done") < text.index(" send(")
    with pytest.raises(InterpreterError, match="the send must come first"):
        interpreter.run(parse_module(text), [X4])


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from neuron_sim.cli import main; sys.exit(main())",
            *args]


def test_cli_missing_pairs_exit_2_with_one_sentence(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(exchange(""))
    write_npz(tmp_path / "in.npz", {"arg0": X4})
    done = subprocess.run(cli("run", str(hlo), "--inputs", str(tmp_path / "in.npz")),
                          capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "%r" in done.stderr and "_xla_send_recv_source_target_pairs" in done.stderr


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec is not installed")
@pytest.mark.parametrize("mode", ("native",))
def test_mpi_processes_give_the_local_backends_bits(tmp_path, mode):
    """4 partitions on 2 ranks: the pair {1,2} crosses ranks (rank 0 hosts devices 0 and 1).
    The exact mode (the default) runs the PyTorch/XLA ring below."""
    hlo = tmp_path / "m.hlo"
    hlo.write_text(exchange('_xla_send_recv_source_target_pairs="{{0,1},{1,2},{3,0}}"'))
    write_npz(tmp_path / "in.npz", {"arg0": X4})
    done = subprocess.run(
        [str(MPIEXEC), "-n", "2", *cli("run", str(hlo), "--backend", "mpi", "--mpi-mode", mode,
                                       "--inputs", str(tmp_path / "in.npz"),
                                       "-o", str(tmp_path / "out.npz"))],
        capture_output=True, text=True, timeout=150, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    got = read_npz(tmp_path / "out.npz")["out0"]
    assert got.tolist() == [[7, 8], [1, 2], [3, 4], [0, 0]]


# --- the checker: what XLA's parser and verifier accept ----------------------------------------

@pytest.mark.parametrize("old,new", [
    ("s = (f32[2], u32[], token[]) send", "s = (f32[2], token[]) send"),
    ("s = (f32[2], u32[], token[]) send", "s = f32[2] send"),
    ("sd = token[] send-done", "sd = (f32[2], token[]) send-done"),
])
def test_checker_takes_declared_send_shapes_as_xla_does(old, new):
    """XLA's parser builds a send's, send-done's and recv-done's shape from the operands and
    drops the declared one (hlo_parser.cc: CreateSend / CreateSendDone / CreateRecvDone), so
    its verifier accepts these; XLA's tests write a send-done as (f32[16], token[])."""
    text = exchange()
    assert old in text
    check_module(parse_module(text.replace(old, new)))


def test_checker_needs_a_recv_shape_that_is_a_tuple():
    """XLA's parser reads the data shape of a recv from element 0 of its declared tuple."""
    from neuron_sim.hlo.checker import HloCheckError
    with pytest.raises(HloCheckError, match="must be a tuple"):
        check_module(parse_module(exchange().replace("r = (f32[2], u32[], token[]) recv",
                                                     "r = f32[2] recv")))


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec is not installed")
def test_mpi_runs_the_torch_xla_ring_as_the_corpus_expects(tmp_path):
    """PyTorch/XLA's send/recv text with the ring {0,1},...,{7,0} on 8 partitions, 4 ranks:
    device d receives device d-1's data (tests/data/torch_xla/send_recv_ring, numpy-derived)."""
    corpus = REPO / "tests" / "data" / "torch_xla"
    data = read_npz(corpus / "send_recv_ring.npz")
    write_npz(tmp_path / "in.npz", {k: v for k, v in data.items() if k.startswith("arg")})
    done = subprocess.run(
        [str(MPIEXEC), "-n", "4", *cli("run", str(corpus / "send_recv_ring.paired.hlo"),
                                       "--backend", "mpi", "--inputs", str(tmp_path / "in.npz"),
                                       "-o", str(tmp_path / "out.npz"))],
        capture_output=True, text=True, timeout=150, cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    got = read_npz(tmp_path / "out.npz")
    assert got["out0"].tobytes() == data["out0"].tobytes()
    assert got["out1"].tobytes() == data["out1"].tobytes()


def test_the_symbolic_evaluator_reports_send_as_what_stops_the_proof():
    from neuron_sim.proofs.symbolic import SymbolicUnsupported, TermTable, run_symbolic
    with pytest.raises(SymbolicUnsupported, match="send"):
        run_symbolic(parse_module(exchange()), Topology(1, 4), TermTable(), [(False,)])
