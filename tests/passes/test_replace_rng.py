"""ReplaceRng (aws_neuron_replace_rng): JAX's lowered rng_uniform folded to in-range constants
matches JAX and verifies, the unpinned-seed GOTCHA, tuple and normal rngs, the negative gates,
and the verifier's per-element check of the planted values."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
import neuron_sim.passes.neuron.replace_rng as replace_rng
from neuron_sim.hlo import parse_module_file
from neuron_sim.hlo.builder import ModuleBuilder
from neuron_sim.hlo.opcodes import Opcode
from neuron_sim.io import read_npz
from neuron_sim.passes import PassContext, get_pass
from neuron_sim.passes.neuron.replace_rng import mersenne_twister
from neuron_sim.verify import VerifyOptions, check_pass
from neuron_sim.verify.result import Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from real_cli import cli  # noqa: E402

JAX = Path(__file__).resolve().parents[1] / "data" / "jax"
CASES = {"lowered_rng_uniform_f32": (-1.5, 2.0), "lowered_rng_uniform_s32": (3, 9)}


def replace(module, seed: int | None = 1) -> bool:
    options = {} if seed is None else {"seed": str(seed)}
    return get_pass("aws_neuron_replace_rng").run(module, PassContext(options=options))


def opcodes(module) -> list[Opcode]:
    return [inst.opcode for inst in module.instructions()]


def test_the_engine_is_std_mt19937():
    """C++ [rand.predef]: the 10000th output of a default-constructed std::mt19937 (seed
    5489) is 4123659995; its first is 3499211612 (Matsumoto and Nishimura's reference)."""
    draws = mersenne_twister(5489).randint(0, 2 ** 32, size=10000, dtype=np.uint32)
    assert draws[0] == 3499211612 and draws[-1] == 4123659995


@pytest.mark.parametrize("case", list(CASES))
def test_jax_rng_uniform_becomes_in_range_constants_and_still_matches_jax(case):
    module = parse_module_file(JAX / f"{case}.hlo")
    assert replace(module)
    assert Opcode.RNG not in opcodes(module)
    low, high = CASES[case]
    planted = [inst for inst in module.entry.instructions
               if inst.opcode is Opcode.CONSTANT and inst.shape.dims]
    values = np.concatenate([np.asarray(c.literal.value).reshape(-1) for c in planted
                             if np.asarray(c.literal.value).size > 2])
    assert values.size >= 16 and (values >= low).all() and (values < high).all()
    assert len(np.unique(values)) > 1
    data = read_npz(JAX / f"{case}.npz")
    outs = interpreter.run(module, {k: v for k, v in data.items() if k.startswith("arg")})
    for j, out in enumerate(outs):
        assert out.tobytes() == data[f"out{j}"].tobytes(), f"out{j}"


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("topologies", [["1x1"], ["2x2", "2x4"]])
def test_verify_is_correct(case, topologies):
    result = check_pass(parse_module_file(JAX / f"{case}.hlo"), "aws_neuron_replace_rng",
                        topologies, VerifyOptions(trials=2, pass_options={"seed": "3"}))
    assert result.status is Status.CORRECT, result.detail
    assert all(v.changed for v in result.topology_results)


def test_verify_cli_is_correct_without_a_seed_on_three_topologies():
    code, out, err = cli("verify", str(JAX / "lowered_rng_uniform_f32.hlo"), "--passes",
                         "aws_neuron_replace_rng", "--topology", "1x1", "--topology", "2x2",
                         "--topology", "1x8")
    assert code == 0, err
    assert "Result: CORRECT" in out


def test_gotcha_unpinned_seed_gives_two_different_modules_and_says_so(tmp_path):
    """The seed's GOTCHA: random_device seeds the engine, so two compiles differ; `opt` says
    so in one stderr line. With a pinned seed the two modules are identical, no warning."""
    hlo = str(JAX / "lowered_rng_uniform_f32.hlo")
    runs = [cli("opt", hlo, "--passes", "aws_neuron_replace_rng") for _ in range(2)]
    assert all(code == 0 for code, _, _ in runs)
    assert runs[0][1] != runs[1][1]
    for _, _, err in runs:
        warnings = [line for line in err.splitlines() if "warning" in line]
        assert len(warnings) == 1 and "no seed given" in warnings[0]
    pinned = [cli("opt", hlo, "--passes", "aws_neuron_replace_rng", "--pass-option",
                  "seed=42") for _ in range(2)]
    assert pinned[0][1] == pinned[1][1]
    assert not any("warning" in err for _, _, err in pinned)


def test_the_warning_names_the_seed_that_reproduces_the_module():
    hlo = JAX / "lowered_rng_uniform_s32.hlo"
    unpinned = get_pass("aws_neuron_replace_rng")
    first = parse_module_file(hlo)
    unpinned.run(first)
    seed = unpinned.warnings[0].split("seed=")[1].split()[0]
    again = parse_module_file(hlo)
    replace(again, int(seed))
    assert first.to_text() == again.to_text()


def test_a_bad_seed_is_exit_2():
    code, _, err = cli("opt", str(JAX / "lowered_rng_uniform_f32.hlo"), "--passes",
                       "aws_neuron_replace_rng", "--pass-option", "seed=abc")
    assert code == 2 and "seed=abc" in err


# --------------------------------------------------------------------------------------------
# Built rngs: normal, integer types, tuple-shaped, and the negative gates.


def rng_module(low, high, element="f32", distribution="rng_uniform", dims="[64]",
               low_param=False):
    m = ModuleBuilder("rngs")
    e = m.computation("main")
    a = e.parameter(0, f"{element}[]", "a") if low_param else e.constant(low, f"{element}[]")
    b = e.constant(high, f"{element}[]")
    r = e.rng(a, b, f"{element}{dims}", distribution=distribution)
    return m.build(e.build(r))


def planted_values(module) -> np.ndarray:
    root = module.entry.root
    assert root.opcode is Opcode.CONSTANT
    return np.asarray(root.literal.value)


@pytest.mark.parametrize("element, low, high", [
    ("s8", -128, 127), ("u8", 250, 255), ("s64", -(2 ** 62), 2 ** 62), ("u32", 0, 1),
    ("f16", -0.001, 0.001), ("bf16", 1.0, 1.0078125), ("f64", -1e300, 1e300)])
def test_uniform_draws_stay_in_the_half_open_interval(element, low, high):
    module = rng_module(low, high, element, dims="[512]")
    # The bounds as the module holds them (f16's -0.001 is -0.0010004).
    low, high = (np.asarray(op.literal.value).astype(np.float64 if "f" in element else object)
                 for op in module.entry.root.operands)
    assert replace(module)
    values = planted_values(module).astype(np.float64 if "f" in element else object)
    assert (values >= low).all() and (values < high).all()


def test_bf16_interval_of_one_ulp_gives_only_the_low_bound():
    """[1, 1.0078125) in bf16 holds exactly one value, 1 (the next bf16 after 1 is 1+2^-7)."""
    module = rng_module(1.0, 1.0078125, "bf16", dims="[256]")
    assert replace(module)
    assert set(planted_values(module).astype(np.float64).tolist()) == {1.0}


def test_normal_draws_are_finite_with_the_right_centre_and_verify():
    module = rng_module(10.0, 2.0, distribution="rng_normal", dims="[4096]")
    source = module.clone()
    assert replace(module)
    values = planted_values(module).astype(np.float64)
    assert np.isfinite(values).all()
    assert abs(values.mean() - 10.0) < 0.2 and abs(values.std() - 2.0) < 0.2
    assert check_pass(source, "aws_neuron_replace_rng", ["1x1", "2x2"],
                      VerifyOptions(trials=1, pass_options={"seed": "9"})).status is Status.CORRECT


def test_a_tuple_shaped_rng_becomes_a_tuple_of_constants():
    """XLA's shape rule has no tuple rng; the seed's pass handles one, so the module is built
    unchecked."""
    m = ModuleBuilder("tuple_rng")
    e = m.computation("main")
    a, b = e.constant(0, "s32[]"), e.constant(4, "s32[]")
    r = e.computation.add(replace_rng.make_instruction(
        e.computation, Opcode.RNG, [a, b], shape="(s32[3], s32[2,2])", check=False,
        distribution="rng_uniform"))
    module = m.build(e.build(r), check=False)
    assert replace(module)
    root = module.entry.root
    assert root.opcode is Opcode.TUPLE
    assert [op.opcode for op in root.operands] == [Opcode.CONSTANT, Opcode.CONSTANT]
    assert [str(op.shape.without_layout()) for op in root.operands] == ["s32[3]", "s32[2,2]"]
    for op in root.operands:
        values = np.asarray(op.literal.value)
        assert ((values >= 0) & (values < 4)).all()


@pytest.mark.parametrize("why, module", [
    ("bounds from a parameter", lambda: rng_module(0.0, 1.0, low_param=True)),
    ("empty interval", lambda: rng_module(2.0, 2.0)),
    ("reversed interval", lambda: rng_module(3, 1, "s32")),
    ("NaN bound", lambda: rng_module(float("nan"), 1.0)),
    ("infinite bound", lambda: rng_module(0.0, float("inf"))),
    ("pred", lambda: rng_module(False, True, "pred")),
])
def test_rngs_whose_bounds_are_not_known_are_left_alone(why, module):
    built = module()
    before = built.to_text()
    assert not replace(built), why
    assert built.to_text() == before


# --------------------------------------------------------------------------------------------
# The verifier's side of the refinement.


def test_a_planted_value_outside_the_bounds_is_unsound(monkeypatch):
    """A sampler that plants b itself (not in [a, b)) must be caught element by element, even
    though the program's outputs would not show it."""
    def at_the_bound(generator, distribution, a, b, shape):
        return np.full(shape.dims, b, dtype=shape.element_type.numpy_dtype)

    monkeypatch.setattr(replace_rng, "draw_array", at_the_bound)
    result = check_pass(parse_module_file(JAX / "lowered_rng_uniform_s32.hlo"),
                        "aws_neuron_replace_rng", ["1x1"],
                        VerifyOptions(trials=1, pass_options={"seed": "1"}))
    assert result.status is Status.UNSOUND
    assert result.error_line == "ERROR: Value mismatch"
    assert "%rng_uniform.1: planted element [0] = 9 is not a value rng_uniform(3, 9)" in \
        result.detail


def test_an_rng_outside_the_entry_cannot_be_bound_and_is_an_error_not_correct():
    m = ModuleBuilder("called_rng")
    c = m.computation("draw")
    x = c.parameter(0, "f32[8]", "x")
    r = c.rng(c.constant(0.0, "f32[]"), c.constant(1.0, "f32[]"), "f32[8]")
    draw = c.build(c.add(x, r))
    e = m.computation("main")
    module = m.build(e.build(e.call(draw, [e.parameter(0, "f32[8]", "x")])))
    result = check_pass(module, "aws_neuron_replace_rng", ["1x1"],
                        VerifyOptions(trials=1, pass_options={"seed": "1"}))
    assert result.status is Status.ERROR
    assert "not in the entry computation" in result.detail
