"""The deterministic functions give the same bits whichever SIMD paths numpy dispatches to.

Each setting runs in a fresh interpreter with ``NPY_DISABLE_CPU_FEATURES`` set before numpy is
imported (native; AVX-512 off; AVX-512 and AVX2 off, as far as this CPU and numpy have them);
the child checks that numpy really turned the targets off and fails loudly otherwise. Every
function is evaluated on about 80,000 inputs (half float32 values, half float64, edge values
included) and the SHA-256 of the result bits must be the same under every setting.
"""

from __future__ import annotations

import pytest

from neuron_sim.numerics import dispatch

SNIPPET = """
import hashlib
import numpy as np
import neuron_sim.numerics as N
from neuron_sim.numerics import samples as S

def digest(arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()

for name in S.FUNCTIONS:
    parts32 = S.sample_inputs(name, 40000, "f32", seed=7)
    parts64 = S.sample_inputs(name, 40000, "f64", seed=7)
    args = [np.concatenate([a, b]) for a, b in zip(parts32, parts64)]
    out = getattr(N, name)(*args)
    print(name, len(args[0]), digest(args)[:16], digest([out]))
# numpy's own float32 loops, for the record (they are expected to differ)
x = S.sample_inputs("sin", 40000, "f32", seed=7)[0].astype(np.float32)
with np.errstate(all="ignore"):
    for g in ("sin", "cos", "tanh", "exp", "log", "cbrt", "arcsin"):
        print("numpy-" + g, len(x), "-", digest([getattr(np, g)(x)]))
"""


def _run_all():
    results = {}
    for name, disabled in dispatch.settings().items():
        out = dispatch.run_under(disabled, SNIPPET)
        results[name] = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line}
    return results


@pytest.fixture(scope="module")
def results():
    return _run_all()


def test_settings_cover_this_cpu(results):
    # Judged by the dispatch targets on in this process (the individual feature flags such as
    # AVX512F stay on when the suite itself runs under NPY_DISABLE_CPU_FEATURES).
    feats = dispatch.cpu_features()
    on = [t for t in dispatch.dispatch_targets() if feats.get(t)]
    if not on:
        pytest.skip("no dispatch target beyond numpy's baseline is on: only the native setting")
    if any(t.startswith(("AVX512", "X86_V4")) for t in on):
        assert "no-avx512" in results
    assert "no-avx512-avx2" in results
    # for the record: which of numpy's own float32 loops changed bits (not asserted)
    changed = sorted(
        k for k in results["native"] if k.startswith("numpy-")
        and len({r[k][2] for r in results.values()}) > 1
    )
    print("numpy loops whose bits depend on the setting:", changed)


def test_every_function_has_identical_bits_under_every_setting(results):
    native = results["native"]
    ours = [k for k in native if not k.startswith("numpy-")]
    assert len(ours) == 21
    for setting, res in results.items():
        for name in ours:
            count, in_digest, out_digest = res[name]
            assert int(count) >= 80000
            assert in_digest == native[name][1], f"{name}: inputs differ under {setting}"
            assert out_digest == native[name][2], f"{name}: result bits differ under {setting}"


def test_unhonoured_setting_fails_loudly():
    # a name this numpy does not dispatch on is not turned off: the check must notice
    with pytest.raises(dispatch.NotHonoured):
        dispatch.run_under(("NOT_A_CPU_FEATURE_X",), "print(1)")
