"""One shape for the capacity figures (per-rank times, memory headroom, FLOPs and MFU, scaling
efficiency): a value with its unit, or no value and the reason it was not measured.

The terminal report prints them as rows, `--json` writes them as they are (`dataclasses.asdict`),
and the run history (history.py) stores them, `compare` and the HTML report show them, without
knowing which module made them.  A figure may say which way is better and how noisy it is, so
that a change between two runs can be called better, worse, or within the noise.
"""

from __future__ import annotations

from dataclasses import dataclass

NOT_MEASURED = "not measured"
UNITS = ("s", "share", "bytes", "flop", "flop/s", "samples/s", "steps/s", "x", "count", "%", "cores")


@dataclass
class Figure:
    name: str
    value: float | None  # None: not measured
    unit: str  # one of UNITS
    note: str = ""  # how it was measured, or why it was not
    better: str | None = None  # "lower" or "higher" where one way is better
    noise: float | None = None  # half-width of the 95% interval of the value, in its unit; None: not measured

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
        return f"{1000 * value:.1f} ms" if abs(value) < 10 else f"{value:.1f} s"
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
    if unit == "%":
        return f"{value:.0f}%"
    if unit == "cores":
        return f"{value:.2f} cores"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
