"""The typed values of the structured instruction attributes: ``slice``, ``padding``,
``window``, ``dim_labels`` and ``sparsity``.

``neuron_sim.hlo.attributes`` reads and prints them (its codecs) and re-exports these classes; they
live here so that a module without such an attribute does not create them at start-up (a
dataclass costs a fraction of a millisecond to create, and most runs need none of these).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConvDimLabels", "PadDim", "SliceDim", "SparsityDescriptor", "Window", "WindowDim"]


@dataclass(frozen=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True)
class PadDim:
    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True)
class Window:
    dims: tuple[WindowDim, ...]

    def __str__(self) -> str:
        if not self.dims:
            return "{}"
        fields = [("size", lambda d: str(d.size), lambda d: True)]
        fields += [
            ("stride", lambda d: str(d.stride), lambda d: d.stride != 1),
            ("pad", lambda d: f"{d.pad_low}_{d.pad_high}", lambda d: d.pad_low or d.pad_high),
            ("lhs_dilate", lambda d: str(d.lhs_dilation), lambda d: d.lhs_dilation != 1),
            ("rhs_dilate", lambda d: str(d.rhs_dilation), lambda d: d.rhs_dilation != 1),
            ("rhs_reversal", lambda d: str(int(d.reversal)), lambda d: d.reversal),
        ]
        parts = [f"{key}=" + "x".join(fmt(d) for d in self.dims)
                 for key, fmt, needed in fields if any(needed(d) for d in self.dims)]
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True)
class ConvDimLabels:
    """Convolution dimension numbers, from ``dim_labels=b01f_01io->b01f``."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    # (lhs, rhs, output) label counts when '?' labels make them more than the spatial dims + 2.
    ranks: tuple[int, int, int] | None = None

    def __str__(self) -> str:
        def labels(rank: int, named: dict[int, str], spatial: tuple[int, ...]) -> str:
            chars = ["?"] * rank
            for dim, char in named.items():
                chars[dim] = char
            for i, dim in enumerate(spatial):
                chars[dim] = str(i)
            return "".join(chars)

        n = len(self.input_spatial) + 2
        lhs_rank, rhs_rank, out_rank = self.ranks or (n, n, n)
        lhs = labels(lhs_rank, {self.input_batch: "b", self.input_feature: "f"},
                     self.input_spatial)
        rhs = labels(rhs_rank, {self.kernel_input_feature: "i", self.kernel_output_feature: "o"},
                     self.kernel_spatial)
        out = labels(out_rank, {self.output_batch: "b", self.output_feature: "f"},
                     self.output_spatial)
        return f"{lhs}_{rhs}->{out}"


@dataclass(frozen=True)
class SparsityDescriptor:
    """One ``sparsity=`` entry of a dot, ``L.1@2:4``: operand ``index`` (0 lhs, 1 rhs) is N:M
    structured-sparse along ``dimension`` (n of every m elements are stored)."""

    index: int
    dimension: int
    n: int
    m: int

    def __str__(self) -> str:
        return f"{'LR'[self.index]}.{self.dimension}@{self.n}:{self.m}"
