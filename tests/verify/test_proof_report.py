"""The report says what the proof established on each topology and output: all inputs, or
sampled with the construct that stopped it, with the method, time and memory."""

from __future__ import annotations

from neuron_sim.hlo import parse_module
from neuron_sim.verify import Status, VerifyOptions, check_modules
from neuron_sim.verify.report import format_result, result_json

TWO_OUTPUTS = """HloModule two
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%lt (c: f32[], d: f32[]) -> pred[] {
  %c = f32[] parameter(0)
  %d = f32[] parameter(1)
  ROOT %less = pred[] compare(%c, %d), direction=LT
}
ENTRY %main (x: f32[4096]) -> (f32[4096], f32[]) {
  %x = f32[4096]{0} parameter(0)
  %n = f32[4096]{0} negate(%x)
  %zero = f32[] constant(0)
  %sorted = f32[4096]{0} sort(%n), dimensions={0}, to_apply=%lt
  %reduce = f32[] reduce(%sorted, %zero), dimensions={0}, to_apply=%sum
  ROOT %t = (f32[4096]{0}, f32[]) tuple(%n, %reduce)
}
"""


def test_each_output_says_what_was_proved_and_how():
    """Without a memory limit both outputs are proved on symbolic elements; with 256 KiB the
    symbolic run (96 bytes per element) is not attempted, the proof on positions has no model
    of the sort before the reduce, and both outputs say sampled, naming why."""
    module = parse_module(TWO_OUTPUTS)
    proved = check_modules(module, module.clone(), ["1x1"],
                           VerifyOptions(trials=1, minimize=False))
    (topology,) = result_json(proved)["topology_results"]
    assert topology["proof_method"] == "elements" and topology["proof_bytes"] > 0
    assert [o["proof"] for o in topology["proof_outputs"]] == ["all-inputs", "all-inputs"]
    assert "Proof on 1x1: all inputs, on symbolic elements" in format_result(proved)
    sampled = check_modules(module, module.clone(), ["1x1"],
                            VerifyOptions(trials=1, minimize=False, max_memory=256 << 10))
    assert sampled.status is Status.CORRECT and sampled.proof == "sampled"
    (topology,) = result_json(sampled)["topology_results"]
    outputs = topology["proof_outputs"]
    assert [o["proof"] for o in outputs] == ["sampled", "sampled"]
    assert all("would need about" in o["reason"] and "sort" in o["reason"] for o in outputs)
    text = format_result(sampled)
    assert "Proof on 1x1: sampled" in text and "output 1 (f32[]): sampled: " in text
