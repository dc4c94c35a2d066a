"""The numbers behind the runtime checker's figures and verdicts, in one place.

- `median`, `quantile`, `mean`, `geometric_mean`, `variation`, `robust_sd`: of a list of step times, samples or run times;
- `mean_noise`: how far the mean of a series (step times, GPU samples) could move by chance, from
  the spread of the means of its consecutive blocks ("batch means": neighbouring steps are not
  independent, loader workers deliver batches in bursts, so the spread of single steps would
  understate it);
- `ratio_interval`: the ratio of two sets of run times (or throughputs) with its confidence interval,
  from the spread between runs of the same arm (the A/A noise of this machine in this call);
- `t_critical`: Student's t for those intervals (exact for integer degrees of freedom);
- `Bounded`: a list of samples that down-samples itself, to keep memory bounded over long runs;
  `thin`: a series averaged down to a number of points, for storing and drawing.

Only the standard library: these run in the parent and in tests, never in the user's process.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")

NOISE_CONFIDENCE = 0.95  # the interval a figure's noise is quoted at
MIN_BLOCK = 5  # values per block at least, for the noise of a mean


def geometric_mean(values: Iterable[float]) -> float:
    """Of positive rates or times: the mean that ratio_interval's log scale compares."""
    return statistics.geometric_mean(values)


def median(values: Iterable[float]) -> float:
    return statistics.median(values)


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.fsum(values) / len(values)


def variation(values: Sequence[float]) -> float | None:
    """Coefficient of variation (population standard deviation over mean); None for fewer than
    two values or a mean of zero."""
    if len(values) < 2 or mean(values) <= 0:
        return None
    return statistics.pstdev(values) / mean(values)


def robust_sd(values: Sequence[float]) -> float:
    """The standard deviation estimated from the median absolute deviation (1.4826 MAD): a few
    outliers -- a run slowed by another job -- do not inflate it."""
    centre = median(values)
    return 1.4826 * median([abs(v - centre) for v in values])


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) with linear interpolation between order statistics; 0.0 when empty."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term = total = 0.0
        if df >= 3:
            term = total = math.cos(theta)
            for j in range(1, (df - 1) // 2):
                term *= cos2 * (2 * j) / (2 * j + 1)
                total += term
        return 2 / math.pi * (theta + sin * total)
    term = total = 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for j in range(1, df // 2):
        term *= cos2 * (2 * j - 1) / (2 * j)
        total += term
    return sin * total


def t_critical(confidence: float, df: int) -> float:
    """c such that P(|T| <= c) = confidence, for Student's t with df degrees of freedom."""
    if df < 1:
        raise ValueError("t_critical needs at least one degree of freedom")
    low, high = 0.0, 1.0
    while _t_two_sided(high, df) < confidence:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        if _t_two_sided(middle, df) < confidence:
            low = middle
        else:
            high = middle
    return high


def block_means(values: Sequence[float], blocks: int = 10) -> list[float]:
    """Means of up to `blocks` consecutive blocks of at least MIN_BLOCK values (the last block
    takes the remainder)."""
    count = min(blocks, len(values) // MIN_BLOCK)
    if count < 1:
        return []
    size = len(values) // count
    edges = [i * size for i in range(count)] + [len(values)]
    return [mean(values[a:b]) for a, b in zip(edges, edges[1:])]


def mean_noise(values: Sequence[float], confidence: float = NOISE_CONFIDENCE) -> float | None:
    """Half-width of the confidence interval of the mean of a series, by batch means; None when
    the series is too short to tell (fewer than two blocks)."""
    means = block_means(values)
    if len(means) < 2:
        return None
    return t_critical(confidence, len(means) - 1) * statistics.stdev(means) / math.sqrt(len(means))


def ratio_interval(a: Sequence[float], b: Sequence[float], confidence: float) -> tuple[float, float, float, float]:
    """(ratio, low, high, spread) for mean(a) / mean(b) of positive run times, on a log scale: the
    ratio of geometric means, its `confidence` interval from Student's t with the variance pooled
    over both arms (each run of an arm repeats the same script: their spread is this machine's
    run-to-run noise), and that spread as a typical factor between two runs of the same script
    (exp of the pooled standard deviation).  Needs two runs per arm at least."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("ratio_interval needs two runs per arm at least")
    log_a, log_b = [math.log(x) for x in a], [math.log(x) for x in b]
    difference = mean(log_a) - mean(log_b)
    df = len(a) + len(b) - 2
    pooled = (sum((x - mean(log_a)) ** 2 for x in log_a) + sum((x - mean(log_b)) ** 2 for x in log_b)) / df
    half = t_critical(confidence, df) * math.sqrt(pooled * (1 / len(a) + 1 / len(b)))
    return math.exp(difference), math.exp(difference - half), math.exp(difference + half), math.exp(math.sqrt(pooled))


def thin(x: Sequence[float], y: Sequence[float], limit: int) -> tuple[list[float], list[float]]:
    """At most `limit` points: consecutive points averaged in equal groups (x and y alike)."""
    if len(y) <= limit:
        return list(x), list(y)
    edges = [round(i * len(y) / limit) for i in range(limit + 1)]
    return [mean(x[a:b]) for a, b in zip(edges, edges[1:])], [mean(y[a:b]) for a, b in zip(edges, edges[1:])]


class Bounded(list):
    """A list of samples that never holds `cap` items: when it would, neighbours are merged
    pairwise, and from then on each new sample is merged into the last item until that covers as
    many raw samples as the others (`stride`).  It stays an evenly spaced down-sample of all
    that was added, for bounded memory over long runs.  `merge(a, b, share)` combines two
    consecutive items, b standing for `share` of the raw samples of both."""

    def __init__(self, merge: Callable[[T, T, float], T], cap: int = 2048) -> None:
        super().__init__()
        self.merge, self.cap = merge, cap
        self.stride = 1  # raw samples per item
        self._filled = 0  # raw samples in the last item

    def add(self, sample) -> None:
        if self and self._filled < self.stride:
            self[-1] = self.merge(self[-1], sample, 1 / (self._filled + 1))
            self._filled += 1
        else:
            self.append(sample)
            self._filled = 1
        if len(self) < self.cap:
            return
        weights = [self.stride] * (len(self) - 1) + [self._filled]
        merged = [
            self.merge(self[i], self[i + 1], weights[i + 1] / (weights[i] + weights[i + 1]))
            for i in range(0, len(self) - 1, 2)
        ]
        self._filled = weights[-1] + (weights[-2] if len(self) % 2 == 0 else 0)
        self[:] = merged + ([self[-1]] if len(self) % 2 else [])
        self.stride *= 2
