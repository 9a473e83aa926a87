"""``MemoryEstimate`` is a plain class (its dataclass cost every run's start-up more than the
estimate): it keeps a frozen dataclass's contract, spelled out here by hand — equal and hashed
by its two numbers, read-only, a repr naming both, and the sentence the limit error quotes."""

from __future__ import annotations

import dataclasses

import pytest

from neuron_sim.interpreter.memory import MemoryEstimate


def test_equal_and_hashed_by_its_numbers():
    assert MemoryEstimate(100, 2) == MemoryEstimate(100, 2)
    assert MemoryEstimate(100, 2) != MemoryEstimate(100, 3)
    assert MemoryEstimate(100, 2) != MemoryEstimate(101, 2)
    assert MemoryEstimate(100, 2) != (100, 2)
    assert hash(MemoryEstimate(100, 2)) == hash(MemoryEstimate(100, 2))
    assert len({MemoryEstimate(100, 2), MemoryEstimate(100, 2), MemoryEstimate(7, 1)}) == 2


def test_read_only():
    estimate = MemoryEstimate(100, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        estimate.peak_bytes = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        del estimate.num_devices
    assert (estimate.peak_bytes, estimate.num_devices) == (100, 2)


def test_repr_and_sentence():
    assert repr(MemoryEstimate(100, 2)) == "MemoryEstimate(peak_bytes=100, num_devices=2)"
    # one device is singular, several plural (the bytes are format_bytes's to spell)
    assert str(MemoryEstimate(2048, 1)).startswith("about ")
    assert str(MemoryEstimate(2048, 1)).endswith(" for 1 device")
    assert str(MemoryEstimate(2048, 3)).endswith(" for 3 devices")
