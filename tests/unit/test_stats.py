"""daemon.stats.percentile: the one percentile formula (status, eval, benches)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from daemon.stats import p50_p95, percentile


def test_percentile_is_numpy_nearest():
    rng = random.Random(11)
    for n in (1, 2, 3, 7, 20, 21, 200):
        xs = [rng.uniform(0, 100) for _ in range(n)]
        for q in (0.0, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0):
            assert percentile(xs, q) == float(np.percentile(xs, q * 100, method="nearest")), (n, q)


def test_percentile_edges():
    assert math.isnan(percentile([], 0.5))
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0  # sorts; a measured value
    with pytest.raises(ValueError):
        percentile([1.0], 95)
    assert p50_p95([1.0, 2.0, 3.0, 4.0], 1) == {"p50": 3.0, "p95": 4.0}  # index round(1.5) = 2: half to even
