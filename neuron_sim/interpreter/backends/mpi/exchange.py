"""Moving stacked per-device rows between MPI ranks as raw bytes.

Every dtype the interpreter uses (bool, integers, floats, complex, and ml_dtypes' bfloat16 and
float8 types that MPI has no datatype for) travels as its bytes, so nothing is converted and the
receiver gets exactly the bits that were sent. Both sides always know the shapes and dtypes of
what they exchange (they follow from the collective, which the rendezvous has checked), so a
message is just the concatenated bytes of its arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["ArraySpec", "Exchange", "as_bytes"]

# MPI counts are C ints: a message is sent in pieces of at most this many bytes.
_PIECE_BYTES = 1 << 30
# Below this many bytes per peer, arrays are packed into one message (fewer messages beat the
# copy); above it each array is its own message (no copy).
_PACK_BYTES = 1 << 20
TAG_DATA = 201


@dataclass(frozen=True)
class ArraySpec:
    """The shape and dtype of an array expected from a peer."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def as_bytes(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of ``array`` (copied only if not C-contiguous)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _packed(arrays: Sequence[np.ndarray]) -> bool:
    return len(arrays) > 1 and sum(a.nbytes for a in arrays) < _PACK_BYTES


def _writable_bytes(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array, to receive into."""
    if not array.flags.c_contiguous or not array.flags.writeable:
        raise ValueError("can only receive into a C-contiguous, writeable array")
    return array.reshape(-1).view(np.uint8)


class Exchange:
    """Point-to-point exchange of arrays among the ranks of one communicator.

    ``swap`` posts every receive and send, then hands the requests to ``wait``, which completes
    them while watching for aborts: a peer that found a mismatch this rank could not see aborts
    instead of sending. (A dead peer ends the whole job through mpiexec; the watchdog covers
    launchers that do not.)
    """

    def __init__(self, comm: Any, wait: Callable[[list[Any], str], None]) -> None:
        from mpi4py import MPI

        self.comm = comm
        self._mpi = MPI
        self._wait = wait
        self.rank = comm.Get_rank()

    def swap(self, sends: dict[int, Sequence[np.ndarray]],
             receives: dict[int, Sequence[ArraySpec | np.ndarray]],
             what: str = "exchanging data") -> dict[int, list[np.ndarray]]:
        """Send ``sends[peer]`` to each peer and receive ``receives[peer]`` from each peer.

        A receive given as an array (C-contiguous, writeable) is filled in place; one given as
        an ``ArraySpec`` gets a new array. Small exchanges travel as one packed message per
        peer; large ones as one message per array, so nothing is copied on either side.
        """
        requests: list[Any] = []
        received: dict[int, list[np.ndarray]] = {}
        unpack: list[tuple[np.ndarray, list[np.ndarray]]] = []
        for peer, wanted in sorted(receives.items()):
            if peer == self.rank or not wanted:
                continue
            targets = [w if isinstance(w, np.ndarray) else np.empty(w.shape, w.dtype)
                       for w in wanted]
            received[peer] = targets
            if _packed(targets):
                buffer = np.empty(sum(t.nbytes for t in targets), dtype=np.uint8)
                unpack.append((buffer, targets))
                requests.extend(self._post(buffer, peer, receive=True))
            else:
                for target in targets:
                    requests.extend(self._post(_writable_bytes(target), peer, receive=True))
        keep_alive = []
        for peer, arrays in sorted(sends.items()):
            if peer == self.rank or not arrays:
                continue
            if _packed(arrays):
                payloads = [np.concatenate([as_bytes(a) for a in arrays])]
            else:
                payloads = [as_bytes(a) for a in arrays]
            keep_alive.extend(payloads)
            for payload in payloads:
                requests.extend(self._post(payload, peer, receive=False))
        self._wait(requests, what)
        for buffer, targets in unpack:
            offset = 0
            for target in targets:
                _writable_bytes(target)[:] = buffer[offset:offset + target.nbytes]
                offset += target.nbytes
        return received

    def _post(self, buffer: np.ndarray, peer: int, *, receive: bool) -> list[Any]:
        requests = []
        for start in range(0, max(buffer.size, 1), _PIECE_BYTES):
            piece = buffer[start:start + _PIECE_BYTES]
            if receive:
                requests.append(self.comm.Irecv([piece, self._mpi.BYTE], source=peer,
                                                tag=TAG_DATA))
            else:
                requests.append(self.comm.Isend([piece, self._mpi.BYTE], dest=peer,
                                                tag=TAG_DATA))
        return requests
