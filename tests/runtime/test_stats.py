"""The runtime checker's statistics: Student's t, the noise of a mean, the ratio interval, the
self-down-sampling sample list."""

import math
import random
import statistics

import pytest

from gpulint.runtime_check import stats


@pytest.mark.parametrize(
    "confidence, df, expected",
    [
        (0.95, 1, 12.706),
        (0.95, 2, 4.303),
        (0.95, 4, 2.776),
        (0.95, 9, 2.262),
        (0.95, 30, 2.042),
        (0.99, 2, 9.925),
        (0.99, 4, 4.604),
        (0.995, 4, 5.598),
        (0.995, 10, 3.581),
    ],
)
def test_t_critical_matches_the_tables(confidence, df, expected):
    assert stats.t_critical(confidence, df) == pytest.approx(expected, abs=1e-3)


def test_quantiles_and_median():
    assert stats.quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.5 == stats.median([4.0, 1.0, 3.0, 2.0])
    assert stats.quantile([1.0, 2.0, 3.0], 0.0) == 1.0 and stats.quantile([1.0, 2.0, 3.0], 1.0) == 3.0
    assert stats.quantile([], 0.5) == 0.0
    assert stats.variation([1.0, 1.0]) == 0.0 and stats.variation([1.0]) is None


def test_mean_noise_covers_the_true_mean_about_95_percent_of_the_time():
    rng = random.Random(1)
    covered = 0
    for _ in range(400):
        values = [1.0 + rng.gauss(0, 0.1) for _ in range(50)]
        covered += abs(stats.mean(values) - 1.0) <= stats.mean_noise(values)
    assert 0.90 <= covered / 400 <= 0.99
    assert stats.mean_noise([1.0] * 9) is None  # fewer than two blocks of five


def test_mean_noise_holds_where_neighbouring_steps_are_alike():
    # Step times that drift together (AR(1), as when a loader delivers batches in waves): an
    # interval from the spread of single steps covers the mean about half the time; batch means hold.
    rng = random.Random(2)
    batch, naive = 0, 0
    for _ in range(300):
        level, values = 0.0, []
        for _ in range(200):
            level = 0.8 * level + rng.gauss(0, 0.1)
            values.append(1.0 + level)
        error = abs(stats.mean(values) - 1.0)
        batch += error <= stats.mean_noise(values)
        naive += error <= 1.96 * statistics.stdev(values) / math.sqrt(len(values))
    assert batch / 300 >= 0.9 and naive / 300 < 0.7


def test_ratio_interval():
    ratio, low, high, spread = stats.ratio_interval([2.0, 2.2, 2.1], [1.0, 1.1, 1.05], 0.95)
    assert ratio == pytest.approx(2.0, rel=1e-3) and low < ratio < high and 1 < spread < 1.1
    with pytest.raises(ValueError):
        stats.ratio_interval([1.0], [1.0, 2.0], 0.95)


def test_bounded_keeps_an_evenly_weighted_down_sample():
    samples = stats.Bounded(lambda a, b, share: a + (b - a) * share, cap=16)
    values = [float(i % 7) for i in range(1000)]
    for value in values:
        samples.add(value)
    assert len(samples) < 16 and samples.stride == 128
    # Each item is the mean of the raw samples it covers, so their weighted mean is the exact mean.
    weights = [samples.stride] * (len(samples) - 1) + [1000 - samples.stride * (len(samples) - 1)]
    assert sum(w * v for w, v in zip(weights, samples, strict=True)) / 1000 == pytest.approx(stats.mean(values))


def test_thin_averages_groups():
    x, y = stats.thin([0, 1, 2, 3], [0.0, 2.0, 4.0, 6.0], 2)
    assert x == [0.5, 2.5] and y == [1.0, 5.0]
    assert stats.thin([0, 1], [5.0, 6.0], 10) == ([0, 1], [5.0, 6.0])
