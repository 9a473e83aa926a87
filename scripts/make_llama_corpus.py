"""Generate the Llama-3-8B-shaped decoder layer corpus under ``tests/data/llama/``.

One decoder layer of Llama 3 8B (hidden 4096, 32 query heads and 8 KV heads of dimension 128,
MLP 14336, SwiGLU, RMSNorm with eps 1e-5, RoPE with theta 500000, causal softmax attention),
bf16 weights and activations (softmax and the norms' statistics in f32, as Llama's reference
code computes them), sequence 2048, batch 1, sharded by ``jax.jit`` with ``NamedSharding``s
(GSPMD) the Megatron way with sequence parallelism:

* the layer's input and output are sharded along the sequence over all devices (Megatron-SP:
  the norms run on sequence shards; the partitioner all-gathers before the column-parallel
  matmuls and reduces after the row-parallel ones — the all-reduce + dynamic-slice pairs the
  reduce-scatter folds rewrite);
* Q, K, V, gate and up are column-parallel, o and down row-parallel.

**TP=32** (trn1.32xlarge): one query head per device. The 8 KV heads do not divide 32, so K and
V are *replicated KV heads* (what Megatron and vLLM do when the tensor-parallel degree exceeds
the KV heads): the K/V weights are given as ``[4096, 32*128]`` with each KV head's columns
repeated for its 4 query heads, sharded 32 ways, so every device holds the KV head its query
head reads.

**TP=64** (trn2): the 32 query heads do not divide 64 either. The mesh is ``(32, 2)``
(``heads`` x ``pair``): attention is sharded over ``heads`` (one query head per pair of devices,
computed by both devices of the pair: replicated over ``pair``), while the MLP's intermediate
dimension (14336 = 64 x 224) and the sequence-parallel activations are sharded over all 64
devices. The o projection's partial sums are all-reduced over the 32 heads and then sliced to
64 sequence shards.

For each configuration the script writes ``NAME.hlo``: XLA's own dump of the module right
after its SPMD partitioner (``--xla_dump_hlo_pass_re=spmd-partitioning``, the
``after_spmd-partitioning`` file: what a backend compiler's pipeline receives), with the
generating machine's paths made repository-relative. Full-size modules are only compiled (from
abstract shapes; nothing is executed). The small variants (``llama_small_tp*``: the same program
with hidden 128, head dimension 4, MLP 256, sequence 64) are also run by JAX, and their
per-device inputs and outputs are written to ``NAME.npz`` (``arg{i}`` / ``out{j}`` stacked along
a leading device axis; device id = partition id) as the interpreter's correctness check on this
program (XLA:CPU compiled with ``xla_allow_excess_precision`` off, so each bf16 op rounds as
the HLO says). ``MANIFEST.json`` lists them.

Run (JAX 0.10 on CPU; the script sets the two variables when missing)::

    XLA_FLAGS=--xla_force_host_platform_device_count=64 JAX_PLATFORMS=cpu \\
        python scripts/make_llama_corpus.py [--out-dir tests/data/llama]
"""

from __future__ import annotations

import os

_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=64").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT_DIR = REPO / "tests" / "data" / "llama"
_QUOTED_ABSOLUTE_PATH = re.compile(r'"(/[^"\n]*)"')


@dataclass(frozen=True)
class Dims:
    """The layer's dimensions."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    seq: int
    eps: float = 1e-5
    theta: float = 500000.0


LLAMA3_8B = Dims(hidden=4096, heads=32, kv_heads=8, head_dim=128, mlp=14336, seq=2048)
SMALL = Dims(hidden=128, heads=32, kv_heads=8, head_dim=4, mlp=256, seq=64)


@dataclass(frozen=True)
class Config:
    """A sharding of the layer: the mesh, and the axes each part is sharded over."""

    tp: int
    mesh: tuple[int, ...]
    axes: tuple[str, ...]
    heads_axis: str             # attention (Q/K/V columns, o rows) is sharded over this
    all_axes: tuple[str, ...]   # MLP columns and the sequence shards

    def mesh_of(self) -> Mesh:
        devices = np.array(jax.devices()[: self.tp])
        assert [d.id for d in devices] == list(range(self.tp))
        return Mesh(devices.reshape(self.mesh), self.axes)


TP32 = Config(32, (32,), ("tp",), "tp", ("tp",))
TP64 = Config(64, (32, 2), ("heads", "pair"), "heads", ("heads", "pair"))


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """Llama's RMSNorm: statistics in f32, the result back in the input's type, times the
    weight."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return normed.astype(x.dtype) * weight


def rope(x: jax.Array, dims: Dims) -> jax.Array:
    """Rotary embedding on ``x`` [seq, heads, head_dim] (rotate-half form), angles computed
    in f32 from the positions."""
    half = dims.head_dim // 2
    inv_freq = 1.0 / (dims.theta ** (jnp.arange(0, half, dtype=jnp.float32) * 2 / dims.head_dim))
    angles = jnp.arange(dims.seq, dtype=jnp.float32)[:, None] * inv_freq[None, :]
    cos = jnp.concatenate([jnp.cos(angles)] * 2, axis=-1)[:, None, :].astype(x.dtype)
    sin = jnp.concatenate([jnp.sin(angles)] * 2, axis=-1)[:, None, :].astype(x.dtype)
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def layer(dims: Dims, config: Config, mesh: Mesh):
    """The decoder layer as a function of (x, attention_norm, wq, wk, wv, wo, ffn_norm, w_gate,
    w_up, w_down), with the sharding constraints of ``config``."""
    heads, seq = NamedSharding(mesh, P(None, config.heads_axis, None)), \
        NamedSharding(mesh, P(config.all_axes, None))
    full = NamedSharding(mesh, P(None, None))
    scale = 1.0 / np.sqrt(dims.head_dim)
    lowest = jnp.finfo(jnp.float32).min  # the causal mask's fill, as Llama's HF code has it

    def f(x, attention_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down):
        h = jax.lax.with_sharding_constraint(rms_norm(x, attention_norm, dims.eps), full)
        q = (h @ wq).reshape(dims.seq, dims.heads, dims.head_dim)
        k = (h @ wk).reshape(dims.seq, dims.heads, dims.head_dim)  # replicated KV heads
        v = (h @ wv).reshape(dims.seq, dims.heads, dims.head_dim)
        q, k, v = (jax.lax.with_sharding_constraint(t, heads) for t in (q, k, v))
        q, k = rope(q, dims), rope(k, dims)
        scores = jnp.einsum("qhd,khd->hqk", q, k).astype(jnp.float32) * scale
        causal = jnp.arange(dims.seq)[:, None] >= jnp.arange(dims.seq)[None, :]
        scores = jnp.where(causal[None], scores, lowest)
        probs = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
        attention = jnp.einsum("hqk,khd->qhd", probs, v).reshape(dims.seq, dims.hidden)
        x = x + jax.lax.with_sharding_constraint(attention @ wo, seq)
        h = jax.lax.with_sharding_constraint(rms_norm(x, ffn_norm, dims.eps), full)
        gated = jax.nn.silu(h @ w_gate) * (h @ w_up)
        return x + jax.lax.with_sharding_constraint(gated @ w_down, seq)

    return f


def arguments(dims: Dims, config: Config, mesh: Mesh) -> list[tuple[tuple[int, ...], P]]:
    """(global shape, partition spec) of each argument."""
    kv_columns = dims.heads * dims.head_dim  # KV heads replicated to one per query head
    column_heads, rows_heads = P(None, config.heads_axis), P(config.heads_axis, None)
    return [((dims.seq, dims.hidden), P(config.all_axes, None)),
            ((dims.hidden,), P(None)),
            ((dims.hidden, dims.heads * dims.head_dim), column_heads),
            ((dims.hidden, kv_columns), column_heads),
            ((dims.hidden, kv_columns), column_heads),
            ((dims.heads * dims.head_dim, dims.hidden), rows_heads),
            ((dims.hidden,), P(None)),
            ((dims.hidden, dims.mlp), P(None, config.all_axes)),
            ((dims.hidden, dims.mlp), P(None, config.all_axes)),
            ((dims.mlp, dims.hidden), P(config.all_axes, None))]


def scrub_paths(text: str) -> str:
    """The HLO text with the generating machine's paths made repository-relative (a file of
    an installed package keeps its path from ``site-packages/`` on)."""
    def relative(match: re.Match) -> str:
        path = match.group(1)
        if path.startswith(f"{REPO}/"):
            return f'"{path[len(str(REPO)) + 1:]}"'
        if "/site-packages/" in path:
            return f'"{path.split("/site-packages/", 1)[1]}"'
        raise AssertionError(f"absolute path outside the repository in HLO text: {path}")
    return _QUOTED_ABSOLUTE_PATH.sub(relative, text)


def kv_replicated(weight: np.ndarray, dims: Dims) -> np.ndarray:
    """K/V weights [hidden, kv_heads*head_dim] as [hidden, heads*head_dim]: each KV head's
    columns repeated for the query heads that share it (GQA)."""
    per_head = weight.reshape(dims.hidden, dims.kv_heads, dims.head_dim)
    repeated = np.repeat(per_head, dims.heads // dims.kv_heads, axis=1)
    return repeated.reshape(dims.hidden, dims.heads * dims.head_dim)


def small_inputs(dims: Dims, seed: int = 0) -> list[np.ndarray]:
    """Random bf16 inputs of the small variant (the K/V weights in replicated-KV layout)."""
    rng = np.random.default_rng(seed)

    def draw(*shape: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(jnp.bfloat16)

    width = dims.heads * dims.head_dim
    return [draw(dims.seq, dims.hidden, scale=1.0),
            (1.0 + draw(dims.hidden, scale=0.1).astype(np.float32)).astype(jnp.bfloat16),
            draw(dims.hidden, width, scale=dims.hidden ** -0.5),
            kv_replicated(draw(dims.hidden, dims.kv_heads * dims.head_dim,
                               scale=dims.hidden ** -0.5), dims),
            kv_replicated(draw(dims.hidden, dims.kv_heads * dims.head_dim,
                               scale=dims.hidden ** -0.5), dims),
            draw(width, dims.hidden, scale=width ** -0.5),
            (1.0 + draw(dims.hidden, scale=0.1).astype(np.float32)).astype(jnp.bfloat16),
            draw(dims.hidden, dims.mlp, scale=dims.hidden ** -0.5),
            draw(dims.hidden, dims.mlp, scale=dims.hidden ** -0.5),
            draw(dims.mlp, dims.hidden, scale=dims.mlp ** -0.5)]


def per_device(array: jax.Array, count: int) -> np.ndarray:
    """A global array's shards stacked by device id."""
    by_id = {shard.device.id: np.asarray(shard.data) for shard in array.addressable_shards}
    return np.stack([by_id[d] for d in range(count)])


def generate(name: str, dims: Dims, config: Config, out_dir: Path, run: bool) -> dict:
    """Compile (and for ``run``, execute) one configuration; write its files; return its
    manifest entry."""
    mesh = config.mesh_of()
    specs = arguments(dims, config, mesh)
    shardings = tuple(NamedSharding(mesh, spec) for _, spec in specs)
    fn = jax.jit(layer(dims, config, mesh), in_shardings=shardings,
                 out_shardings=NamedSharding(mesh, P(config.all_axes, None)))
    if run:
        args = [jax.device_put(a, s) for a, s in zip(small_inputs(dims), shardings)]
    else:
        args = [jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=s)
                for (shape, _), s in zip(specs, shardings)]
    with jax.set_mesh(mesh), tempfile.TemporaryDirectory() as dump:
        compiled = fn.lower(*args).compile(compiler_options={
            "xla_dump_to": dump, "xla_dump_hlo_pass_re": "spmd-partitioning",
            "xla_dump_large_constants": True,
            "xla_allow_excess_precision": False})
        found = sorted(Path(dump).glob("*.after_spmd-partitioning.*.txt"))
        assert len(found) == 1, found
        text = scrub_paths(found[0].read_text())
        if run:
            out = compiled(*args)
    (out_dir / f"{name}.hlo").write_text(text)
    entry = {"name": name, "kind": "partitioned", "tp": config.tp, "mesh": list(config.mesh),
             "axes": list(config.axes), "dims": dims.__dict__, "num_partitions": config.tp,
             "replica_count": 1, "runnable": run, "outputs": "jax" if run else None}
    if run:
        buffer = io.BytesIO()
        arrays = {f"arg{i}": per_device(a, config.tp) for i, a in enumerate(args)}
        arrays["out0"] = per_device(out, config.tp)
        np.savez(buffer, **arrays)  # bf16 is stored as 2-byte void (|V2), as in tests/data/jax
        (out_dir / f"{name}.npz").write_bytes(buffer.getvalue())
        entry["dtypes"] = {k: str(v.dtype) for k, v in arrays.items()}
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--only", nargs="*", help="names to regenerate (default: all)")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    cases = [("llama_small_tp32", SMALL, TP32, True), ("llama_small_tp64", SMALL, TP64, True),
             ("llama3_8b_tp32", LLAMA3_8B, TP32, False),
             ("llama3_8b_tp64", LLAMA3_8B, TP64, False)]
    manifest_path = args.out_dir / "MANIFEST.json"
    manifest = {e["name"]: e for e in json.loads(manifest_path.read_text())} \
        if manifest_path.exists() else {}
    for name, dims, config, run in cases:
        if args.only and name not in args.only:
            continue
        print(f"{name} ...", flush=True)
        manifest[name] = generate(name, dims, config, args.out_dir, run)
    manifest_path.write_text(json.dumps([manifest[k] for k in sorted(manifest)], indent=1) + "\n")


if __name__ == "__main__":
    main()
