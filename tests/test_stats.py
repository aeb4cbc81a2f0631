"""The statistics behind every success table and paired comparison."""

from __future__ import annotations

import random

import pytest

from webr1_kit.stats import paired_difference_interval, sign_test, wilson_interval


def test_wilson_interval_known_values():
    assert wilson_interval(0, 0) is None
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0


def test_sign_test_is_the_exact_two_sided_binomial():
    assert sign_test(0, 0) == 1.0
    assert sign_test(11, 0) == pytest.approx(2 / 2 ** 11)
    assert sign_test(8, 17) == sign_test(17, 8) == pytest.approx(0.1078, abs=1e-4)


def test_paired_difference_interval_contains_the_estimate_and_mirrors():
    lo, hi = paired_difference_interval(both=135, gained=8, lost=17, neither=152)
    assert lo < (8 - 17) / 312 < hi < 0.02 and lo > -0.08
    assert paired_difference_interval(135, 17, 8, 152) == pytest.approx((-hi, -lo), abs=1e-4)
    assert paired_difference_interval(0, 0, 0, 0) is None
    lo, hi = paired_difference_interval(0, 20, 0, 0)  # every pair gained
    assert hi == 1.0 and 0.7 < lo < 1.0


def test_paired_difference_interval_covers_the_truth_about_95_percent_of_the_time():
    """Monte Carlo: 2000 paired samples of 60 from fixed 2x2 distributions; the interval
    must hold the true difference in close to 95% of them (a swapped sign, or the
    correlation estimate without Newcombe's correction, gives 0.89-0.92 on the second)."""
    rng = random.Random(0)
    for cells in ((0.45, 0.12, 0.05, 0.38), (0.44, 0.04, 0.02, 0.5)):  # both, gained, lost, neither
        truth = cells[1] - cells[2]
        covered = 0
        for _ in range(2000):
            counts = [0, 0, 0, 0]
            for _ in range(60):
                u, k = rng.random(), 0
                while k < 3 and u > cells[k]:
                    u -= cells[k]
                    k += 1
                counts[k] += 1
            lo, hi = paired_difference_interval(*counts)
            covered += lo <= truth <= hi
        assert 0.935 <= covered / 2000 <= 0.99, cells
