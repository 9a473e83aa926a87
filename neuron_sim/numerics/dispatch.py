"""Run code under numpy's CPU-dispatch settings, to check results that must not depend on them.

numpy chooses SIMD code paths at run time from the CPU's features (AVX-512, AVX2...), and some
of its loops give different bits on different paths. ``NPY_DISABLE_CPU_FEATURES``, read when
numpy is imported, turns dispatch targets off; this module names the targets of the installed
numpy (numpy 2 spells the x86 groups ``X86_V4``/``X86_V3``, older numpy ``AVX512F``,
``AVX512_SKX``, ``AVX2``, ``FMA3``...) and runs a snippet in a fresh interpreter under a
setting, after checking there that every named target really is off.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

__all__ = ["NotHonoured", "cpu_features", "dispatch_targets", "require_honoured", "run_under",
           "settings", "still_on"]


class NotHonoured(RuntimeError):
    """The child's numpy did not turn the requested dispatch targets off."""


def _umath():
    try:
        from numpy._core import _multiarray_umath as m  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core import _multiarray_umath as m
    return m


def cpu_features() -> dict[str, bool]:
    """This process's numpy view of the CPU: feature name -> available and enabled."""
    return dict(_umath().__cpu_features__)


def dispatch_targets() -> list[str]:
    """The dispatch targets this numpy was built with (beyond its baseline)."""
    return list(getattr(_umath(), "__cpu_dispatch__", []))


_AVX512 = ("AVX512", "X86_V4")
_AVX2 = ("X86_V3", "AVX2", "FMA3", "AVX", "F16C", "AVX_VNNI", "FMA4", "XOP")


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def settings() -> dict[str, tuple[str, ...]]:
    """Settings to compare: name -> dispatch targets to disable.

    Always ``native`` (nothing disabled). On x86 also ``no-avx512`` (every AVX-512 target,
    X86_V4 included) and ``no-avx512-avx2`` (those and the AVX2-level ones), each only when this
    numpy has such targets *and* the CPU has them (otherwise the setting equals ``native``).
    """
    out: dict[str, tuple[str, ...]] = {"native": ()}
    if not _is_x86():
        return out
    targets = dispatch_targets()
    feats = cpu_features()
    avx512 = tuple(t for t in targets if t.startswith(_AVX512))
    avx2 = tuple(t for t in targets if t in _AVX2 or t.startswith("FMA3") or "AVX2" in t)
    if any(feats.get(t) for t in avx512):
        out["no-avx512"] = avx512
    if any(feats.get(t) for t in avx2 + avx512):
        out["no-avx512-avx2"] = avx512 + tuple(t for t in avx2 if t not in avx512)
    return out


def still_on(disabled: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """Of the ``disabled`` targets (what ``NPY_DISABLE_CPU_FEATURES`` named for this process):
    those this numpy still has on, and those it does not know. Both empty: honoured."""
    features = cpu_features()
    return ([n for n in disabled if features.get(n)],
            [n for n in disabled if n not in features])


def require_honoured(disabled: tuple[str, ...] | list[str]) -> None:
    """Exit with code 97 and one line on stderr unless every ``disabled`` target is off here
    (a run under a setting that was not honoured would compare nothing)."""
    on, unknown = still_on(disabled)
    if on or unknown:
        sys.stderr.write(f"NPY_DISABLE_CPU_FEATURES not honoured: still on {on}, "
                         f"unknown {unknown}\n")
        sys.exit(97)


_PRELUDE = """
from neuron_sim.numerics.dispatch import require_honoured
require_honoured({wanted!r})
"""


def run_under(disabled: tuple[str, ...] | list[str], code: str, timeout: float = 300.0) -> str:
    """Run ``code`` in a new Python with ``disabled`` dispatch targets off; return its stdout.

    Raises NotHonoured when the child's numpy still has one of them on (or does not know it),
    and RuntimeError when the snippet fails.
    """
    env = dict(os.environ)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    env.pop("NPY_ENABLE_CPU_FEATURES", None)
    if disabled:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(disabled)
    program = _PRELUDE.format(wanted=list(disabled)) + "\n" + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", program],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode == 97:
        raise NotHonoured(proc.stderr.strip())
    if proc.returncode != 0:
        raise RuntimeError(
            f"snippet failed under NPY_DISABLE_CPU_FEATURES={' '.join(disabled)!r}:\n{proc.stderr}"
        )
    return proc.stdout
