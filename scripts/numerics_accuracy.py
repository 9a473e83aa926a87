"""Accuracy and speed of neuron_sim.numerics, as a markdown table.

For each function:
  * float32: inputs are float32 values (``neuron_sim.numerics.samples``: half uniform over the
    function's core intervals, the rest over every binade with random signs, plus edge values);
    the result f(float64(x)) rounded to float32 is compared with mpmath's value (160 bits)
    correctly rounded to float32: the table gives how many are not correctly rounded and the
    largest error in float32 ulps.
  * float64: the same kind of sample of float64 values; the largest error in float64 ulps.
  * speed: time per element of f(x32.astype(float64)).astype(float32) on 2**20 elements, and
    its ratio to numpy's own float32 loop (a numpy float32 expression where numpy has no ufunc).
Zeros, infinities and NaN inputs are left out of the accuracy columns (they are exact cases
checked by tests/neuron_sim/numerics/test_numerics_special_values.py).

    python scripts/numerics_accuracy.py [--n32 200000] [--n64 100000] [--jobs 2] [--only sin,cos]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import neuron_sim.numerics as N  # noqa: E402
from neuron_sim.numerics import reference as R  # noqa: E402
from neuron_sim.numerics import samples as S  # noqa: E402


def _regular(name, args):
    keep = np.logical_and.reduce([np.isfinite(a) & (a != 0.0) for a in args])
    if name == "power":
        keep &= ~((args[0] < 0) & (np.floor(args[1]) != args[1]))
    return [a[keep] for a in args]


def _measure(job):
    """(name, fmt, n, seed) -> (inputs measured, not correctly rounded, max ulp, worst input)."""
    name, fmt, n, seed = job
    import mpmath as mp

    args = _regular(name, S.sample_inputs(name, n, fmt, seed=seed))
    with np.errstate(all="ignore"):
        got = getattr(N, name)(*args)
        if fmt == "f32":
            got = got.astype(np.float32).astype(np.float64)
    f = R._functions()[name]
    wrong = 0
    worst = 0.0
    worst_at = None
    with mp.workprec(R.PREC):
        for i, vals in enumerate(zip(*[a.tolist() for a in args])):
            v = f(*[mp.mpf(a) for a in vals])
            g = float(got[i])
            if isinstance(v, mp.mpc) or mp.isnan(v):
                ok = math.isnan(g)
                err = 0.0 if ok else math.inf
            else:
                cr = float(v) if mp.isinf(v) else R.round_mpf(v, fmt)
                ok = g == cr
                if math.isinf(cr) or not math.isfinite(g):
                    err = 0.0 if ok else math.inf
                else:
                    err = float(abs(mp.mpf(g) - v) / R.ulp_mpf(v, fmt))
            wrong += not ok
            if err > worst:
                worst, worst_at = err, vals
    return name, fmt, len(args[0]), wrong, worst, worst_at


_NUMPY = {
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh",
}


def _numpy_f32(name):
    if name == "logistic":
        return lambda x: np.float32(1) / (np.float32(1) + np.exp(-x))
    if name == "erf":
        return None
    return getattr(np, _NUMPY.get(name, name))


def _speed(name, size=1 << 20, repeat=3):
    nargs = S.DOMAINS[name][0]
    rng = np.random.default_rng(3)
    lo, hi = S.DOMAINS[name][1][0]
    xs = [rng.uniform(lo, hi, size).astype(np.float32) for _ in range(nargs)]
    if name == "power":
        xs[1] = rng.uniform(-5, 5, size).astype(np.float32)
    ours = getattr(N, name)

    def run_ours():
        return ours(*[x.astype(np.float64) for x in xs]).astype(np.float32)

    ref = _numpy_f32(name)

    def best(fn):
        t = math.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            t = min(t, time.perf_counter() - t0)
        return t

    with np.errstate(all="ignore"):
        t_ours = best(run_ours)
        t_ref = best(lambda: ref(*xs)) if ref is not None else math.nan
    return t_ours / size * 1e9, t_ref / size * 1e9


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n32", type=int, default=200_000, help="float32 inputs per function")
    p.add_argument("--n64", type=int, default=100_000, help="float64 inputs per function")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--jobs", type=int, default=1, help="processes for the mpmath references")
    p.add_argument("--only", default="", help="comma-separated function names")
    p.add_argument("--no-speed", action="store_true")
    a = p.parse_args(argv)
    names = [s for s in a.only.split(",") if s] or list(S.FUNCTIONS)
    jobs = []
    chunks = max(1, a.jobs)
    for name in names:
        for fmt, n in (("f32", a.n32), ("f64", a.n64)):
            # split into chunks with different seeds so that several processes can share it
            for c in range(chunks):
                jobs.append((name, fmt, n // chunks, a.seed + 1000 * c))
    results: dict[tuple[str, str], list] = {}
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            outs = list(ex.map(_measure, jobs))
    else:
        outs = [_measure(j) for j in jobs]
    for name, fmt, n, wrong, worst, at in outs:
        r = results.setdefault((name, fmt), [0, 0, 0.0, None])
        r[0] += n
        r[1] += wrong
        if worst >= r[2]:
            r[2], r[3] = worst, at
    print(f"numpy {np.__version__}; mpmath references at {R.PREC} bits; float32 samples of "
          f"{a.n32} and float64 samples of {a.n64} per function (seed {a.seed}); "
          "zeros/inf/NaN inputs excluded (exact cases, tested separately)\n")
    print("| function | f32 inputs | f32 not correctly rounded | f32 max ulp | f64 inputs | f64 max ulp "
          "| f64 worst input | ns/element | numpy f32 ns/element | ratio |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for name in names:
        n32, w32, u32, _ = results[(name, "f32")]
        n64, _, u64, at64 = results[(name, "f64")]
        if a.no_speed:
            ours = ref = math.nan
        else:
            ours, ref = _speed(name)
        ratio = ours / ref if ref == ref else math.nan
        at = ", ".join(repr(v) for v in at64) if at64 else "-"
        ref_s = f"{ref:.2f}" if ref == ref else "n/a"
        ratio_s = f"{ratio:.0f}x" if ratio == ratio else "n/a"
        print(f"| {name} | {n32} | {w32} | {u32:.3f} | {n64} | {u64:.3f} | {at} | {ours:.1f} | {ref_s} | {ratio_s} |")
    print("\nlogistic's numpy reference is 1/(1+exp(-x)) in float32; numpy has no erf.")


if __name__ == "__main__":
    main()
