"""Percentiles of measured times: one formula for ``status``, ``eval`` and every bench.

Standard library only (the LSP bench and the CLI use it without numpy).
"""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-quantile (``0 <= q <= 1``; 0.95 for p95) of ``values`` by the nearest-rank
    rule on the sorted sample: ``sorted(values)[round(q * (n - 1))]`` (Python's round, half
    to even), which is numpy's ``percentile(..., method="nearest")``. Always one of the
    measured values, never an interpolation. ``nan`` for no values; ``ValueError`` for a
    ``q`` outside 0..1.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in 0..1, got {q}")
    xs = sorted(values)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def p50_p95(values: Iterable[float], ndigits: int = 2) -> dict[str, float]:
    """``{"p50": ..., "p95": ...}`` of ``values`` (:func:`percentile`), rounded to ``ndigits``:
    the latency shape of the bench and eval reports."""
    xs = list(values)
    return {"p50": round(percentile(xs, 0.5), ndigits), "p95": round(percentile(xs, 0.95), ndigits)}
