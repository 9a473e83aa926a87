"""Dump the custom-calls XLA:CPU emits for ordinary JAX programs, with JAX's outputs.

Writes ``tests/data/custom_calls/NAME.hlo`` (``jax.jit(f).lower(x).compile().as_text()``: the
optimized module XLA:CPU runs, with its custom-call) and ``NAME.npz`` (``arg0`` the input,
``out{j}`` the j-th leaf of the result, as XLA:CPU computed them). The inputs hold the cases
whose order XLA defines: ties, -0 and +0, both infinities, NaN of both signs.

Needs ``jax`` (only this script does):

    python scripts/make_custom_call_data.py
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from jax import lax

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "custom_calls"


def _special_rows() -> np.ndarray:
    """Rows of 12 f32 values with ties, signed zeros, infinities and signed NaNs."""
    nan = np.float32(np.nan)
    negative_nan = np.frombuffer(np.uint32(0xFFC00000).tobytes(), np.float32)[0]
    rows = [
        [1, 3, 3, 2, 3, 0, -1, 2, 3, 1, 0, 3],
        [0.0, -0.0, 0.0, -0.0, 1, -1, -0.0, 0.0, -1, 1, 0.0, -0.0],
        [np.inf, 1, -np.inf, nan, 2, np.inf, negative_nan, 0, nan, -np.inf, 5, 5],
        [negative_nan, -np.inf, -5, -0.0, negative_nan, -1e30, -1e-30, -np.inf, -3, -3, -0.0, -7],
    ]
    return np.array(rows, np.float32)


def _cases() -> dict[str, tuple]:
    rng = np.random.default_rng(19)
    special = _special_rows()
    random_rows = rng.integers(-4, 5, size=(3, 12)).astype(np.float32) / 2
    return {
        "topk_f32_rank2_k5": (lambda x: lax.top_k(x, 5), np.concatenate([special, random_rows])),
        "topk_f32_rank1_k4": (lambda x: lax.top_k(x, 4), special[2]),
        "topk_f32_rank2_k11": (lambda x: lax.top_k(x, 11), special),
    }


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, (fn, x) in _cases().items():
        compiled = jax.jit(fn).lower(x).compile()
        # The debug sections name this file; keep its path relative to the repository.
        text = compiled.as_text().replace(str(Path(__file__).resolve()),
                                          "scripts/make_custom_call_data.py")
        if 'custom_call_target="TopK"' not in text:
            raise SystemExit(f"{name}: XLA:CPU did not emit the TopK custom-call")
        outputs = jax.tree_util.tree_leaves(compiled(x))
        (OUT_DIR / f"{name}.hlo").write_text(text)
        arrays = {"arg0": x, **{f"out{j}": np.asarray(o) for j, o in enumerate(outputs)}}
        np.savez(OUT_DIR / f"{name}.npz", **arrays)
        print(f"wrote {name} (jax {jax.__version__})")


if __name__ == "__main__":
    main()
