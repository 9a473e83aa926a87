"""Shared helpers of the reliability tests: the real ``neuron-sim`` command as a subprocess.

Tests take the ``cli`` fixture, which is the ``cli`` function below.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 120,
        env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m neuron_sim.cli ARGS`` in ``cwd``; return (exit code, stdout, stderr).

    ``env`` adds to (or overrides) this process's environment; the repository is put first on
    PYTHONPATH so the checkout under test is what runs.
    """
    environment = dict(os.environ, **(env or {}))
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *filter(None, [environment.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-m", "neuron_sim.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=environment)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(name="cli")
def cli_fixture() -> Callable[..., tuple[int, str, str]]:
    """The real command line: ``cli(*args, cwd=..., timeout=...) -> (code, stdout, stderr)``."""
    return cli
