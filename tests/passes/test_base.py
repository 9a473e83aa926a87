"""The pass framework: OpExpanderPass's shared run, atomicity, the rewrite log, the pipeline and
the registry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neuron_sim.passes as passes
from neuron_sim.hlo import HloInstruction, Opcode, parse_module
from neuron_sim.passes import registry
from neuron_sim.passes.base import HloPass, OpExpanderPass, PassError, SeedStatus, UnknownPassError
from neuron_sim.passes.pass_pipeline import PassPipeline
from neuron_sim.passes.registry import get_pass, list_passes, pass_keys, register_pass

NEGATES = """HloModule negates

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %negate.in_fusion = f32[4]{0} negate(%p)
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %negate.1 = f32[4]{0} negate(%x)
  %negate.2 = f32[4]{0} negate(%negate.1)
  %fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused
  ROOT %tuple = (f32[4]{0}, f32[4]{0}) tuple(%negate.2, %fusion)
}
"""


class NegateToAbs(OpExpanderPass):
    """Toy expander: negate(x) -> abs(x). Records what it saw when matching."""

    name = "negate_to_abs"

    def __init__(self) -> None:
        super().__init__()
        self.matched_names: list[str] = []
        self.expanded_names: list[str] = []

    def matches(self, inst: HloInstruction) -> bool:
        if inst.opcode is Opcode.NEGATE:
            self.matched_names.append(inst.name)
            # Collect first, then mutate: nothing has been expanded while matching.
            assert not self.expanded_names
            return True
        return False

    def expand(self, inst: HloInstruction) -> HloInstruction:
        self.expanded_names.append(inst.name)
        return HloInstruction("abs", Opcode.ABS, inst.shape, [inst.operand(0)])


class ExpandRaises(NegateToAbs):
    name = "expand_raises"

    def expand(self, inst: HloInstruction) -> HloInstruction:
        if self.expanded_names:  # the first rewrite succeeds, the second raises
            raise RuntimeError("boom")
        return super().expand(inst)


def test_op_expander_collects_in_post_order_then_expands_and_skips_fusion_computations():
    module = parse_module(NEGATES)
    toy = NegateToAbs()
    assert toy.run(module) is True
    assert toy.matched_names == ["negate.1", "negate.2"]
    assert toy.expanded_names == ["negate.1", "negate.2"]
    entry = module.entry
    opcodes = [i.opcode.spelling for i in entry.instructions]
    assert opcodes == ["parameter", "abs", "abs", "fusion", "tuple"]
    first, second = entry.instructions[1], entry.instructions[2]
    assert first.operand(0).name == "x" and second.operand(0) is first
    assert module.computation("fused").root.opcode is Opcode.NEGATE
    assert toy.rewrites == ["%negate.1 -> %abs (abs)", "%negate.2 -> %abs.1 (abs)"]


def test_a_pass_that_raises_leaves_the_module_unchanged_and_says_which_pass():
    module = parse_module(NEGATES)
    before = module.to_text()
    computations = list(module.computations)
    failing = ExpandRaises()
    with pytest.raises(PassError, match=r"pass expand_raises failed on module negates and left "
                                        r"it unchanged: boom"):
        failing.run(module)
    assert module.to_text() == before
    assert module.computations == computations  # the very same objects
    assert failing.rewrites == []


CHAIN_HEADER = "HloModule chain\n\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n"


def negate_chain(length: int) -> str:
    lines = [f"  %n{i} = f32[4]{{0}} negate(%{'x' if i == 0 else f'n{i - 1}'})"
             for i in range(length)]
    lines[-1] = "  ROOT" + lines[-1][1:]
    return CHAIN_HEADER + "\n".join(lines) + "\n}\n"


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_a_failure_after_any_number_of_rewrites_leaves_the_module_unchanged(case):
    length, fail_at = case

    class FailsAt(NegateToAbs):
        name = "fails_at"

        def expand(self, inst):
            if len(self.expanded_names) == fail_at:
                raise RuntimeError("boom")
            return super().expand(inst)

    module = parse_module(negate_chain(length))
    before = module.to_text()
    with pytest.raises(PassError):
        FailsAt().run(module)
    assert module.to_text() == before
    assert sum(1 for i in module.entry.instructions if i.opcode is Opcode.NEGATE) == length


def test_a_pass_that_changes_nothing_keeps_the_module_objects():
    module = parse_module(NEGATES.replace("negate(%x)", "abs(%x)")
                          .replace("negate(%negate.1)", "abs(%negate.1)"))
    entry_instructions = list(module.entry.instructions)
    assert NegateToAbs().run(module) is False
    assert module.entry.instructions == entry_instructions


def test_expand_returning_none_declines():
    class Declines(NegateToAbs):
        def expand(self, inst):
            return None

    module = parse_module(NEGATES)
    before = module.to_text()
    assert Declines().run(module) is False
    assert module.to_text() == before


def test_pipeline_runs_in_order_logs_per_pass_and_is_atomic():
    module = parse_module(NEGATES)
    pipeline = PassPipeline([NegateToAbs(), NegateToAbs()])
    assert pipeline.run(module) is True
    assert [changed for _, changed in pipeline.results] == [True, False]
    assert pipeline.rewrites == ["negate_to_abs: %negate.1 -> %abs (abs)",
                                 "negate_to_abs: %negate.2 -> %abs.1 (abs)"]

    class OnlySecond(NegateToAbs):
        def matches(self, inst):
            return inst.name == "negate.2"

    class AlwaysRaises(NegateToAbs):
        name = "always_raises"

        def expand(self, inst):
            raise RuntimeError("boom")

    module = parse_module(NEGATES)
    before = module.to_text()
    with pytest.raises(PassError, match="always_raises"):
        PassPipeline([OnlySecond(), AlwaysRaises()]).run(module)
    assert module.to_text() == before  # the first pass's rewrite is rolled back too


def test_rewritten_returns_the_rewrite_beside_the_untouched_module():
    module = parse_module(NEGATES)
    before = module.to_text()
    rewrite = NegateToAbs().rewritten(module)
    assert module.to_text() == before
    assert [i.opcode.spelling for i in rewrite.entry.instructions] == \
        ["parameter", "abs", "abs", "fusion", "tuple"]
    unchanged = parse_module(NEGATES.replace("negate(%x)", "abs(%x)")
                             .replace("negate(%negate.1)", "abs(%negate.1)"))
    assert NegateToAbs().rewritten(unchanged) is None


class OnlySecond(NegateToAbs):
    name = "only_second"

    def matches(self, inst):
        return inst.name == "negate.2" and super().matches(inst)


class AlwaysRaises(NegateToAbs):
    name = "always_raises"

    def expand(self, inst):
        raise RuntimeError("boom")


@pytest.mark.parametrize("passes, changes", [
    ((NegateToAbs, NegateToAbs), [True, False]),
    ((OnlySecond, NegateToAbs), [True, True]),
    ((AlwaysRaises,), None),
    ((OnlySecond, AlwaysRaises), None),
])
def test_pipeline_rewritten_is_what_run_makes_of_a_clone(passes, changes):
    """The same target text, log and per-pass results as ``run`` on a clone (or the same
    error), and the module itself untouched."""
    module = parse_module(NEGATES)
    before = module.to_text()
    by_run, by_rewritten = PassPipeline([p() for p in passes]), PassPipeline([p() for p in passes])
    if changes is None:
        with pytest.raises(PassError, match="always_raises failed on module negates") as ran:
            by_run.run(module.clone())
        with pytest.raises(PassError) as rewrote:
            by_rewritten.rewritten(module)
        assert str(rewrote.value) == str(ran.value)
        assert by_rewritten.rewrites == []
    else:
        target = module.clone()
        assert by_run.run(target) is True
        rewrite = by_rewritten.rewritten(module)
        assert rewrite.to_text() == target.to_text()
        assert by_rewritten.rewrites == by_run.rewrites
        assert [c for _, c in by_rewritten.results] == [c for _, c in by_run.results] == changes
    assert module.to_text() == before


def test_a_pipeline_of_one_pass_copies_the_module_once(monkeypatch):
    """run copies the module for the pipeline and again for its pass; rewritten leaves the
    copy to the pass (the verifier's and the minimizer's targets are such copies)."""
    from neuron_sim.hlo.ir import HloModule

    copies = []
    real = HloModule.clone
    monkeypatch.setattr(HloModule, "clone", lambda self: copies.append(self) or real(self))
    module = parse_module(NEGATES)
    PassPipeline([NegateToAbs()]).rewritten(module)
    assert copies == [module]
    copies.clear()
    PassPipeline([NegateToAbs()]).run(module)
    assert copies == [module]


def test_pipeline_accepts_registry_keys():
    pipeline = PassPipeline(["aws_neuron_delete_permute", "DeadCodeElimination"])
    assert [p.name for p in pipeline.passes] == ["aws_neuron_delete_permute", "dce"]


SEED_KEYS = {
    "aws_neuron_rewrite_all_reduce_dynamic_slice": "RewriteAllReduceDynamicSlice",
    "aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups":
        "RewriteAllReduceDynamicSliceMultipleGroups",
    "aws_neuron_delete_permute": "DeletePermute",
    "delete_permute_guarded": "DeletePermuteGuarded",
    "dce": "DeadCodeElimination",
}


@pytest.mark.parametrize("key,class_name", SEED_KEYS.items())
def test_registry_finds_a_pass_by_key_and_by_class_name(key, class_name):
    by_key, by_class = get_pass(key), get_pass(class_name)
    assert type(by_key) is type(by_class)
    assert type(by_key).__name__ == class_name
    assert by_key.name == key
    assert by_key is not get_pass(key)  # a fresh instance each time


def test_every_pass_declares_contract_seed_status_and_seed():
    infos = {info.key: info for info in list_passes()}
    assert set(SEED_KEYS) <= set(infos)
    for info in infos.values():
        assert info.contract in {"exact", "refinement", "tolerance", "changes-results"}
        assert info.seed_status in {"faithful", "our reading", "inferred"}
        assert info.seed and info.summary
    assert infos["aws_neuron_delete_permute"].seed_status == "faithful"
    assert infos["aws_neuron_rewrite_all_reduce_dynamic_slice"].seed_status == "our reading"
    assert infos["aws_neuron_rewrite_all_reduce_dynamic_slice_multiple_groups"].seed_status \
        == "our reading"
    assert infos["delete_permute_guarded"].seed_status == "inferred"
    assert all(infos[key].contract == "exact" for key in SEED_KEYS)
    # The contracts issues 12 and 13 give the cleanup tier's non-exact passes.
    assert {key: info.contract for key, info in infos.items() if info.contract != "exact"} == {
        "aws_neuron_replace_rng": "refinement",
        "aws_neuron_replace_minimum_constant": "refinement",
        "aws_neuron_rewrite_scatter_partition": "refinement",
        "aws_neuron_rewrite_module_dtype": "tolerance",
        "aws_neuron_inject_numerical_errors": "changes-results",
    }


def test_unknown_pass_is_one_sentence_listing_the_valid_names():
    with pytest.raises(UnknownPassError) as error:
        get_pass("delete_permute")
    message = str(error.value)
    assert message.startswith("unknown pass 'delete_permute'; valid passes are: ")
    for key in SEED_KEYS:
        assert key in message
    assert "\n" not in message
    assert isinstance(error.value, ValueError)  # the CLI reports it with exit code 2


def test_register_pass_by_key_and_class_name_and_refuses_clashes(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))

    @register_pass("toy_key")
    class ToyPass(HloPass):
        seed_status = SeedStatus.INFERRED

        def run_on_module(self, module, context):
            return False

    assert ToyPass.name == "toy_key"
    assert isinstance(get_pass("ToyPass"), ToyPass)
    assert "toy_key" in pass_keys()
    with pytest.raises(ValueError, match="already registered"):
        register_pass("toy_key")(type("Other", (HloPass,), {}))
    with pytest.raises(ValueError, match="already registered"):
        register_pass("aws_neuron_delete_permute")(type("Another", (HloPass,), {}))


def test_package_exports_the_public_api():
    assert passes.get_pass is get_pass and passes.PassPipeline is PassPipeline
    assert passes.OpExpanderPass is OpExpanderPass and passes.HloPass is HloPass


SUMS = """HloModule sums

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4]) -> f32[] {
  %x = f32[4]{0} parameter(0)
  %zero = f32[] constant(0)
  ROOT %reduce = f32[] reduce(%x, %zero), dimensions={0}, to_apply=%sum
}
"""


class SumToMax(OpExpanderPass):
    """Edits a reduce's callee in place (add -> maximum) and returns the reduce itself."""

    name = "sum_to_max"

    def matches(self, inst: HloInstruction) -> bool:
        return inst.opcode is Opcode.REDUCE and inst.to_apply.root.opcode is Opcode.ADD

    def expand(self, inst: HloInstruction) -> HloInstruction:
        inst.to_apply.root.opcode = Opcode.MAXIMUM
        return inst


def test_an_expansion_that_returns_its_instruction_is_an_in_place_change_and_is_kept():
    module = parse_module(SUMS)
    reduce = module.entry.root
    hlo_pass = SumToMax()
    assert hlo_pass.run(module) is True
    assert module.computation("sum").root.opcode is Opcode.MAXIMUM
    assert module.entry.root.name == reduce.name
    assert hlo_pass.rewrites == ["%reduce changed in place (reduce)"]
    assert hlo_pass.run(module) is False  # nothing matches any more


def test_matches_that_all_decline_report_no_change_unlike_xla():
    # XLA's OpExpanderPass::Run returns !matching_instructions.empty(); ours reports a change
    # only when an expansion returned an instruction, so "no change" is true.
    class Declines(SumToMax):
        def expand(self, inst):
            return None

    module = parse_module(SUMS)
    hlo_pass = Declines()
    assert hlo_pass.candidates(module) == [module.entry.root]
    assert hlo_pass.run(module) is False and hlo_pass.rewrites == []
