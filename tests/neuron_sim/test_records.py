"""``neuron_sim.records.Record`` behaves as a frozen dataclass of the same fields, which is the
reference here: the same equality, hash, repr and refusals, built side by side."""

from __future__ import annotations

import dataclasses

import pytest

from neuron_sim.records import Record


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: object = None


class PointRecord(Record):
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: object = None) -> None:
        self._set(x=x, y=y)


CASES = [(1, None), (1, 2), (2, 1), (1, (3, 4)), (0, "a")]


def _both(x, y):
    return Point(x, y), PointRecord(x, y)


def test_equality_as_the_frozen_dataclass():
    for a in CASES:
        for b in CASES:
            left, left_record = _both(*a)
            right, right_record = _both(*b)
            assert (left == right) == (left_record == right_record), (a, b)
            assert (left != right) == (left_record != right_record), (a, b)
    assert Point(1) != (1, None) and PointRecord(1) != (1, None)


def test_hash_as_the_frozen_dataclass():
    for case in CASES:
        point, record = _both(*case)
        assert hash(point) == hash(record)
    with pytest.raises(TypeError):
        hash(Point(1, {}))
    with pytest.raises(TypeError):
        hash(PointRecord(1, {}))


def test_repr_as_the_frozen_dataclass_but_the_name():
    for case in CASES:
        point, record = _both(*case)
        assert repr(record) == repr(point).replace("Point(", "PointRecord(", 1)


def test_fields_refuse_change_as_the_frozen_dataclass():
    point, record = _both(1, 2)
    for target in (point, record):
        with pytest.raises(dataclasses.FrozenInstanceError) as assigned:
            target.x = 5
        assert str(assigned.value) == "cannot assign to field 'x'"
        with pytest.raises(dataclasses.FrozenInstanceError) as deleted:
            del target.y
        assert str(deleted.value) == "cannot delete field 'y'"
        assert (target.x, target.y) == (1, 2)
    with pytest.raises(AttributeError):  # and no attribute outside the fields
        object.__setattr__(record, "z", 1)


def test_copy_deepcopy_and_pickle_as_the_frozen_dataclass():
    """Rebuilt with the fields as they were (no __init__ again), shallow or deep as for the
    dataclass: a deep copy has its own list, a shallow one shares it."""
    import copy
    import pickle

    shared = [1, 2]
    point, record = _both(3, shared)
    for original in (point, record):
        shallow, deep = copy.copy(original), copy.deepcopy(original)
        assert shallow == original and shallow is not original and shallow.y is shared
        assert deep == original and deep.y is not shared
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            again = pickle.loads(pickle.dumps(original, protocol))
            assert again == original and type(again) is type(original)
        with pytest.raises(dataclasses.FrozenInstanceError):
            deep.x = 1


class Checked(Record):
    """A record whose __init__ refuses what unpickling must not be asked again."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        if value < 0:
            raise ValueError("negative")
        self._set(value=value * 2)


def test_rebuilding_does_not_run_init_again():
    import copy
    import pickle

    made = Checked(3)
    assert made.value == 6
    assert copy.deepcopy(made).value == 6 and pickle.loads(pickle.dumps(made)).value == 6
