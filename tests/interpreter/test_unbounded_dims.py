"""A shape with an unbounded dynamic dimension (``f32[<=?,4]``) passes XLA's verifier (it
accepts such shapes, as StableHLO emits them before shape refinement) but has no size to run
with: ``run`` says so in one sentence naming the instruction, exit 2 — it was an internal error
("negative dimensions are not allowed") from drawing the inputs."""

from __future__ import annotations

from neuron_sim.cli import main

MODULE = """HloModule m

ENTRY e {
  p = f32[<=?,4] parameter(0)
  ROOT n = f32[<=?,4] negate(p)
}
"""


def test_check_accepts_and_run_refuses_an_unbounded_dimension(tmp_path, capsys):
    path = tmp_path / "dyn.hlo"
    path.write_text(MODULE)
    assert main(["check", str(path)]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert "%p = f32[<=?,4] parameter(0)" in err and "unbounded dynamic dimensions" in err
    assert "internal error" not in err and err.count("\n") == 1
