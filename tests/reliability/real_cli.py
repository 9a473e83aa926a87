"""The real ``neuron-sim`` command as a subprocess, directly or under ``mpiexec``: what every
reliability test runs. (A plain module, imported as ``real_cli``: tests/ has no packages.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
needs_mpiexec = pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec is not installed")


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus ``extra``, with the checkout under test first on
    PYTHONPATH."""
    env = dict(os.environ, **(extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env


def cli(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 120,
        env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m neuron_sim.cli ARGS`` in ``cwd``; return (exit code, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "neuron_sim.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=environment(env))
    return done.returncode, done.stdout, done.stderr


def mpiexec(n: int, *args: str, cwd: str | os.PathLike = REPO,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """``mpiexec -n N python -m neuron_sim.cli ARGS`` in ``cwd``."""
    return subprocess.run([str(MPIEXEC), "-n", str(n), sys.executable, "-m", "neuron_sim.cli",
                           *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=environment())
