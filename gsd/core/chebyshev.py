"""E[f(k)], k ~ Binom(G, p), at one G as a Chebyshev series in p: ≤ G Horner steps per prompt.

At a fixed G the expectation is a polynomial in p.  With f symmetric (f(k) = f(G − k)) and
f(0) = 0, as every expectation of the ledger is (:func:`gsd.core.update._grpo_term`), evaluate at
a = min(p, 1 − p) ∈ [0, 1/2] and write

    E[f(k)] = a·h(a),   h(a) = Σ_{k=1}^{G} C(G, k)·f(k)·a^(k−1)·(1 − a)^(G−k),

h a polynomial of degree G − 1 that is positive on [0, 1/2] (h(0) = G·f(1)).  Its Chebyshev
coefficients on [0, 1/2] (x = 4a − 1 ∈ [−1, 1]) are computed once per (G, f) in long double
(64-bit mantissa) from its values at the G Chebyshev nodes, where the degree-(G − 1)
interpolant is h itself, then truncated at the smallest degree N whose tail Σ_{n>N}|c_n| is
below 8 float64 roundings of min h (8·2^−53·min h; a tighter cut only keeps coefficients of the
long-double table's noise).  h is smooth on [0, 1/2] at the scale 1/G near a = 0,
which a Chebyshev series resolves with ~4·sqrt(G) terms: N = 31 at G = 64.

Evaluated form.  The truncated series with its float64 coefficients, P(x) = Σ_{n ≤ N} c_n T_n(x),
is converted *exactly* (Python integers and fractions: the c_n are dyadic rationals, T_n has
integer coefficients) to powers of y = −x = 1 − 4a, P = Σ_j m_j y^j, and each m_j rounded once to
float64; Horner's rule then costs a multiply and an add per degree over all prompts, against
Clenshaw's multiply, subtract and add.  In floating point the conversion would cancel (T_31's
coefficients reach ~10^9), but the exact one is well conditioned here: Σ|m_j| is 8·min h at
G = 64, 9.5·min h at G = 89 (paper convention).

Error bound (relative to the exact E[f] with f's float64 values; f's own rounding adds ≤ 4u).
Clenshaw's, with u = 2^−53, γ₃ = 3u/(1 − 3u), c_n the coefficients (kept as float64), T_N the dropped tail
and B = max_k Σ_{j=k}^{N} (j − k + 1)·|c_j| (|U_m| ≤ m + 1 bounds every Clenshaw b_k):

* Clenshaw in floating point is the exact recurrence with each b_k perturbed by δ_k,
  |δ_k| ≤ γ₃·(|c_k| + 3B); a perturbation δ_k of b_k moves the sum c₀ + x·b₁ − b₂ by exactly
  δ_k·T_k(x) (x·U_{k−1} − U_{k−2} = T_k), and |T_k| ≤ 1: at most γ₃·(Σ|c_n| + 3(N + 1)·B);
* x = 4a − 1 is rounded once (|Δx| ≤ u) and |d/dx Σ c_n T_n| ≤ Σ n²|c_n| (Markov): u·Σ n²|c_n|;
* the coefficients' rounding to float64: u·Σ|c_n|; the long-double table's own error (G-step
  term recurrence, G-term cosine sums): 2(N + 1)(4G + G)·u_ld·max h;
* the tail T_N (|T_n| ≤ 1).

* Horner at the rounded y: γ_{2N}·Σ|m̂_j| (|y| ≤ 1; Higham, Accuracy and Stability, eq. 5.3);
  the m_j's rounding: u·Σ|m_j|; y = 1 − 4a rounded once (4a is exact): u·Σ j·|m_j| (|P'| on
  [−1, 1]); the c_n's rounding from long double, the table's own error and the tail as above.

Either sum over min h (the minimum of h over the nodes and a = 1/2), plus 2u for the product
a·h and for 1 − p, is a bound; the table evaluates the form whose bound is smaller (Horner's
wherever it is within :data:`MAX_BOUND`) and names it :attr:`ChebyshevTable.bound`: |computed − exact| ≤ bound·exact + 2^−1075
(the last term: the product a·h rounds in absolute terms when the result is subnormal) — Horner's
5.6e-15 at G = 8, 7.1e-14 at G = 64, 9.3e-13 at G = 130 (Clenshaw's 3.5e-14, 6.4e-13, 1.7e-12;
:func:`chebyshev_table` computes both, the simulator docs page tabulates them).  The bound is first order in u (products of two roundings dropped) and pessimistic: the measured error
against mpmath is a few ulp.  A (G, f) whose bound exceeds :data:`MAX_BOUND` (large G: the
long-double error and the 3(N + 1)·B term grow with G), or G above :data:`MAX_CHEBYSHEV_G`, or
a platform whose long double is no wider than a double, gets no table: the caller keeps the
exact sum (:func:`gsd.core.binomial.symmetric_expectation`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = [
    "ChebyshevTable",
    "chebyshev_table",
    "chebyshev_expectation",
    "monomial_coefficients",
    "MAX_BOUND",
    "MAX_CHEBYSHEV_G",
]

#: Largest relative error bound a table may have; above it the exact sum is kept.
MAX_BOUND = 1e-12
#: Largest G given a table (its build is O(G²) in long double: ~20 ms at this G; past G = 130 in the paper's
#: convention, 183 with ddof 1 and eps 0.1, the bound exceeds :data:`MAX_BOUND` anyway).
MAX_CHEBYSHEV_G = 256
_U = 2.0**-53
_TAIL = 8 * _U  # the dropped tail, relative to min h: 8 roundings, far inside the bound
_PI = np.longdouble("3.14159265358979323846264338327950288")  # np.pi is float64: nodes off by 1e-16


@dataclass(frozen=True)
class ChebyshevTable:
    """h(a) = E[f(k)]/a on [0, 1/2] as Σ_{n ≤ degree} coeffs[n]·T_n(4a − 1).

    ``monomial``: the same polynomial Σ_n coeffs[n]·T_n(−y) in powers of y = 1 − 4a, its
    coefficients converted exactly from ``coeffs`` and rounded once to float64, evaluated by
    Horner's rule (2 passes per degree against Clenshaw's 3); None where Horner's bound would
    exceed :data:`MAX_BOUND` (then Clenshaw on ``coeffs``).  ``bound``: the relative error bound
    of :func:`chebyshev_expectation` against the exact sum, for the form it evaluates (module
    docstring); ``clenshaw_bound``: Clenshaw's, for comparison; ``tail``: the dropped
    Σ_{n > degree} |c_n| over min h.
    """

    G: int
    coeffs: np.ndarray
    bound: float
    tail: float
    monomial: np.ndarray | None = None
    clenshaw_bound: float = float("nan")

    @property
    def degree(self) -> int:
        return self.coeffs.size - 1


def _h_at(a: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """h(a) = Σ_k weights[k]·C(G, k)·a^(k−1)(1 − a)^(G−k) in long double, by the term ratio
    (every term ≥ 0 for a ∈ (0, 1/2]: no cancellation)."""
    G = weights.size - 1
    a = a.astype(np.longdouble)
    b = 1 - a
    term = G * b ** (G - 1)  # C(G, 1)·a^0·(1 − a)^(G−1)
    total = np.zeros_like(a)
    ratio = a / b
    for k in range(1, G + 1):  # over k, vectorised over the nodes
        total += weights[k] * term
        term = term * (G - k) / (k + 1) * ratio
    return total


@functools.lru_cache(maxsize=64)
def chebyshev_table(G: int, f) -> ChebyshevTable | None:
    """The Chebyshev table of E[f(k)] at group size ``G``, or None where its bound exceeds
    :data:`MAX_BOUND` (or f is not symmetric with f(0) = 0, or G > :data:`MAX_CHEBYSHEV_G`).

    ``f(k, G)``: int64 arrays in, float64 out (:func:`gsd.core.update._grpo_term`); cached per
    (G, f), so pass the same f object for the same function.
    """
    u_ld = float(np.finfo(np.longdouble).eps) / 2
    if not 2 <= G <= MAX_CHEBYSHEV_G or u_ld >= _U / 64:
        return None
    k = np.arange(G + 1)
    fk = np.asarray(f(k, np.full(G + 1, G, dtype=np.int64)), dtype=np.float64)
    if fk[0] != 0 or not np.array_equal(fk, fk[::-1]) or not np.all(np.isfinite(fk)) or (fk < 0).any():
        return None
    weights = fk.astype(np.longdouble)
    n = G  # h has degree G − 1: its interpolant at G nodes is h
    theta = (np.arange(n, dtype=np.longdouble) + 0.5) * _PI / n  # exact nodes: the cosine sums are then orthogonal
    x = np.cos(theta)
    h = _h_at((x + 1) / 4, weights)
    cosines = np.cos(np.arange(n, dtype=np.longdouble)[:, None] * theta[None, :])
    c = (cosines @ h) * (2 / np.longdouble(n))
    c[0] /= 2
    h_min = float(min(h.min(), _h_at(np.array([0.5]), weights)[0]))
    if not h_min > 0:
        return None
    absc = np.abs(c)
    tails = np.cumsum(absc[::-1])[::-1]  # tails[m] = Σ_{n ≥ m} |c_n|
    above = np.flatnonzero(np.append(tails, 0.0)[1:] > _TAIL * h_min)
    N = int(above[-1]) + 1 if above.size else 0
    tail = float(tails[N + 1]) if N + 1 < n else 0.0
    kept = absc[: N + 1].astype(np.float64)
    # B = max_k Σ_{j ≥ k} (j − k + 1)|c_j| over the kept coefficients.
    j = np.arange(N + 1)
    B = float(max(((j[k0:] - k0 + 1) * kept[k0:]).sum() for k0 in range(N + 1)))
    g3 = 3 * _U / (1 - 3 * _U)
    rounding = g3 * (kept.sum() + 3 * (N + 1) * B) + _U * float((j**2 * kept).sum()) + _U * kept.sum()
    table_err = 2 * (N + 1) * (4 * G + n) * u_ld * float(h.max())
    bound = (tail + rounding + table_err) / h_min + 2 * _U
    coeffs = c[: N + 1].astype(np.float64)
    monomial, horner_bound = _monomial_form(coeffs, tail + table_err, h_min)
    if min(bound, horner_bound) > MAX_BOUND:
        return None
    coeffs.flags.writeable = False
    if horner_bound <= MAX_BOUND:
        monomial.flags.writeable = False
        return ChebyshevTable(
            G=G, coeffs=coeffs, bound=horner_bound, tail=tail / h_min, monomial=monomial, clenshaw_bound=bound
        )
    return ChebyshevTable(G=G, coeffs=coeffs, bound=bound, tail=tail / h_min, clenshaw_bound=bound)


def monomial_coefficients(coeffs: Sequence[float] | np.ndarray) -> list[Fraction]:
    """Σ_n coeffs[n]·T_n(x) in powers of y = −x, exactly: the float64 coefficients as the dyadic
    rationals they are, T_n's integer coefficients by T_{n+1} = 2x·T_n − T_{n−1}, T_n(−y) =
    (−1)^n T_n(y).  (In floating point this conversion would cancel: T_31's coefficients reach
    ~10^9 while the result's stay near min h.)"""
    N = len(coeffs) - 1
    T = [[1], [0, 1]][: N + 1]
    for n in range(2, N + 1):
        nxt = [0] * (n + 1)
        for i, v in enumerate(T[n - 1]):
            nxt[i + 1] += 2 * v
        for i, v in enumerate(T[n - 2]):
            nxt[i] -= v
        T.append(nxt)
    m = [Fraction(0)] * (N + 1)
    for n, c in enumerate(coeffs):
        cn = Fraction(float(c)) * (-1) ** n
        for i, v in enumerate(T[n]):
            if v:
                m[i] += cn * v
    return m


def _monomial_form(coeffs: np.ndarray, series_err: float, h_min: float) -> tuple[np.ndarray, float]:
    """The Horner form of the float64 series and its relative error bound (module docstring):
    γ_{2N}·Σ|m̂_j| (Horner at the rounded y, |y| ≤ 1), u·Σ|m_j| (the coefficients' one rounding),
    u·Σ j·|m_j| (y = 1 − 4a rounded once, |Δy| ≤ u, |P'| ≤ Σ j·|m_j| on [−1, 1]), u·Σ|c_n| (the
    long-double coefficients rounded to float64), ``series_err`` (the dropped tail and the
    long-double table's error), all over ``h_min``, plus 2u."""
    exact = monomial_coefficients(coeffs)
    N = len(exact) - 1
    monomial = np.array([float(m) for m in exact], dtype=np.float64)
    abs_sum = float(sum(abs(m) for m in exact))
    deriv = float(sum(j * abs(m) for j, m in enumerate(exact)))
    g2n = 2 * N * _U / (1 - 2 * N * _U)
    rounding = (
        g2n * float(np.abs(monomial).sum()) * (1 + 4 * _U)
        + _U * abs_sum
        + _U * deriv
        + _U * float(np.abs(coeffs).sum())
    )
    return monomial, (series_err + rounding) / h_min + 2 * _U


_local = threading.local()


#: Entries per row up to which the work rows are kept between calls (4 rows of 16 MB at most).
KEEP_ROW_ENTRIES = 1 << 21


def _buffers(size: int) -> np.ndarray:
    """Four float64 work rows of ``size`` entries, kept per thread between calls: a fresh
    multi-MB buffer every step would be paged in afresh (glibc returns it to the system).
    Above :data:`KEEP_ROW_ENTRIES` fresh rows, not kept (a thread holds 64 MB at most)."""
    if size > KEEP_ROW_ENTRIES:
        return np.empty((4, size))
    buf = getattr(_local, "buf", None)
    if buf is None or buf.shape[1] < size:
        buf = _local.buf = np.empty((4, size))
    return buf[:, :size]


def chebyshev_expectation(
    p: np.ndarray, table: ChebyshevTable, out: np.ndarray | None = None, minor: np.ndarray | None = None
) -> np.ndarray:
    """E[f(k)] for k ~ Binom(G, p) from ``table`` (:func:`chebyshev_table`), float64, p's shape.

    ``p``: float array in [0, 1]; ``minor``: min(p, 1 − p) of the same shape when the caller has
    it (:func:`gsd.core.silent._minor`'s bits), else computed here.  Horner's rule on the table's
    monomial form (each degree a multiply and an add over all prompts), or Clenshaw's
    recurrence on its Chebyshev coefficients (a multiply, a subtract and an add) where the table
    has no monomial form, in preallocated rows (no temporaries); within
    :attr:`ChebyshevTable.bound` of the exact sum, relatively.
    """
    p = np.asarray(p, dtype=np.float64)
    flat = p.reshape(-1)
    size = flat.size
    res = np.empty(p.shape) if out is None else out
    if size == 0:
        return res
    a, x2, b1, b2 = _buffers(size)
    if minor is not None:
        a = minor.reshape(-1)
    else:
        np.subtract(1.0, flat, out=a)
        np.minimum(flat, a, out=a)  # exact: 1 − p is exact for p ≥ 1/2 (Sterbenz)
    if table.monomial is not None:
        return _horner(a, table.monomial, x2, res)
    np.multiply(a, 4.0, out=x2)
    np.subtract(x2, 1.0, out=x2)  # x = 4a − 1, rounded once
    c = table.coeffs
    N = c.size - 1
    if N == 0:
        np.multiply(a, c[0], out=res.reshape(-1))
        return res
    b1.fill(c[N])
    b2.fill(0.0)
    if N > 1:
        np.multiply(x2, 2.0, out=x2)
    t = res.reshape(-1)  # the output row doubles as the third Clenshaw row
    for n in range(N - 1, 0, -1):  # b_n = c_n + 2x·b_{n+1} − b_{n+2}
        np.multiply(x2, b1, out=t)
        np.subtract(t, b2, out=t)
        np.add(t, c[n], out=t)
        b1, b2, t = t, b1, b2
    if N > 1:
        np.multiply(x2, 0.5, out=x2)  # x again (halving is exact)
    # s = c_0 + x·b_1 − b_2, then E = a·s
    np.multiply(x2, b1, out=t)
    np.subtract(t, b2, out=t)
    np.add(t, c[0], out=t)
    np.multiply(t, a, out=t)
    flat_out = res.reshape(-1)
    if t is not flat_out:
        flat_out[...] = t
    return res


def _horner(a: np.ndarray, m: np.ndarray, y: np.ndarray, res: np.ndarray) -> np.ndarray:
    """a·Σ_j m[j]·y^j at y = 1 − 4a (rounded once: 4a is exact) into ``res``, by Horner's rule
    in ``res`` itself, ``y`` a work row."""
    t = res.reshape(-1)
    N = m.size - 1
    if N == 0:
        np.multiply(a, m[0], out=t)
        return res
    np.multiply(a, -4.0, out=y)
    np.add(y, 1.0, out=y)
    np.multiply(y, m[N], out=t)  # the first step from r = m_N: no fill
    np.add(t, m[N - 1], out=t)
    for j in range(N - 2, -1, -1):
        np.multiply(t, y, out=t)
        np.add(t, m[j], out=t)
    np.multiply(t, a, out=t)
    return res
