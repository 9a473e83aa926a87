"""Generate the PyTorch/XLA corpus under ``tests/data/torch_xla/``.

PyTorch/XLA (what torch-neuronx runs on) lowers PyTorch programs to HLO; this script runs small
real programs under PyTorch/XLA's SPMD mode on 8 CPU devices and keeps, for every program NAME,

* ``NAME.partitioned.hlo`` -- XLA's module right after its SPMD partitioner
  (``--xla_dump_hlo_pass_re=spmd-partitioning``, the ``after_spmd-partitioning`` file: what a
  backend compiler's pipeline receives);
* ``NAME.final.hlo`` -- the module XLA:CPU executed (the ``cpu_after_optimizations`` dump);
* ``NAME.npz`` -- the per-device inputs ``arg{i}`` (entry parameter i) and the per-device
  outputs ``out{j}`` (leaf j of the entry's result tuple) of the real execution, each stacked
  along a leading device axis of size 8 (device d = partition d). The inputs are the local
  shards of the graph's device-data tensors in parameter order
  (``torch_xla._XLAC._get_tensors_xla_device_data_node``), the outputs the local shards of the
  synced result tensors (``torch_xla._XLAC._get_local_shards``);
* ``MANIFEST.json`` and ``README.md`` describing the corpus.

Values are small multiples of 1/8 where collectives sum, so those sums are exact. Programs that
draw random numbers (dropout) record XLA:CPU's own generator's values;
the manifest's ``compare`` says whether values or only shapes are compared. Dropout's
``rng-bit-generator`` uses ``rng_default`` (implementation-defined): the interpreter follows
XLA:CPU's choice (Philox) and its values match, so they are compared.

Manual collectives: ``xm.all_gather`` and ``xm.reduce_scatter`` run inside an SPMD
manual-sharding region (``xs.enable_manual_sharding``) with ``channel_id`` and
``use_global_device_ids``, which PyTorch/XLA 2.9 on CPU executes. ``xm.all_reduce``,
``xm.all_to_all`` and ``xm.collective_permute`` take no channel id, so there they are
cross-replica collectives on one replica and XLA:CPU aborts (a RET_CHECK on the replica id, a
failed bounds check); outside SPMD, ``xmp.spawn`` on PJRT CPU deadlocks in XLA's rendezvous and
``spawn_threads`` runs each thread as a world of one. Those three are not in the corpus.

XLA:CPU cannot execute send/recv ("HLO opcode `send` is not supported by XLA:CPU ThunkEmitter"),
so the point-to-point program (run without SPMD, in a subprocess of this script) keeps the text
PyTorch/XLA emits (``send_recv.emitted.hlo``, no ``_xla_send_recv_source_target_pairs``: it
checks, and running it must name the missing attribute) and the same text with the attribute
added on its send and recv (``send_recv.paired.hlo``, the loop-back pair ``{{0,0}}``; and
``send_recv_ring.paired.hlo``, the same program on 8 partitions with the ring
``{{0,1},...,{7,0}}``); those programs' expected outputs are computed by numpy from its inputs (the received value is the
value sent), not by an execution (``expected_outputs`` in the manifest says so).

PyTorch/XLA is needed only to run this script; it is not a dependency of neuron-sim. Run it
with a Python environment that has ``torch`` and ``torch_xla`` 2.9 (a separate virtual
environment)::

    PJRT_DEVICE=CPU CPU_NUM_DEVICES=8 python scripts/make_torch_xla_corpus.py

(the environment variables and XLA_FLAGS are set by the script itself). The output is
deterministic: re-running rewrites the same files.
"""

from __future__ import annotations

import os
import sys
import tempfile

DUMP_DIR = tempfile.mkdtemp(prefix="torch_xla_dump_")
os.environ.setdefault("PJRT_DEVICE", "CPU")
os.environ.setdefault("CPU_NUM_DEVICES", "8")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={DUMP_DIR} "
                           "--xla_dump_hlo_pass_re=spmd-partitioning").strip()

import dataclasses  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_xla  # noqa: E402
import torch_xla.core.xla_model as xm  # noqa: E402
import torch_xla.distributed.spmd as xs  # noqa: E402
import torch_xla.runtime as xr  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "tests" / "data" / "torch_xla"
COMMAND = "PJRT_DEVICE=CPU CPU_NUM_DEVICES=8 python scripts/make_torch_xla_corpus.py"
DEVICES = 8

TAGGED_OPCODES = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "batch-norm-training", "batch-norm-inference", "batch-norm-grad", "send", "recv",
    "dot", "convolution", "gather", "scatter", "reduce", "rng-bit-generator", "rng",
    "exponential", "tanh", "rsqrt", "sqrt", "log", "logistic", "divide", "sort", "while",
    "custom-call", "fusion", "dynamic-slice", "dynamic-update-slice", "select-and-scatter",
    "reduce-window", "sine", "cosine", "power", "erf",
}
OPCODE_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = .*? ([a-z][a-z0-9\-]*)\(", re.M)


@dataclasses.dataclass
class Program:
    name: str
    description: str
    features: list[str]
    build: Callable[[xs.Mesh], list[torch.Tensor]]  # returns the result tensors to sync
    mesh_shape: tuple[int, ...] = (8,)
    compare: str = "values"  # or "shapes"


PROGRAMS: list[Program] = []


def program(name: str, description: str, features: list[str], *, mesh_shape=(8,),
            compare: str = "values"):
    def register(build):
        PROGRAMS.append(Program(name, description, features, build, mesh_shape, compare))
        return build
    return register


def eighths(shape, seed: int, lo: int = -16, hi: int = 16) -> torch.Tensor:
    """A float32 tensor of multiples of 1/8 in [lo/8, hi/8)."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy((rng.integers(lo, hi, size=shape) / 8).astype(np.float32))


def on(mesh: xs.Mesh, tensor: torch.Tensor, spec) -> torch.Tensor:
    """The tensor on the XLA device, sharded by ``spec`` over ``mesh``."""
    value = tensor.to(torch_xla.device())
    if spec is not None:
        xs.mark_sharding(value, mesh, spec)
    return value


def module_on(mesh: xs.Mesh, module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """``module`` with every parameter replaced by multiples of 1/8, on the XLA device."""
    with torch.no_grad():
        for i, parameter in enumerate(module.parameters()):
            parameter.copy_(eighths(tuple(parameter.shape), seed + i, -8, 8))
    return module.to(torch_xla.device())


# --------------------------------------------------------------------------------------------
# The programs.

@program("megatron_column_mlp", "Megatron column-parallel linear + relu: W sharded by output "
         "columns, x replicated", ["tp", "mlp"])
def _column(mesh):
    x = on(mesh, eighths((4, 8), 1), (None, None))
    w = on(mesh, eighths((8, 16), 2), (None, "x"))
    return [torch.relu(x @ w)]


@program("megatron_row_mlp", "Megatron MLP: column-parallel W1, relu, row-parallel W2 "
         "(partial sums all-reduced)", ["tp", "mlp", "all-reduce"])
def _row(mesh):
    x = on(mesh, eighths((4, 8), 3), (None, None))
    w1 = on(mesh, eighths((8, 16), 4), (None, "x"))
    w2 = on(mesh, eighths((16, 8), 5), ("x", None))
    y = torch.relu(x @ w1) @ w2
    xs.mark_sharding(y, mesh, (None, None))
    return [y]


@program("megatron_mlp_gelu", "Megatron MLP with tanh-GELU between the column- and "
         "row-parallel linears", ["tp", "mlp", "transcendental"])
def _gelu(mesh):
    x = on(mesh, eighths((4, 8), 6), (None, None))
    w1 = on(mesh, eighths((8, 16), 7), (None, "x"))
    w2 = on(mesh, eighths((16, 8), 8), ("x", None))
    return [F.gelu(x @ w1, approximate="tanh") @ w2]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def _rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary embedding over the last dim of [B, H, S, D] (positions 0..S-1)."""
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    angles = torch.arange(s, dtype=torch.float32, device=x.device)[:, None] * inv[None, :]
    cos, sin = torch.cos(angles), torch.sin(angles)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def _attention(q, k, v, causal: bool = False):
    scores = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5)
    if causal:
        s = scores.shape[-1]
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=q.device), 1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@program("llama_block", "Llama-style block: RMSNorm, rotary q/k, causal attention with heads "
         "sharded, SwiGLU MLP tensor-parallel", ["tp", "attention", "rmsnorm", "rotary",
                                                  "swiglu", "transcendental"])
def _llama(mesh):
    b, s, h, heads = 2, 4, 16, 8
    d = h // heads
    x = on(mesh, eighths((b, s, h), 10), (None, None, None))
    wq = on(mesh, eighths((h, h), 11, -4, 4), (None, "x"))
    wk = on(mesh, eighths((h, h), 12, -4, 4), (None, "x"))
    wv = on(mesh, eighths((h, h), 13, -4, 4), (None, "x"))
    wo = on(mesh, eighths((h, h), 14, -4, 4), ("x", None))
    norm1 = on(mesh, eighths((h,), 15, 4, 12), (None,))
    norm2 = on(mesh, eighths((h,), 16, 4, 12), (None,))
    w_gate = on(mesh, eighths((h, 32), 17, -4, 4), (None, "x"))
    w_up = on(mesh, eighths((h, 32), 18, -4, 4), (None, "x"))
    w_down = on(mesh, eighths((32, h), 19, -4, 4), ("x", None))
    n = _rms_norm(x, norm1)

    def heads_of(t):
        return t.view(b, s, heads, d).transpose(1, 2)

    q, k, v = heads_of(n @ wq), heads_of(n @ wk), heads_of(n @ wv)
    a = _attention(_rotary(q), _rotary(k), v, causal=True).transpose(1, 2).reshape(b, s, h)
    x = x + a @ wo
    n = _rms_norm(x, norm2)
    y = x + (F.silu(n @ w_gate) * (n @ w_up)) @ w_down
    xs.mark_sharding(y, mesh, (None, None, None))
    return [y]


@program("attention_heads", "Multi-head attention, heads sharded over 8 devices",
         ["attention", "transcendental"])
def _attn(mesh):
    q = on(mesh, eighths((2, 8, 4, 4), 20), (None, "x", None, None))
    k = on(mesh, eighths((2, 8, 4, 4), 21), (None, "x", None, None))
    v = on(mesh, eighths((2, 8, 4, 4), 22), (None, "x", None, None))
    return [_attention(q, k, v)]


@program("attention_batch_2d", "Causal attention on a (4, 2) mesh: batch over 'dp', heads over "
         "'tp'", ["attention", "transcendental", "mesh2d"], mesh_shape=(4, 2))
def _attn2d(mesh):
    q = on(mesh, eighths((4, 2, 4, 4), 23), ("x", "y", None, None))
    k = on(mesh, eighths((4, 2, 4, 4), 24), ("x", "y", None, None))
    v = on(mesh, eighths((4, 2, 4, 4), 25), ("x", "y", None, None))
    return [_attention(q, k, v, causal=True)]


@program("layernorm_rows", "nn.LayerNorm(8) on a batch sharded over 8 devices (lowered to "
         "batch-norm-training)", ["layernorm"])
def _ln_rows(mesh):
    ln = module_on(mesh, torch.nn.LayerNorm(8), 30)
    x = on(mesh, eighths((16, 8), 31), ("x", None))
    return [ln(x)]


@program("layernorm_hidden_sharded", "nn.LayerNorm over a hidden dim sharded over 8 devices "
         "(the partitioner gathers or reduces the statistics)", ["layernorm"])
def _ln_hidden(mesh):
    ln = module_on(mesh, torch.nn.LayerNorm(16), 32)
    x = on(mesh, eighths((4, 16), 33), (None, "x"))
    return [ln(x)]


@program("layernorm_3d_sequence", "nn.LayerNorm on [B, S, H] with the sequence sharded "
         "(sequence parallel)", ["layernorm", "sequence_parallel"])
def _ln_seq(mesh):
    ln = module_on(mesh, torch.nn.LayerNorm(4), 34)
    x = on(mesh, eighths((2, 8, 4), 35), (None, "x", None))
    return [ln(x)]


@program("layernorm_no_affine", "nn.LayerNorm without affine parameters, eps 1e-3",
         ["layernorm"])
def _ln_plain(mesh):
    x = on(mesh, eighths((8, 6), 36), ("x", None))
    return [F.layer_norm(x, (6,), eps=1e-3)]


@program("transformer_block_layernorm", "Pre-LN transformer block with nn.LayerNorm, "
         "attention and a GELU MLP, tensor parallel", ["layernorm", "attention", "tp",
                                                       "transcendental"])
def _tblock(mesh):
    b, s, h, heads = 2, 4, 16, 8
    d = h // heads
    ln1 = module_on(mesh, torch.nn.LayerNorm(h), 40)
    ln2 = module_on(mesh, torch.nn.LayerNorm(h), 41)
    x = on(mesh, eighths((b, s, h), 42), (None, None, None))
    wqkv = on(mesh, eighths((h, 3 * h), 43, -4, 4), (None, "x"))
    wo = on(mesh, eighths((h, h), 44, -4, 4), ("x", None))
    w1 = on(mesh, eighths((h, 32), 45, -4, 4), (None, "x"))
    w2 = on(mesh, eighths((32, h), 46, -4, 4), ("x", None))
    q, k, v = (ln1(x) @ wqkv).split(h, dim=-1)

    def heads_of(t):
        return t.reshape(b, s, heads, d).transpose(1, 2)

    a = _attention(heads_of(q), heads_of(k), heads_of(v)).transpose(1, 2).reshape(b, s, h)
    x = x + a @ wo
    y = x + F.gelu(ln2(x) @ w1) @ w2
    xs.mark_sharding(y, mesh, (None, None, None))
    return [y]


@program("layernorm_train_step", "Training step through nn.LayerNorm + Linear: MSE loss, "
         "backward, SGD update of every parameter; data parallel over 8 devices",
         ["layernorm", "train_step", "dp", "backward"])
def _ln_train(mesh):
    model = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Linear(8, 4))
    model = module_on(mesh, model, 50)
    x = on(mesh, eighths((16, 8), 51), ("x", None))
    target = on(mesh, eighths((16, 4), 52), ("x", None))
    loss = F.mse_loss(model(x), target)
    loss.backward()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= 0.125 * parameter.grad
    return [loss, *model.parameters()]


@program("dp_train_step", "Data-parallel training step of a 2-layer MLP: batch sharded, "
         "gradients all-reduced, SGD", ["train_step", "dp", "backward", "all-reduce"])
def _dp(mesh):
    model = module_on(mesh, torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(),
                                                torch.nn.Linear(8, 2)), 60)
    x = on(mesh, eighths((16, 8), 61), ("x", None))
    target = on(mesh, eighths((16, 2), 62), ("x", None))
    loss = ((model(x) - target) ** 2).sum()
    loss.backward()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= 0.125 * parameter.grad
    return [loss, *model.parameters()]


@program("tp_train_step", "Tensor-parallel training step: column- and row-parallel weights, "
         "sum-of-squares loss, SGD", ["train_step", "tp", "backward"])
def _tp(mesh):
    w1 = on(mesh, eighths((8, 16), 70), (None, "x")).requires_grad_()
    w2 = on(mesh, eighths((16, 4), 71), ("x", None)).requires_grad_()
    x = on(mesh, eighths((4, 8), 72), (None, None))
    loss = (torch.relu(x @ w1) @ w2).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w1 -= 0.125 * w1.grad
        w2 -= 0.125 * w2.grad
    return [loss, w1, w2]


@program("sequence_parallel_mlp", "Sequence parallel: LayerNorm on the sequence-sharded "
         "activations, all-gather into a column-parallel MLP, reduce-scatter back",
         ["sequence_parallel", "layernorm", "tp"])
def _sp(mesh):
    ln = module_on(mesh, torch.nn.LayerNorm(8), 80)
    x = on(mesh, eighths((16, 8), 81), ("x", None))
    w1 = on(mesh, eighths((8, 16), 82), (None, "x"))
    w2 = on(mesh, eighths((16, 8), 83), ("x", None))
    n = ln(x)
    xs.mark_sharding(n, mesh, (None, None))
    y = torch.relu(n @ w1) @ w2
    xs.mark_sharding(y, mesh, ("x", None))
    return [y]


@program("embedding_vocab_sharded", "nn.Embedding lookup with the table sharded by vocabulary "
         "(ids replicated)", ["embedding", "gather"])
def _emb_vocab(mesh):
    table = on(mesh, eighths((32, 4), 90), ("x", None))
    ids = on(mesh, torch.tensor([[0, 5, 31, 17], [9, 9, 2, 24]], dtype=torch.int64),
             (None, None))
    return [F.embedding(ids, table)]


@program("embedding_hidden_sharded", "nn.Embedding with the table sharded by hidden dim and "
         "the ids batch-sharded", ["embedding", "gather"])
def _emb_hidden(mesh):
    table = on(mesh, eighths((10, 8), 91), (None, "x"))
    ids = on(mesh, torch.tensor([3, 1, 4, 1, 5, 9, 2, 6], dtype=torch.int64), (None,))
    return [F.embedding(ids, table) * 2]


@program("embedding_train_step", "Embedding + linear training step (scatter-add gradient into "
         "the table), SGD", ["embedding", "train_step", "backward", "scatter"])
def _emb_train(mesh):
    table = on(mesh, eighths((12, 8), 92), (None, "x")).requires_grad_()
    w = on(mesh, eighths((8, 2), 93), ("x", None)).requires_grad_()
    ids = on(mesh, torch.tensor([1, 3, 3, 7, 0, 11, 5, 3], dtype=torch.int64), (None,))
    loss = (F.embedding(ids, table) @ w).sum()
    loss.backward()
    with torch.no_grad():
        table -= 0.125 * table.grad
        w -= 0.125 * w.grad
    return [loss, table, w]


@program("reshard_rows_to_cols", "Resharding: rows-sharded input, columns-sharded result",
         ["resharding"])
def _reshard(mesh):
    x = on(mesh, eighths((8, 8), 100), ("x", None))
    y = x * 2 + 1
    xs.mark_sharding(y, mesh, (None, "x"))
    return [y]


@program("reshard_2d_mesh", "Resharding on a (2, 4) mesh: ('x', 'y') to ('y', 'x') and a "
         "transpose", ["resharding", "mesh2d"], mesh_shape=(2, 4))
def _reshard2d(mesh):
    x = on(mesh, eighths((8, 8), 101), ("x", "y"))
    y = x.t() - 0.5
    xs.mark_sharding(y, mesh, ("y", "x"))
    return [y]


@program("reshard_to_replicated_int", "Integer tensor sharded, then replicated and summed "
         "(exact)", ["resharding", "int"])
def _reshard_int(mesh):
    x = on(mesh, torch.arange(64, dtype=torch.int32).reshape(8, 8) * 3 - 50, ("x", None))
    y = x.sum(dim=0)
    xs.mark_sharding(y, mesh, (None,))
    return [y, x.cumsum(dim=1)]


@program("global_reductions", "Sum, max and mean over a sharded dimension", ["reduce"])
def _reductions(mesh):
    x = on(mesh, eighths((8, 4), 102), ("x", None))
    return [x.sum(), x.amax(dim=0), x.mean(dim=1)]


@program("argmax_sharded", "argmax and sort along a sharded dimension (exact)",
         ["int", "sort"])
def _argmax(mesh):
    x = on(mesh, eighths((16, 4), 103), ("x", None))
    return [x.argmax(dim=0), torch.sort(x, dim=0).values]


@program("softmax_cross_entropy", "Cross-entropy loss of logits sharded by batch",
         ["transcendental", "loss"])
def _xent(mesh):
    logits = on(mesh, eighths((16, 5), 104), ("x", None))
    labels = on(mesh, torch.tensor([i % 5 for i in range(16)], dtype=torch.int64), ("x",))
    return [F.cross_entropy(logits, labels)]


@program("conv2d_batch_sharded", "nn.Conv2d 3x3, padding 1, on a batch sharded over 8 devices",
         ["convolution"])
def _conv(mesh):
    conv = module_on(mesh, torch.nn.Conv2d(2, 3, 3, padding=1), 110)
    x = on(mesh, eighths((8, 2, 5, 5), 111), ("x", None, None, None))
    return [conv(x)]


@program("conv2d_channels_sharded", "nn.Conv2d with output channels sharded over 8 devices, "
         "stride 2", ["convolution"])
def _conv_ch(mesh):
    w = on(mesh, eighths((8, 2, 3, 3), 112), ("x", None, None, None))
    x = on(mesh, eighths((2, 2, 6, 6), 113), (None, None, None, None))
    return [F.conv2d(x, w, stride=2)]


@program("batchnorm2d_train", "nn.BatchNorm2d in training mode on a batch sharded over 8 "
         "devices (batch-norm-training on the global batch)", ["batchnorm"])
def _bn(mesh):
    bn = module_on(mesh, torch.nn.BatchNorm2d(3), 120)
    x = on(mesh, eighths((8, 3, 2, 2), 121), ("x", None, None, None))
    return [bn(x)]


@program("batchnorm2d_eval", "nn.BatchNorm2d in eval mode (running statistics)",
         ["batchnorm"])
def _bn_eval(mesh):
    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.copy_(eighths((3,), 122))
        bn.running_var.copy_(eighths((3,), 123, 4, 16))
    bn = module_on(mesh, bn, 124).eval()
    x = on(mesh, eighths((8, 3, 2, 2), 125), ("x", None, None, None))
    return [bn(x)]


@program("layernorm_backward_only", "Gradient of sum(LayerNorm(x) * g) with respect to x, "
         "scale and bias", ["layernorm", "backward"])
def _ln_grad(mesh):
    ln = module_on(mesh, torch.nn.LayerNorm(8), 130)
    x = on(mesh, eighths((8, 8), 131), ("x", None)).requires_grad_()
    g = on(mesh, eighths((8, 8), 132), ("x", None))
    (ln(x) * g).sum().backward()
    return [x.grad, ln.weight.grad, ln.bias.grad]


@program("layernorm_bf16", "nn.LayerNorm(8) in bfloat16 on a batch sharded over 8 devices",
         ["layernorm", "bf16"])
def _ln_bf16(mesh):
    ln = module_on(mesh, torch.nn.LayerNorm(8), 160).to(torch.bfloat16)
    x = on(mesh, eighths((16, 8), 161).to(torch.bfloat16), ("x", None))
    return [ln(x)]


@program("megatron_mlp_bf16", "Megatron column- then row-parallel MLP in bfloat16 (partial sums "
         "all-reduced in bf16)", ["tp", "mlp", "bf16"])
def _mlp_bf16(mesh):
    x = on(mesh, eighths((4, 8), 162).to(torch.bfloat16), (None, None))
    w1 = on(mesh, eighths((8, 16), 163).to(torch.bfloat16), (None, "x"))
    w2 = on(mesh, eighths((16, 8), 164).to(torch.bfloat16), ("x", None))
    y = torch.relu(x @ w1) @ w2
    xs.mark_sharding(y, mesh, (None, None))
    return [y]


def _manual(mesh, tensor: torch.Tensor) -> torch.Tensor:
    """Each device's row block of ``tensor`` (sharded over 'x') as a manual-sharding tensor."""
    return xs.enable_manual_sharding(tensor, ("x", None), mesh=mesh).global_tensor


def _gathered(mesh, local: torch.Tensor) -> torch.Tensor:
    """The per-device results of a manual region stacked back along dimension 0."""
    shape = (DEVICES * local.shape[0], *local.shape[1:])
    return xs.disable_manual_sharding(local, ("x", None), shape, mesh=mesh).global_tensor


@program("manual_all_gather", "xm.all_gather in a manual-sharding region (channel_id, global "
         "device ids): every device gathers the 8 row blocks", ["manual_collective",
                                                              "all-gather"])
def _manual_all_gather(mesh):
    x = on(mesh, eighths((8, 4), 170), ("x", None))
    local = _manual(mesh, x)
    gathered = xm.all_gather(local, dim=0, groups=[list(range(DEVICES))], pin_layout=False,
                             channel_id=1, use_global_device_ids=True)
    return [_gathered(mesh, gathered * 2)]


@program("manual_reduce_scatter", "xm.reduce_scatter (sum, scale 1) in a manual-sharding region "
         "over two groups of 4 devices", ["manual_collective", "reduce-scatter"])
def _manual_reduce_scatter(mesh):
    x = on(mesh, eighths((32, 4), 171), ("x", None))
    local = _manual(mesh, x)
    scattered = xm.reduce_scatter(xm.REDUCE_SUM, local, 1.0, 0, 4,
                                  groups=[[0, 1, 2, 3], [4, 5, 6, 7]], pin_layout=False,
                                  channel_id=1, use_global_device_ids=True)
    return [_gathered(mesh, scattered)]


@program("dropout", "nn.Dropout(0.5) in training mode: rng-bit-generator with rng_default, "
         "which is implementation-defined; the interpreter follows XLA:CPU's (Philox), so the "
         "values are compared", ["dropout", "rng"])
def _dropout(mesh):
    torch_xla.manual_seed(0)
    x = on(mesh, eighths((8, 8), 140), ("x", None))
    return [F.dropout(x, 0.5, training=True)]


# --------------------------------------------------------------------------------------------
# Running a program and keeping what XLA compiled.

def _dumped() -> set[str]:
    return set(os.listdir(DUMP_DIR))


def _pick(files: set[str], suffix: str) -> Path:
    """The file of the program's SyncTensorsGraph module ending in ``suffix`` (the last one if
    the program compiled several)."""
    found = sorted(f for f in files if f.endswith(suffix) and "SyncTensorsGraph" in f)
    if not found:
        raise AssertionError(f"no dump ending in {suffix}: {sorted(files)}")
    return Path(DUMP_DIR) / found[-1]


_QUOTED_ABSOLUTE_PATH = re.compile(r'"(/[^"\n]*)"')


def scrub_paths(text: str) -> str:
    """The HLO text with the generating machine's paths made relative: files of this
    repository relative to its root, files of installed packages from ``site-packages/`` on;
    any other absolute path is an error."""
    def relative(match: re.Match) -> str:
        path = match.group(1)
        root = f"{REPO}/"
        if path.startswith(root):
            return f'"{path[len(root):]}"'
        if "/site-packages/" in path:
            return f'"{path.split("/site-packages/", 1)[1]}"'
        raise AssertionError(f"absolute path outside the repository in HLO text: {path}")
    return _QUOTED_ABSOLUTE_PATH.sub(relative, text)


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    """The tensor as numpy; bfloat16 as raw 2-byte void (``|V2``), numpy having no bf16."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.dtype("V2"))
    return tensor.numpy()


def _stacked(tensors: list[torch.Tensor]) -> list[np.ndarray]:
    """Each tensor's local shards, ordered by device, stacked ``[8, *shard]``."""
    result = []
    for shards in torch_xla._XLAC._get_local_shards(tensors):
        by_device = sorted(shards, key=lambda pair: int(pair[1].split(":")[1]))
        assert [int(d.split(":")[1]) for _, d in by_device] == list(range(DEVICES)), by_device
        result.append(np.stack([_numpy(t) for t, _ in by_device]))
    return result


def run_program(prog: Program) -> dict:
    mesh = xs.Mesh(np.arange(DEVICES), prog.mesh_shape,
                   ("x", "y")[:len(prog.mesh_shape)])
    before = _dumped()
    results = prog.build(mesh)
    ids, data = torch_xla._XLAC._get_tensors_xla_device_data_node(results)
    inputs = _stacked(list(data)) if data else []
    torch_xla._XLAC._xla_sync_multi(results, devices=[], wait=True)
    xm.wait_device_ops()
    outputs = _stacked(results)
    files = _dumped() - before
    partitioned = _pick(files, "after_spmd-partitioning.before_pipeline-end.txt").read_text()
    final = _pick(files, "cpu_after_optimizations.txt").read_text()
    for text in (partitioned, final):
        parameters = len(re.findall(r"\bparameter\(\d+\)", text.split("ENTRY", 1)[1]
                                    .split("\n}\n", 1)[0]))
        assert parameters == len(inputs), (prog.name, parameters, len(inputs))
    (OUT_DIR / f"{prog.name}.partitioned.hlo").write_text(scrub_paths(partitioned))
    (OUT_DIR / f"{prog.name}.final.hlo").write_text(scrub_paths(final))
    arrays = {f"arg{i}": a for i, a in enumerate(inputs)}
    arrays.update({f"out{j}": o for j, o in enumerate(outputs)})
    write_npz(OUT_DIR / f"{prog.name}.npz", arrays)
    features = set(prog.features) | (set(OPCODE_RE.findall(partitioned + final))
                                     & TAGGED_OPCODES)
    print(f"wrote {prog.name}: {len(inputs)} inputs, {len(outputs)} outputs")
    return {"name": prog.name, "description": prog.description,
            "modules": [f"{prog.name}.partitioned.hlo", f"{prog.name}.final.hlo"],
            "data": f"{prog.name}.npz", "replica_count": 1, "num_partitions": DEVICES,
            "mesh": list(prog.mesh_shape), "compare": prog.compare,
            "expected_outputs": "XLA:CPU's execution under PyTorch/XLA",
            "features": sorted(features)}


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez's layout (a stored zip of .npy members) with fixed timestamps, so that
    regenerating gives byte-identical files."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue())
    path.write_bytes(buf.getvalue())


# --------------------------------------------------------------------------------------------
# send/recv: one device, no SPMD (a separate process: SPMD mode is process-wide).

SEND_RECV_PAIRS = '_xla_send_recv_source_target_pairs="{{0,0}}"'


def send_recv_program() -> None:
    """Runs in the child process: trace xm.send / xm.recv and print the HLO text and the
    input as JSON on the last line."""
    dev = torch_xla.device()
    a = eighths((8, 2), 150).to(dev)
    b = a * 2
    sent = xm.send(b, 7)
    received = xm.recv(torch.zeros(8, 2, device=dev), 7)
    out = received + 1
    text = torch_xla._XLAC._get_xla_tensors_hlo([out, sent])
    ids, data = torch_xla._XLAC._get_tensors_xla_device_data_node([out, sent])
    values = [t.cpu().numpy().tolist() for t in data]
    print(json.dumps({"text": text, "inputs": values}))


SEND_RECV_RING = ('_xla_send_recv_source_target_pairs="{'
                  + ",".join(f"{{{d},{(d + 1) % DEVICES}}}" for d in range(DEVICES)) + '}"')


def with_pairs(text: str, pairs: str = SEND_RECV_PAIRS) -> str:
    """The text with the pairs frontend attribute on every send and recv."""
    def add(match: re.Match) -> str:
        return match.group(0) + ", frontend_attributes={" + pairs + "}"
    return re.sub(r"= \([^)]*\) (?:send|recv)\(.*?channel_id=\d+", add, text)


def on_partitions(text: str, partitions: int) -> str:
    """The text with ``num_partitions`` added to its header line: the same program run as an
    SPMD program on that many partitions."""
    header, rest = text.split("\n", 1)
    assert "num_partitions" not in header
    return f"{header}, num_partitions={partitions}\n{rest}"


def run_send_recv() -> list[dict]:
    env = dict(os.environ, CPU_NUM_DEVICES="1")
    env["XLA_FLAGS"] = ""
    line = subprocess.run([sys.executable, __file__, "--send-recv-child"], env=env,
                          check=True, capture_output=True, text=True).stdout.strip()
    record = json.loads(line.splitlines()[-1])
    text = record["text"]
    assert "_xla_send_recv_source_target_pairs" not in text
    inputs = [np.asarray(v, np.float32) for v in record["inputs"]]
    # The parameters of the traced graph, by shape: the f32[8,2] data and f32[] scalars
    # (the token PyTorch/XLA passes to send, and the constant 2).
    entry = text.split("ENTRY", 1)[1]
    shapes = re.findall(r"= (f32\[[\d,]*\])\S* parameter\((\d+)\)", entry)
    by_number = {int(n): s for s, n in shapes}
    assert len(by_number) == len(inputs), (shapes, len(inputs))
    paired = with_pairs(text)
    (OUT_DIR / "send_recv.emitted.hlo").write_text(scrub_paths(text))
    (OUT_DIR / "send_recv.paired.hlo").write_text(scrub_paths(paired))
    arrays = {f"arg{i}": inputs[i][None] for i in range(len(inputs))}
    data = next(x for x in inputs if x.shape == (8, 2))
    scale = next(float(x) for x in inputs if x.shape == () and float(x) == 2.0)
    sent = data * np.float32(scale)
    # the loop-back pair {0,0}: device 0 receives what it sent
    arrays["out0"] = (sent + 1)[None]
    arrays["out1"] = sent[None]
    write_npz(OUT_DIR / "send_recv.npz", arrays)
    print("wrote send_recv")
    loopback = {"name": "send_recv",
            "description": "xm.send then xm.recv on channel 7 (send's token operand is f32[]); "
                           "'emitted' is PyTorch/XLA's text, 'paired' adds "
                           + SEND_RECV_PAIRS + " to the send and the recv",
            "modules": ["send_recv.emitted.hlo", "send_recv.paired.hlo"],
            "data": "send_recv.npz", "replica_count": 1, "num_partitions": 1, "mesh": None,
            "compare": "values", "runnable": {"send_recv.emitted.hlo": False,
                                              "send_recv.paired.hlo": True},
            "expected_outputs": "numpy: the received value is the value sent (XLA:CPU cannot "
                                "execute send/recv)",
            "features": ["send", "recv", "send-done", "recv-done", "send_recv"]}
    # The same program on 8 partitions with the ring {0,1},...,{7,0}: device d sends its own
    # data (the input plus d) and receives device d-1's.
    ring = on_partitions(with_pairs(text, SEND_RECV_RING), DEVICES)
    (OUT_DIR / "send_recv_ring.paired.hlo").write_text(scrub_paths(ring))
    arrays = {}
    for i, x in enumerate(inputs):
        rows = np.stack([x] * DEVICES)
        if x.shape == (8, 2):
            rows = rows + np.arange(DEVICES, dtype=np.float32)[:, None, None]
            sent_rows = rows * np.float32(scale)
        arrays[f"arg{i}"] = rows
    arrays["out0"] = np.roll(sent_rows, 1, axis=0) + 1
    arrays["out1"] = sent_rows
    write_npz(OUT_DIR / "send_recv_ring.npz", arrays)
    print("wrote send_recv_ring")
    ring_entry = {
        "name": "send_recv_ring",
        "description": "the send_recv program as an SPMD program on 8 partitions with "
                       + SEND_RECV_RING + " added to its send and recv: device d receives "
                       "device d-1's data",
        "modules": ["send_recv_ring.paired.hlo"], "data": "send_recv_ring.npz",
        "replica_count": 1, "num_partitions": DEVICES, "mesh": [DEVICES], "compare": "values",
        "expected_outputs": "numpy: device d receives what device d-1 sent (XLA:CPU cannot "
                            "execute send/recv)",
        "features": ["send", "recv", "send-done", "recv-done", "send_recv"]}
    return [loopback, ring_entry]


def write_readme(manifest: list[dict]) -> None:
    lines = [
        "# PyTorch/XLA corpus", "",
        f"Generated by `scripts/make_torch_xla_corpus.py` (torch {torch.__version__}, "
        f"torch_xla {torch_xla.__version__}, {len(manifest)} programs) with", "",
        f"    {COMMAND}", "",
        "PyTorch/XLA is needed only to regenerate these files. Per program NAME:", "",
        "* `NAME.partitioned.hlo`: XLA's module right after its SPMD partitioner (the",
        "  `after_spmd-partitioning` dump); `NAME.final.hlo`: the module XLA:CPU executed",
        "  (`cpu_after_optimizations`). Both have `num_partitions=8`; paths in metadata are",
        "  relative.",
        "* `NAME.npz`: `arg{i}` = entry parameter i, `out{j}` = leaf j of the entry's result",
        "  tuple, each `[8, *shape]`: the local shards of the real execution on 8 PJRT CPU",
        "  devices (device d = partition d).",
        "* bfloat16 arrays are stored as raw 2-byte void (`|V2`):",
        "  `np.load(...)[k].view(ml_dtypes.bfloat16)`.",
        "* `compare` in MANIFEST.json: `values`, or `shapes` for a program whose values only",
        "  XLA:CPU's own random generator defines (none now: dropout's `rng_default` is",
        "  Philox in XLA:CPU and in neuron-sim, so its values are compared).",
        "* `send_recv`: XLA:CPU cannot execute send/recv; `send_recv.emitted.hlo` is",
        "  PyTorch/XLA's text (no `_xla_send_recv_source_target_pairs`, so it cannot run),",
        "  `send_recv.paired.hlo` adds the loop-back pair `{{0,0}}`; its outputs are computed",
        "  by numpy from its inputs (the received value is the value sent);",
        "  `send_recv_ring.paired.hlo` is the same text on 8 partitions with the ring",
        "  `{{0,1},...,{7,0}}` (device d receives device d-1's data, numpy again).",
        "", "| program | features | description |", "|---|---|---|",
    ]
    for entry in manifest:
        lines.append(f"| {entry['name']} | {', '.join(entry['features'])} | "
                     f"{entry['description']} |")
    (OUT_DIR / "README.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    if "--send-recv-child" in argv:
        send_recv_program()
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    only = [a for a in argv if not a.startswith("-")]
    manifest = run_send_recv()
    xr.use_spmd()
    assert xr.global_runtime_device_count() == DEVICES
    for prog in PROGRAMS:
        if only and prog.name not in only:
            continue
        manifest.append(run_program(prog))
    if not only:
        manifest.sort(key=lambda e: e["name"])
        (OUT_DIR / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
        write_readme(manifest)
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    finally:
        shutil.rmtree(DUMP_DIR, ignore_errors=True)  # XLA's dumps: read above, not kept
    sys.exit(code)
