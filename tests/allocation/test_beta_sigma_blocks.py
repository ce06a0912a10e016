"""The dense beta-binomial sums of gsd.allocation.expectations.beta_sigma in blocks of BLOCK_TERMS:
the block size changes no value (each row summed on its own), and the transient memory is bounded
by the block, not by the number of posteriors (what a long run's group tables hand it)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from gsd.allocation import expectations
from gsd.core.update import grpo_term


def _posteriors(rows: int):
    """Posteriors of 0 … ~3,000 counts (both sides of log_rising's Stirling switch), G of 2 … 32."""
    rng = np.random.default_rng(0)
    n = rng.integers(0, 3000, rows).astype(np.float64)
    k = np.floor(n * rng.random(rows))
    return 0.5 + k, 0.5 + n - k, rng.integers(2, 33, rows)


def test_block_size_changes_no_value(monkeypatch):
    a, b, G = _posteriors(5000)
    f = grpo_term(1, 1e-4)
    whole = expectations.beta_sigma(a, b, G, f)
    monkeypatch.setattr(expectations, "BLOCK_TERMS", 64)  # a few rows per block
    assert np.array_equal(expectations.beta_sigma(a, b, G, f), whole)  # bit for bit


def _peak(rows: int) -> int:
    a, b, _ = _posteriors(rows)
    G = np.full(rows, 16)
    f = grpo_term(1, 1e-4)
    expectations.beta_sigma(a[:10], b[:10], G[:10], f)  # imports and caches outside the measure
    tracemalloc.start()
    try:
        expectations.beta_sigma(a, b, G, f)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_transient_memory_bounded_by_the_block():
    """65,536 and 262,144 posteriors at G = 16 (gsd diagnose predicts group tables of 65,536):
    both beyond one block (BLOCK_TERMS // 17 rows), so the peak grows by the arrays of the rows
    alone (the sort by G, the inputs' copies, the output: at most 16 float64 per row), not by the
    block's ~10 temporaries (log_rising's Stirling branch) times the rows.  With blocks of 2^21
    terms the second table's block was twice the first's: +80 MB."""
    small, big = 1 << 16, 1 << 18
    assert small * 17 > expectations.BLOCK_TERMS
    assert _peak(big) - _peak(small) <= 16 * 8 * (big - small)
    assert _peak(small) <= 16 * 8 * expectations.BLOCK_TERMS + 16 * 8 * small
