"""Memory sizes for messages and default limits, shared by the npz reader and the run's memory
estimate so that one command states and bounds sizes one way."""

from __future__ import annotations

import os

DEFAULT_FRACTION = 0.5  # of MemAvailable: room for numpy's temporaries and everything else


def default_memory_limit() -> int | None:
    """Half of the memory available now (MemAvailable in /proc/meminfo, else half of the
    physical memory); None when the machine does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(int(line.split()[1]) * 1024 * DEFAULT_FRACTION)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * DEFAULT_FRACTION)
    except (OSError, ValueError, AttributeError):
        return None


def format_bytes(count: int) -> str:
    """``1536`` -> ``1.5 KiB``; binary units, three significant digits."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
