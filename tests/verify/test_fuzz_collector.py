"""``objects_before_frozen``: the objects alive when a campaign starts are frozen for it
(``gc.get_freeze_count`` counts them) and unfrozen after it, also when it raises; a block
inside another leaves them to the outer one."""

from __future__ import annotations

import gc

import pytest

from neuron_sim.verify.fuzz.collector import objects_before_frozen


@pytest.fixture(autouse=True)
def unfrozen():
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()


def test_objects_alive_before_the_block_are_frozen_during_it_only():
    with objects_before_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_block_that_raises_unfreezes_them_too():
    with pytest.raises(RuntimeError):
        with objects_before_frozen():
            raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_an_inner_block_leaves_them_to_the_outer_one():
    with objects_before_frozen():
        frozen = gc.get_freeze_count()
        with objects_before_frozen():
            pass
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


def test_garbage_made_inside_the_block_is_still_collected():
    class Cycle:
        pass

    with objects_before_frozen():
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2
