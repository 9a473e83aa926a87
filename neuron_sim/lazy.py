"""A module imported on first use: ``z3 = LazyModule("z3")`` reads like ``import z3`` but costs
nothing until an attribute is read.

z3 takes a tenth of a second to import and most commands never build a term (``run``,
``opt`` of the collective passes, ``--help``), so the analyses that need it bind it through
this proxy instead of importing it at module load.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``: the first attribute read imports it, and each attribute
    read is then cached on the proxy so later reads cost a plain lookup."""

    def __init__(self, name: str) -> None:
        self._lazy_name = name
        self._lazy_module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_lazy_"):
            raise AttributeError(attribute)
        if self._lazy_module is None:
            self._lazy_module = importlib.import_module(self._lazy_name)
        value = getattr(self._lazy_module, attribute)
        setattr(self, attribute, value)
        return value

    def __repr__(self) -> str:
        state = "loaded" if self._lazy_module is not None else "not yet imported"
        return f"<lazy module {self._lazy_name!r} ({state})>"
