"""Named pipelines as data: ``PIPELINES[name]`` is the ordered tuple of (``#NN``, registry key).

``neuron-closer`` is the Neuron HLO closer of hlo-misc-cleanup-sweep.txt: its passes in
registration order (the ``#NN`` of RegisterHiloHloPasses, which the seed calls a strong proxy
for the default pipeline's order). The seed fixes #21 MetadataNaming, #55 DynamicSliceTranspose,
#65 aws_neuron_default_metadata, #67 ResolveSelfComparison, #69 DeviceAssignmentLegalization,
#90 ConstantSliceClampSimplifier, #93 RewriteScatterPartition, #109
ConstantSliceConvertCanonicalizer, #110 DynamicSliceReshapeCanonicalizer; the other numbers are
our assignment of the slots the seed's abstract lists per group (IO shaping #14–#16, #54, #59;
canonicalizers #17, #24, #66; late #20, #22, #52, #70), placed where its prose puts each pass
(docs/passes.md, "The closer"). InjectNumericalErrors (#22, debug) is in the list; leave it out
with ``skip`` (``--skip aws_neuron_inject_numerical_errors``) — without ``targets`` it fails.
"""

from __future__ import annotations

from typing import Iterable

from neuron_sim.errors import UserError
from neuron_sim.passes.base import HloPass
from neuron_sim.passes.registry import get_pass

CLOSER: tuple[tuple[int, str], ...] = (
    (14, "aws_neuron_flatten_entry_tuple"),
    (15, "aws_neuron_inline_weights"),
    (16, "aws_neuron_replace_rng"),
    (17, "aws_neuron_partition_embeding_ops"),
    (20, "aws_neuron_rewrite_module_dtype"),
    (21, "aws_neuron_metadata_naming"),
    (22, "aws_neuron_inject_numerical_errors"),
    (24, "aws_neuron_eliminate_redundant_compare"),
    (52, "aws_neuron_replace_minimum_constant"),
    (54, "aws_neuron_peel_optimization_barriers"),
    (55, "aws_neuron_dynamic_slice_transpose"),
    (59, "aws_neuron_strip_trivial_collectives"),
    (65, "aws_neuron_default_metadata"),
    (66, "aws_neuron_transform_variadic_reduce"),
    (67, "aws_neuron_resolve_self_comparison"),
    (69, "aws_neuron_device_assignment_legalization"),
    (70, "aws_neuron_hilo_conditional_to_select"),
    (90, "aws_neuron_constant_slice_clamp_simplifier"),
    (93, "aws_neuron_rewrite_scatter_partition"),
    (109, "aws_neuron_constant_slice_convert_canonicalizer"),
    (110, "aws_neuron_dynamic_slice_reshape_canonicalizer"),
)

PIPELINES: dict[str, tuple[tuple[int, str], ...]] = {"neuron-closer": CLOSER}


def pipeline_entries(name: str, skip: Iterable[str] = ()) -> list[tuple[int, str]]:
    """The (``#NN``, key) entries of pipeline ``name`` in order, without the keys in ``skip``.

    An unknown pipeline, or a skipped key that is not in it, is a UserError."""
    if name not in PIPELINES:
        raise UserError(f"unknown pipeline {name!r}; pipelines are: {', '.join(PIPELINES)}")
    entries = list(PIPELINES[name])
    keys = {key for _, key in entries}
    skipped = set(skip)
    unknown = sorted(skipped - keys)
    if unknown:
        raise UserError(f"--skip {unknown[0]}: pipeline {name} has no pass {unknown[0]!r}")
    return [(number, key) for number, key in entries if key not in skipped]


def named_pipeline(name: str, skip: Iterable[str] = ()) -> list[HloPass]:
    """New instances of pipeline ``name``'s passes, in order (``pipeline_entries``)."""
    return [get_pass(key) for _, key in pipeline_entries(name, skip)]
