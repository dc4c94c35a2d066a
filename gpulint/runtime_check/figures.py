"""One shape for the capacity figures (per-rank times, memory headroom, FLOPs and MFU, scaling
efficiency): a value with its unit, or no value and the reason it was not measured.

The terminal report prints them as rows, `--json` writes them as they are (`dataclasses.asdict`),
and anything that stores or renders runs can take them without knowing which module made them.
"""

from __future__ import annotations

from dataclasses import dataclass

NOT_MEASURED = "not measured"
UNITS = ("s", "share", "bytes", "flop", "flop/s", "samples/s", "steps/s", "x", "count")


@dataclass
class Figure:
    name: str
    value: float | None  # None: not measured
    unit: str  # one of UNITS
    note: str = ""  # how it was measured, or why it was not

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unknown unit {self.unit!r}")

    @property
    def text(self) -> str:
        return format_value(self.value, self.unit)


def format_value(value: float | None, unit: str) -> str:
    if value is None:
        return NOT_MEASURED
    if unit == "s":
        return f"{1000 * value:.1f} ms"
    if unit == "share":
        return f"{100 * value:.1f}%"
    if unit == "bytes":
        for size, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= size:
                return f"{value / size:.1f} {name}"
        return f"{value:.0f} B"
    if unit in ("flop", "flop/s"):
        suffix = "FLOP" if unit == "flop" else "FLOP/s"
        for size, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= size:
                return f"{value / size:.2f} {prefix}{suffix}"
        return f"{value:.0f} {suffix}"
    if unit in ("samples/s", "steps/s"):
        return f"{value:.1f} {unit}"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.0f}"
