"""One instruction that alone runs past --timeout still ends the run on time.

The interpreter checks its deadline between instructions; a single long operation cannot be
stopped there. The module below is one such instruction: a convolution of f32[64,224,224,3]
with a 7x7x3x64 kernel, stride 1 — 64*224*224*64*147 = 3e10 multiply-adds, tens of seconds in
numpy's einsum. With --timeout 1 the command
must end within 1 s + the 1 s grace + start-up, exit 1, with the sentence, and write no file.
"""

from __future__ import annotations

import time

CONV = """HloModule long_conv

ENTRY %e (lhs: f32[64,224,224,3], rhs: f32[7,7,3,64]) -> f32[64,224,224,64] {
  %lhs = f32[64,224,224,3]{3,2,1,0} parameter(0)
  %rhs = f32[7,7,3,64]{3,2,1,0} parameter(1)
  ROOT %conv = f32[64,224,224,64]{3,2,1,0} convolution(%lhs, %rhs), window={size=7x7 pad=3_3x3_3}, dim_labels=b01f_01io->b01f
}
"""


def test_a_long_single_instruction_is_stopped_one_second_past_the_limit(cli, tmp_path):
    path = tmp_path / "conv.hlo"
    path.write_text(CONV)
    started = time.monotonic()
    code, out, err = cli("run", str(path), "--seed", "0", "--timeout", "1", "-o",
                         str(tmp_path / "out.npz"), cwd=tmp_path, timeout=60)
    seconds = time.monotonic() - started
    assert code == 1, err
    assert "did not finish within 1 s (--timeout)" in err
    assert seconds < 1 + 1 + 6  # limit, grace, and the CLI's start-up on a loaded machine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conv.hlo"]
