"""The pass registry: every built-in pass in one explicit list, found by key or class name.

``BUILTIN_PASSES`` is the list: a new pass is one import and one entry here (a test checks
that every pass class under ``passes/neuron`` and ``passes/xla`` is listed); everything else the
system knows about a pass is declared on its class (``neuron_sim.passes.base.HloPass``), and the
named pipelines (``named_pipelines``) and docs/passes.md's tables (``docs_tables``) are built from
the classes listed here. Nothing depends on which modules happen to have been imported:
``get_pass(key)`` works in a fresh process for every key ``neuron-sim passes`` lists.
``register_pass`` adds a pass defined elsewhere (a test, a user's script) under its key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from neuron_sim.errors import UserError
from neuron_sim.passes.base import HloPass, UnknownPassError
from neuron_sim.passes.neuron.delete_permute import DeletePermute, DeletePermuteGuarded
from neuron_sim.passes.neuron.flatten_entry_tuple import FlattenEntryTuple
from neuron_sim.passes.neuron.inject_numerical_errors import InjectNumericalErrors
from neuron_sim.passes.neuron.peel_optimization_barriers import PeelOptimizationBarriers
from neuron_sim.passes.neuron.rewrite_module_dtype import RewriteModuleDtype
from neuron_sim.passes.neuron.strip_trivial_collectives import StripTrivialCollectives
from neuron_sim.passes.neuron.constant_slice_clamp_simplifier import ConstantSliceClampSimplifier
from neuron_sim.passes.neuron.constant_slice_convert_canonicalizer import ConstantSliceConvertCanonicalizer
from neuron_sim.passes.neuron.default_metadata import DefaultMetadata
from neuron_sim.passes.neuron.dynamic_slice_reshape_canonicalizer import DynamicSliceReshapeCanonicalizer
from neuron_sim.passes.neuron.eliminate_redundant_compare import EliminateRedundantCompare
from neuron_sim.passes.neuron.metadata_naming import MetadataNaming
from neuron_sim.passes.neuron.resolve_self_comparison import ResolveSelfComparison
from neuron_sim.passes.neuron.device_assignment_legalization import DeviceAssignmentLegalization
from neuron_sim.passes.neuron.rewrite_scatter_partition import RewriteScatterPartition
from neuron_sim.passes.neuron.dynamic_slice_transpose import DynamicSliceTranspose
from neuron_sim.passes.neuron.inline_weights import InlineWeights
from neuron_sim.passes.neuron.partition_embeding_ops import PartitionEmbedingOps
from neuron_sim.passes.neuron.replace_minimum_constant import ReplaceMinimumConstant
from neuron_sim.passes.neuron.replace_rng import ReplaceRng
from neuron_sim.passes.neuron.rewrite_all_reduce_dynamic_slice import RewriteAllReduceDynamicSlice
from neuron_sim.passes.neuron.rewrite_all_reduce_dynamic_slice_multiple_groups import (
    RewriteAllReduceDynamicSliceMultipleGroups)
from neuron_sim.passes.neuron.rewrite_all_reduce_dynamic_slice_proven import (
    RewriteAllReduceDynamicSliceProven)
from neuron_sim.passes.neuron.hilo_conditional_to_select import HiloConditionalToSelect
from neuron_sim.passes.neuron.transform_variadic_reduce import TransformVariadicReduce
from neuron_sim.passes.xla.dce import DeadCodeElimination
from neuron_sim.passes.xla.all_reduce_simplifier import AllReduceSimplifier
from neuron_sim.passes.xla.reduce_scatter_creator import ReduceScatterCreator

# In docs/passes.md's order: the table lists the passes as they come here.
BUILTIN_PASSES: tuple[type[HloPass], ...] = (
    RewriteAllReduceDynamicSlice,
    RewriteAllReduceDynamicSliceMultipleGroups,
    DeletePermute,
    DeletePermuteGuarded,
    FlattenEntryTuple,
    PeelOptimizationBarriers,
    StripTrivialCollectives,
    RewriteModuleDtype,
    InjectNumericalErrors,
    DeadCodeElimination,
    RewriteAllReduceDynamicSliceProven,
    ReduceScatterCreator,
    AllReduceSimplifier,
    InlineWeights,
    ReplaceRng,
    DeviceAssignmentLegalization,
    RewriteScatterPartition,
    ResolveSelfComparison,
    ConstantSliceClampSimplifier,
    ConstantSliceConvertCanonicalizer,
    DynamicSliceReshapeCanonicalizer,
    EliminateRedundantCompare,
    MetadataNaming,
    DefaultMetadata,
    HiloConditionalToSelect,
    TransformVariadicReduce,
    DynamicSliceTranspose,
    ReplaceMinimumConstant,
    PartitionEmbedingOps,
)

_REGISTERED: dict[str, type[HloPass]] = {cls.name: cls for cls in BUILTIN_PASSES}

P = TypeVar("P", bound=type[HloPass])


def _owner_of(name: str) -> type[HloPass] | None:
    """The pass registered under key or class name ``name``."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    return next((cls for cls in _REGISTERED.values() if cls.__name__ == name), None)


def register_pass(key: str) -> Callable[[P], P]:
    """Class decorator: register a pass defined outside this package under ``key`` (which
    becomes its ``name``) and its class name; a key or class name already taken is an error."""

    def decorate(cls: P) -> P:
        for taken, what in ((key, "key"), (cls.__name__, "class name")):
            owner = _owner_of(taken)
            if owner is not None and owner is not cls:
                raise ValueError(f"pass {what} {taken!r} is already registered by "
                                 f"{owner.__module__}.{owner.__name__}")
        cls.name = key
        _REGISTERED[key] = cls
        return cls

    return decorate


def pass_keys() -> list[str]:
    """Every registry key, sorted."""
    return sorted(_REGISTERED)


def pass_class(name: str) -> type[HloPass]:
    """The pass class registered under ``name`` (a registry key or a class name)."""
    cls = _owner_of(name)
    if cls is None:
        raise UnknownPassError(f"unknown pass {name!r}; valid passes are: "
                               + ", ".join(pass_keys()))
    return cls


def get_pass(name: str, **options: Any) -> HloPass:
    """A new instance of the pass registered under ``name`` (registry key or class name);
    ``options`` (``topology=`` and the pass's declared options) override the run's context."""
    return pass_class(name)(**options)


def parse_pass_list(text: str) -> list[HloPass]:
    """``"a,b"`` -> [get_pass("a"), get_pass("b")]; an empty name is a UserError, an unknown one
    an UnknownPassError."""
    names = [name.strip() for name in text.split(",")]
    if not text.strip() or any(not name for name in names):
        raise UserError(f"pass list {text!r} has an empty pass name; give a comma-separated "
                        "list such as aws_neuron_delete_permute,dce")
    return [get_pass(name) for name in names]


@dataclass(frozen=True)
class PassInfo:
    """What `neuron-sim passes` lists about one registered pass."""

    key: str
    class_name: str
    seed_status: str
    contract: str
    seed: str
    summary: str
    options: tuple[dict[str, str], ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "class": self.class_name, "seed_status": self.seed_status,
                "contract": self.contract, "seed": self.seed, "summary": self.summary,
                "options": list(self.options)}


def list_passes() -> list[PassInfo]:
    """Every registered pass, sorted by key."""
    return [PassInfo(key, cls.__name__, str(cls.seed_status), cls.contract.name, cls.seed,
                     cls.summary,
                     tuple({"name": o.name, "type": o.type_name,
                            "default": str(o.default), "help": o.help} for o in cls.options))
            for key, cls in sorted(_REGISTERED.items())]
