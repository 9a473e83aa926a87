"""A module imported on first use: ``z3 = LazyModule("z3")`` reads like ``import z3`` but costs
nothing until an attribute is read. And a table whose entries are registered by modules imported
on first use (``LazyTable``: the interpreter's op table, the checker's shape rules).

z3 takes a tenth of a second to import and most commands never build a term (``run``,
``opt`` of the collective passes, ``--help``), so the analyses that need it bind it through
this proxy instead of importing it at module load.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, Iterator


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


def lazy_exports(package: str, names: dict[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` (PEP 562) for public names that load their
    module on first use: ``names`` maps each name to its module, relative to ``package``
    (``"ir"``) or absolute; the first read of a name imports the module and keeps the value in
    the package's ``namespace`` (its ``globals()``), so later reads are plain lookups."""

    def module_of(name: str) -> str:
        where = names[name]
        return where if "." in where else f"{package}.{where}"

    def getattr_(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_of(name)), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *names])

    return getattr_, dir_


class LazyTable(dict):
    """A table keyed by opcode whose entries are registered by modules imported on first use.

    ``owners`` names, for each key, the module that registers it; ``load(module_name)`` imports
    that module and puts its entries in the table (a decorator writing with
    ``dict.__setitem__``, or ``load`` copying them). Reading a key (``get``, ``[]``, ``in``)
    loads its owner first if it has not been loaded; a key no owner is listed for loads every
    owner (it may still be registered by one of them), and walking the whole table (``keys``,
    ``values``, ``items``, iteration, ``len``) loads them all. So a program pays only for the
    families it uses — ``neuron-sim run`` of an elementwise module imports neither the
    collectives nor the convolutions — and sees the same table as if every family had been
    imported up front. A module that registers a key under another owner is an error the
    registering code raises (``owner_of`` says which owner a key has)."""

    def __init__(self, owners: dict[Any, str], load: Callable[[str], None]) -> None:
        super().__init__()
        self._owners = owners
        self._load = load
        self._loaded: set[str] = set()

    def owner_of(self, key: Any) -> str | None:
        """The module listed as registering ``key`` (None: not listed)."""
        return self._owners.get(key)

    def load_owner(self, key: Any) -> None:
        """Load the module that registers ``key`` (every owner if none is listed)."""
        owner = self._owners.get(key)
        if owner is None:
            self.load_all()
        elif owner not in self._loaded:
            self._load_once(owner)

    def load_all(self) -> None:
        """Load every owner (in the order of the owners table)."""
        for owner in dict.fromkeys(self._owners.values()):
            if owner not in self._loaded:
                self._load_once(owner)

    def _load_once(self, owner: str) -> None:
        """Load ``owner``, marked loaded first (a lookup made while it loads does not load it
        again) and unmarked if loading fails, so that the next lookup raises the failure
        again instead of finding the table without that owner's entries."""
        self._loaded.add(owner)
        try:
            self._load(owner)
        except BaseException:
            self._loaded.discard(owner)
            raise

    def get(self, key: Any, default: Any = None) -> Any:
        value = dict.get(self, key, _ABSENT)
        if value is _ABSENT:
            self.load_owner(key)
            value = dict.get(self, key, default)
        return value

    def __missing__(self, key: Any) -> Any:
        self.load_owner(key)
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        self.load_owner(key)
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[Any]:
        self.load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.load_all()
        return dict.__len__(self)

    def keys(self):  # type: ignore[override]
        self.load_all()
        return dict.keys(self)

    def values(self):  # type: ignore[override]
        self.load_all()
        return dict.values(self)

    def items(self):  # type: ignore[override]
        self.load_all()
        return dict.items(self)

    def __repr__(self) -> str:
        return f"<LazyTable: {dict.__len__(self)} entries, {len(self._loaded)} owners loaded>"


_ABSENT = object()
