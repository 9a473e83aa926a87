"""The typed values of the structured instruction attributes: ``slice``, ``padding``,
``window``, ``dim_labels`` and ``sparsity``.

``neuron_sim.hlo.attributes`` reads and prints them (its codecs) and re-exports these classes; they
live here so that a module without such an attribute does not load them at start-up. Each is a
``neuron_sim.records.Record``: a frozen dataclass's behaviour without the cost of creating one.
"""

from __future__ import annotations

from neuron_sim.records import Record

__all__ = ["ConvDimLabels", "PadDim", "SliceDim", "SparsityDescriptor", "Window", "WindowDim"]


class SliceDim(Record):
    __slots__ = ("start", "limit", "stride")

    start: int
    limit: int
    stride: int

    def __init__(self, start: int, limit: int, stride: int = 1) -> None:
        self._set(start=start, limit=limit, stride=stride)


class PadDim(Record):
    __slots__ = ("low", "high", "interior")

    low: int
    high: int
    interior: int

    def __init__(self, low: int, high: int, interior: int = 0) -> None:
        self._set(low=low, high=high, interior=interior)


class WindowDim(Record):
    __slots__ = ("size", "stride", "pad_low", "pad_high", "lhs_dilation", "rhs_dilation",
                 "reversal")

    size: int
    stride: int
    pad_low: int
    pad_high: int
    lhs_dilation: int
    rhs_dilation: int
    reversal: bool

    def __init__(self, size: int, stride: int = 1, pad_low: int = 0, pad_high: int = 0,
                 lhs_dilation: int = 1, rhs_dilation: int = 1, reversal: bool = False) -> None:
        self._set(size=size, stride=stride, pad_low=pad_low, pad_high=pad_high,
                  lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, reversal=reversal)


class Window(Record):
    __slots__ = ("dims",)

    dims: tuple[WindowDim, ...]

    def __init__(self, dims: tuple[WindowDim, ...]) -> None:
        self._set(dims=dims)

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


class ConvDimLabels(Record):
    """Convolution dimension numbers, from ``dim_labels=b01f_01io->b01f``."""

    __slots__ = ("input_batch", "input_feature", "input_spatial", "kernel_input_feature",
                 "kernel_output_feature", "kernel_spatial", "output_batch", "output_feature",
                 "output_spatial", "ranks")

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
    ranks: tuple[int, int, int] | None

    def __init__(self, input_batch: int, input_feature: int, input_spatial: tuple[int, ...],
                 kernel_input_feature: int, kernel_output_feature: int,
                 kernel_spatial: tuple[int, ...], output_batch: int, output_feature: int,
                 output_spatial: tuple[int, ...],
                 ranks: tuple[int, int, int] | None = None) -> None:
        self._set(input_batch=input_batch, input_feature=input_feature,
                  input_spatial=input_spatial, kernel_input_feature=kernel_input_feature,
                  kernel_output_feature=kernel_output_feature, kernel_spatial=kernel_spatial,
                  output_batch=output_batch, output_feature=output_feature,
                  output_spatial=output_spatial, ranks=ranks)

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


class SparsityDescriptor(Record):
    """One ``sparsity=`` entry of a dot, ``L.1@2:4``: operand ``index`` (0 lhs, 1 rhs) is N:M
    structured-sparse along ``dimension`` (n of every m elements are stored)."""

    __slots__ = ("index", "dimension", "n", "m")

    index: int
    dimension: int
    n: int
    m: int

    def __init__(self, index: int, dimension: int, n: int, m: int) -> None:
        self._set(index=index, dimension=dimension, n=n, m=m)

    def __str__(self) -> str:
        return f"{'LR'[self.index]}.{self.dimension}@{self.n}:{self.m}"
