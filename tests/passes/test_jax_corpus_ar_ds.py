"""The JAX corpus's all-reduce + dynamic-slice modules through both AR+DS matchers.

Observed (and expected): neither matcher fires on anything JAX emits.

* Compiled modules (``spmd_ar_ds_*``): XLA fuses the offset arithmetic and the dynamic-slice
  into a loop fusion (``select_dynamic-slice_fusion``); OpExpanderPass never visits fusion
  computations, and the dynamic-slice in there slices a fusion parameter (check 2 fails).
* Lowered modules (``lowered_spmd_ar_ds_*``): the dynamic-slice sits in the shard_map body, a
  called computation that *is* visited, but JAX's offset is
  ``select(lt(m, 0), add(m, N), m)`` with ``m = multiply(convert(remainder(divide(pid, 1), 8)), s)``
  (negative-index wrap-around, axis_index from partition-id): not a multiply of partition-id
  (single group, check 6) and not a reshape (multiple groups, step 7).
"""

from __future__ import annotations

import pytest

from neuron_sim.hlo import Opcode, parse_module_file
from neuron_sim.passes import get_pass

from pass_fixtures import JAX_CORPUS

SINGLE = "aws_neuron_rewrite_all_reduce_dynamic_slice"
MULTIPLE = "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"
CORPUS = sorted(JAX_CORPUS.glob("*ar_ds*.hlo"))

FUSED = {SINGLE: (2, "Dynamic slice operand is not an all-reduce."),
         MULTIPLE: (2, "Dynamic slice operand is not an all-reduce.")}
UNFUSED = {SINGLE: (6, "Start index of the sliced dimension is not a multiply."),
           MULTIPLE: (7, "Index operand is not a reshape.")}
# module -> (dynamic-slice name, in a fusion computation?, per-pass (check, reason))
OBSERVED = {
    "spmd_ar_ds_idiom_1d": ("dynamic_slice.4", True, FUSED),
    "spmd_ar_ds_idiom_int_1d": ("dynamic_slice.4", True, FUSED),
    "spmd_ar_ds_x_2x4": ("dynamic_slice.4", True, FUSED),
    "lowered_spmd_ar_ds_gspmd": ("dynamic_slice.1", False, UNFUSED),
    "lowered_spmd_ar_ds_sdy": ("dynamic_slice.1", False, UNFUSED),
}


def test_the_corpus_has_the_ar_ds_modules_we_recorded():
    assert {p.stem for p in CORPUS} >= set(OBSERVED)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
@pytest.mark.parametrize("key", [SINGLE, MULTIPLE])
def test_no_jax_ar_ds_module_matches_either_matcher(path, key):
    module = parse_module_file(str(path))
    before = module.to_text()
    rewrite = get_pass(key)
    assert rewrite.run(module) is False
    assert module.to_text() == before
    assert rewrite.candidates(module) == []


@pytest.mark.parametrize("name", sorted(OBSERVED))
@pytest.mark.parametrize("key", [SINGLE, MULTIPLE])
def test_why_each_recorded_module_does_not_match(name, key):
    module = parse_module_file(str(JAX_CORPUS / f"{name}.hlo"))
    ds_name, fused, outcome = OBSERVED[name]
    slices = [(comp, inst) for comp in module.computations for inst in comp.instructions
              if inst.opcode is Opcode.DYNAMIC_SLICE]
    assert [inst.name for _, inst in slices] == [ds_name]
    comp, ds = slices[0]
    assert (comp in module.fusion_computations()) is fused
    result = get_pass(key).explain(ds)
    assert (result.check, result.reason) == outcome[key]
