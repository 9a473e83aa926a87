"""InlineWeights (aws_neuron_inline_weights): the JAX MLP with its weights inlined matches JAX,
verifies under the weights binding, the seed's renumbering GOTCHA, the negative gates, and every
error path through the real CLI (exit 2, module file unchanged)."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

import neuron_sim.interpreter as interpreter
from neuron_sim.hlo import parse_module_file
from neuron_sim.hlo.builder import ModuleBuilder
from neuron_sim.io import read_npz
from neuron_sim.passes import PassContext, PassError, get_pass
from neuron_sim.passes.neuron.inline_weights import InlineWeights
from neuron_sim.verify import VerifyOptions, check_pass
from neuron_sim.verify.result import Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from real_cli import cli  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
WEIGHTS = DATA / "passes" / "inline_weights" / "mlp"
JAX = DATA / "jax"
MLP_CASES = ["lowered_weights_mlp", "compiled_weights_mlp"]


def inline(module, directory) -> bool:
    return get_pass("aws_neuron_inline_weights").run(
        module, PassContext(options={"dir": str(directory)}))


def test_the_weight_files_are_the_jax_inputs():
    """The fixture's .npy files are JAX's arg1..arg4 of the MLP (their provenance)."""
    data = read_npz(JAX / "lowered_weights_mlp.npz")
    for number, path in ((1, "w1.npy"), (2, "b1.npy"), (3, "layer2/w2.npy"),
                         (4, "layer2/b2.npy")):
        assert np.array_equal(np.load(WEIGHTS / path), data[f"arg{number}"][0])


@pytest.mark.parametrize("case", MLP_CASES)
def test_the_inlined_mlp_runs_and_matches_jax(case):
    module = parse_module_file(JAX / f"{case}.hlo")
    assert inline(module, WEIGHTS)
    assert [p.name for p in module.entry.parameters] == ["x.1"]
    assert module.header["entry_computation_layout"].text == \
        "{(f32[4,8]{1,0})->f32[4,3]{1,0}}"
    data = read_npz(JAX / f"{case}.npz")
    (out,) = interpreter.run(module, {"arg0": data["arg0"]})
    # Inputs are multiples of 1/8 with small sums: every order of summation is exact.
    assert out.tobytes() == data["out0"].tobytes()


@pytest.mark.parametrize("topologies", [["1x1"], ["2x2", "2x4"]])
def test_verify_is_correct_with_the_weights_fed_to_the_source(topologies):
    module = parse_module_file(JAX / "lowered_weights_mlp.hlo")
    result = check_pass(module, "aws_neuron_inline_weights", topologies,
                        VerifyOptions(trials=3, pass_options={"dir": str(WEIGHTS)}))
    assert result.status is Status.CORRECT, result.detail
    assert all(v.changed for v in result.topology_results)


def test_verify_cli_is_correct_on_three_topologies():
    code, out, err = cli("verify", str(JAX / "lowered_weights_mlp.hlo"), "--passes",
                         "aws_neuron_inline_weights", "--pass-option", f"dir={WEIGHTS}",
                         "--topology", "1x1", "--topology", "2x2", "--topology", "1x8")
    assert code == 0, err
    assert "Result: CORRECT" in out


def test_other_weights_than_the_fed_ones_are_unsound(tmp_path):
    """The verifier compares against the source fed the binding's values: a binding that feeds
    the source other values than the inlined ones (b2 + 1) must be found UNSOUND, so the check
    is not vacuous."""
    module = parse_module_file(JAX / "lowered_weights_mlp.hlo")

    class WrongBinding(InlineWeights):
        name = "inline_weights_wrong_binding"

        def source_binding(self, source, target):
            binding = super().source_binding(source, target)
            binding.fixed[4] = binding.fixed[4] + 1.0
            return binding

    result = check_pass(module, [WrongBinding()], ["1x1"], VerifyOptions(
        trials=2, pass_options={"inline_weights_wrong_binding.dir": str(WEIGHTS)}))
    assert result.status is Status.UNSOUND
    assert result.error_line == "ERROR: Value mismatch"


# --------------------------------------------------------------------------------------------
# The seed's GOTCHA: RemoveParameter renumbers later parameters.


def three_parameters():
    """p0: f32[2], p1: f32[3], p2: f32[3]; returns (p0, p1, p2)."""
    m = ModuleBuilder("three")
    e = m.computation("main")
    p0, p1, p2 = e.parameter(0, "f32[2]", "p0"), e.parameter(1, "f32[3]", "p1"), \
        e.parameter(2, "f32[3]", "p2")
    return m.build(e.build(e.tuple([p0, p1, p2])))


def weights_dir(tmp_path: Path, mapping: dict, arrays: dict) -> Path:
    directory = tmp_path / "weights"
    directory.mkdir(exist_ok=True)
    for name, array in arrays.items():
        np.save(directory / name, array, allow_pickle=False)
    (directory / "metadata.json").write_text(json.dumps({"model_files": mapping}))
    return directory


class NaiveOrder(InlineWeights):
    """Numbers resolved up front, removed in increasing order: what the seed warns about."""

    name = "inline_weights_naive_order"

    @staticmethod
    def removal_order(numbers):
        return sorted(numbers)


def test_highest_first_removes_the_named_parameters_and_the_naive_order_does_not(tmp_path):
    """Hand derivation: weights for 0 and 1 of (p0, p1, p2). Highest first: remove 1 (p2 -> 1),
    then 0 (p2 -> 0): p2 is left. Increasing order with stale numbers: remove 0 (p1 -> 0,
    p2 -> 1), then "1", which is now p2: p1 is left and w1 went to p2's uses."""
    w0 = np.array([1, 2], np.float32)
    w1 = np.array([3, 4, 5], np.float32)
    directory = weights_dir(tmp_path, {"0": "w0.npy", "1": "w1.npy"},
                            {"w0.npy": w0, "w1.npy": w1})
    right = three_parameters()
    assert inline(right, directory)
    assert [(p.name, p.parameter_number) for p in right.entry.parameters] == [("p2", 0)]
    outs = interpreter.run(right, {"arg0": np.array([7, 8, 9], np.float32)})
    assert [o[0].tolist() for o in outs] == [[1, 2], [3, 4, 5], [7, 8, 9]]

    naive = three_parameters()
    NaiveOrder().run(naive, PassContext(options={"dir": str(directory)}))
    assert [(p.name, p.parameter_number) for p in naive.entry.parameters] == [("p1", 0)]
    outs = interpreter.run(naive, {"arg0": np.array([7, 8, 9], np.float32)})
    assert [o[0].tolist() for o in outs] == [[1, 2], [7, 8, 9], [3, 4, 5]]
    result = check_pass(three_parameters(), [NaiveOrder()], ["1x1"],
                        VerifyOptions(trials=2, pass_options={"dir": str(directory)}))
    assert result.status is Status.UNSOUND


# --------------------------------------------------------------------------------------------
# Negative gates: nothing to do.


def test_without_dir_the_pass_does_nothing():
    module = parse_module_file(JAX / "lowered_weights_mlp.hlo")
    before = module.to_text()
    assert not get_pass("aws_neuron_inline_weights").run(module)
    assert module.to_text() == before


def test_an_empty_map_changes_nothing(tmp_path):
    directory = weights_dir(tmp_path, {}, {})
    module = three_parameters()
    assert not inline(module, directory)
    assert len(module.entry.parameters) == 3


def test_a_weights_map_works_like_model_files(tmp_path):
    directory = tmp_path / "w"
    directory.mkdir()
    np.save(directory / "a.npy", np.array([5, 6], np.float32))
    (directory / "metadata.json").write_text(json.dumps({"weights": {"p0": "a.npy"}}))
    module = three_parameters()
    assert inline(module, directory)
    assert [p.name for p in module.entry.parameters] == ["p1", "p2"]


@pytest.mark.parametrize("metadata, message", [
    ({"model_files": {"7": "a.npy"}}, "Computation main has no parameter number 7"),
    ({"model_files": {"nope": "a.npy"}}, "has no parameter named 'nope'"),
    ({"model_files": {"0": "a.npy", "p0": "a.npy"}}, "names parameter %p0 twice"),
    ({"model_files": {}, "weights": {}}, "has both"),
    ({"other": {}}, "has neither"),
    ([1, 2], "type must be object, but is array"),
    ({"model_files": ["a.npy"]}, "model_files: type must be object, but is array"),
])
def test_metadata_errors_leave_the_module_unchanged(tmp_path, metadata, message):
    directory = tmp_path / "w"
    directory.mkdir()
    np.save(directory / "a.npy", np.array([5, 6], np.float32))
    (directory / "metadata.json").write_text(json.dumps(metadata))
    module = three_parameters()
    before = module.to_text()
    with pytest.raises(PassError, match=message):
        inline(module, directory)
    assert module.to_text() == before


# --------------------------------------------------------------------------------------------
# Error paths through the real CLI: exit 2, one sentence, the module file unchanged.

MODULE_TEXT = """HloModule small, entry_computation_layout={(f32[2,3]{1,0}, f32[3]{0})->f32[2,3]{1,0}}

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  w = f32[3]{0} parameter(1)
  b = f32[2,3]{1,0} broadcast(w), dimensions={1}
  ROOT y = f32[2,3]{1,0} add(x, b)
}
"""


def _pickled_npy(d: Path) -> str:
    np.save(d / "w.npy", np.array([object(), 1, 2], dtype=object)[1:], allow_pickle=True)
    return "w.npy"


def _raw_pickle(d: Path) -> str:
    (d / "w.npy").write_bytes(pickle.dumps([1.0, 2.0, 3.0]))
    return "w.npy"


def _traversal(d: Path) -> str:
    np.save(d.parent / "outside.npy", np.zeros(3, np.float32))
    return "../outside.npy"


def _absolute(d: Path) -> str:
    np.save(d.parent / "outside.npy", np.zeros(3, np.float32))
    return str(d.parent / "outside.npy")


def _symlink_escape(d: Path) -> str:
    np.save(d.parent / "outside.npy", np.zeros(3, np.float32))
    (d / "link.npy").symlink_to(d.parent / "outside.npy")
    return "link.npy"


def _saved(array: np.ndarray):
    """A maker that saves ``array`` as w.npy."""
    def make(d: Path) -> str:
        np.save(d / "w.npy", array)
        return "w.npy"
    return make


def _trailing_bytes(d: Path) -> str:
    _saved(np.zeros(3, np.float32))(d)
    with open(d / "w.npy", "ab") as handle:
        handle.write(b"\0" * 64)
    return "w.npy"


def _missing(d: Path) -> str:
    return "absent.npy"


ERRORS = {
    "pickled npy": (_pickled_npy, "Python objects (a pickle)"),
    "raw pickle": (_raw_pickle, "not an .npy file"),
    "dot-dot traversal": (_traversal, "contains '..'"),
    "absolute path": (_absolute, "is absolute"),
    "symlink escape": (_symlink_escape, "outside"),
    "oversized file": (_saved(np.zeros(100_000, np.float32)), "refused before reading it"),
    "trailing bytes": (_trailing_bytes, "its header and the parameter's data make"),
    "wrong dtype": (_saved(np.zeros(3, np.int32)), "NCC_INL002: numpy file type mismatch"),
    "wrong shape": (_saved(np.zeros(4, np.float32)), "NCC_INL001: mismatching layout for parameter %w"),
    "missing file": (_missing, "Corrupted input dir, model file does not exist!"),
}


def run_opt_with(tmp_path: Path, metadata_text: str) -> tuple[int, str, Path, bytes]:
    module_file = tmp_path / "small.hlo"
    module_file.write_text(MODULE_TEXT)
    before = module_file.read_bytes()
    (tmp_path / "model" / "metadata.json").write_text(metadata_text)
    out = tmp_path / "out.hlo"
    code, _, err = cli("opt", str(module_file), "--passes", "aws_neuron_inline_weights",
                       "--pass-option", f"dir={tmp_path / 'model'}", "-o", str(out))
    assert module_file.read_bytes() == before
    assert not out.exists()
    return code, err, module_file, before


@pytest.mark.parametrize("case", list(ERRORS))
def test_cli_refuses_with_exit_2_and_leaves_the_module_file_unchanged(tmp_path, case):
    make, message = ERRORS[case]
    directory = tmp_path / "model"
    directory.mkdir()
    path = make(directory)
    code, err, _, _ = run_opt_with(tmp_path, json.dumps({"model_files": {"w": path}}))
    assert code == 2, err
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, message", [
    ('{"model_files": {"w": "w.npy",}', "malformed JSON"),
    ('{"model_files": {"w": 3}}', "type must be string, but is number"),
    ('{"model_files": {"1": true}}', "type must be string, but is boolean"),
])
def test_cli_refuses_bad_json_with_exit_2(tmp_path, text, message):
    (tmp_path / "model").mkdir()
    np.save(tmp_path / "model" / "w.npy", np.zeros(3, np.float32))
    code, err, _, _ = run_opt_with(tmp_path, text)
    assert code == 2 and message in err, err


def test_cli_inlines_a_good_directory(tmp_path):
    (tmp_path / "model").mkdir()
    np.save(tmp_path / "model" / "w.npy", np.array([1, 2, 3], np.float32))
    module_file = tmp_path / "small.hlo"
    module_file.write_text(MODULE_TEXT)
    (tmp_path / "model" / "metadata.json").write_text('{"model_files": {"1": "w.npy"}}')
    code, out, err = cli("opt", str(module_file), "--passes", "aws_neuron_inline_weights",
                         "--pass-option", f"dir={tmp_path / 'model'}")
    assert code == 0, err
    assert "entry_computation_layout={(f32[2,3]{1,0})->f32[2,3]{1,0}}" in out
    assert "constant({1, 2, 3})" in out
