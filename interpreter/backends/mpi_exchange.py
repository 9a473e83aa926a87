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

__all__ = ["ArraySpec", "Exchange", "as_bytes", "from_bytes"]

# MPI counts are C ints: a message is sent in pieces of at most this many bytes.
_PIECE_BYTES = 1 << 30
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


def from_bytes(buffer: np.ndarray, specs: Sequence[ArraySpec]) -> list[np.ndarray]:
    """Split a uint8 buffer into arrays of ``specs`` (views into ``buffer``)."""
    arrays, offset = [], 0
    for spec in specs:
        size = spec.nbytes
        arrays.append(buffer[offset:offset + size].view(spec.dtype).reshape(spec.shape))
        offset += size
    if offset != buffer.size:
        raise ValueError(f"received {buffer.size} bytes but expected {offset}")
    return arrays


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
             receives: dict[int, Sequence[ArraySpec]],
             what: str = "exchanging data") -> dict[int, list[np.ndarray]]:
        """Send ``sends[peer]`` to each peer and receive ``receives[peer]`` from each peer."""
        requests: list[Any] = []
        buffers: dict[int, np.ndarray] = {}
        for peer, specs in sorted(receives.items()):
            if peer == self.rank or not specs:
                continue
            buffer = np.empty(sum(spec.nbytes for spec in specs), dtype=np.uint8)
            buffers[peer] = buffer
            requests.extend(self._post(buffer, peer, receive=True))
        keep_alive = []
        for peer, arrays in sorted(sends.items()):
            if peer == self.rank or not arrays:
                continue
            payload = (np.concatenate([as_bytes(a) for a in arrays]) if len(arrays) > 1
                       else as_bytes(arrays[0]))
            keep_alive.append(payload)
            requests.extend(self._post(payload, peer, receive=False))
        self._wait(requests, what)
        return {peer: from_bytes(buffers[peer], receives[peer]) for peer in buffers}

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
