"""Shared fixture of the reliability tests: the real ``neuron-sim`` command as a subprocess
(``real_cli.cli``)."""

from __future__ import annotations

from typing import Callable

import pytest

from real_cli import cli


@pytest.fixture(name="cli")
def cli_fixture() -> Callable[..., tuple[int, str, str]]:
    """The real command line: ``cli(*args, cwd=..., timeout=...) -> (code, stdout, stderr)``."""
    return cli
