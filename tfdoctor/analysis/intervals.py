"""Interval-set arithmetic on numpy arrays (half-open ``[start, end)`` in picoseconds).

An interval set is a pair ``(starts, ends)`` of sorted, disjoint int64 arrays.
"""

from __future__ import annotations

import numpy as np

IntervalSet = tuple[np.ndarray, np.ndarray]

EMPTY: IntervalSet = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


def union(starts: np.ndarray, ends: np.ndarray) -> IntervalSet:
    """Merge possibly overlapping intervals into a sorted disjoint set."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts
    if not keep.all():  # copies only when something is dropped (a trace line is ~all non-empty events)
        starts, ends = starts[keep], ends[keep]
    del keep
    if starts.size == 0:
        return EMPTY
    if starts.size > 1 and not (starts[1:] >= starts[:-1]).all():
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        del order
    else:  # already sorted (a trace line's events are in time order): no sort, no copy
        s, e = starts, ends
    run_max = np.maximum.accumulate(e)
    # a new interval begins where the start is beyond everything seen so far
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    out_e = np.maximum.reduceat(run_max, idx)
    return out_s, out_e


def union_sets(*sets: IntervalSet) -> IntervalSet:
    parts = [s for s in sets if s[0].size]
    if not parts:
        return EMPTY
    return union(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def clip(iset: IntervalSet, lo: int, hi: int) -> IntervalSet:
    s, e = iset
    if s.size == 0 or hi <= lo:
        return EMPTY
    i0 = np.searchsorted(e, lo, side="right")
    i1 = np.searchsorted(s, hi, side="left")
    s, e = s[i0:i1], e[i0:i1]
    if s.size == 0:
        return EMPTY
    return np.maximum(s, lo), np.minimum(e, hi)


def measure(iset: IntervalSet) -> int:
    return int((iset[1] - iset[0]).sum()) if iset[0].size else 0


def subtract(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a`` minus ``b`` (both disjoint sorted sets), vectorised: ``a`` ∩ the gaps of ``b``.

    A sweep over all boundaries (ends before starts at equal times: the sets are half-open) counts
    how many of the two sets cover each stretch; the result is where both do.
    """
    if a[0].size == 0 or b[0].size == 0:
        return a
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    gap_s = np.concatenate([[lo], b[1]])
    gap_e = np.concatenate([b[0], [hi]])
    keep = gap_e > gap_s
    gap_s, gap_e = gap_s[keep], gap_e[keep]
    pts = np.concatenate([a[0], gap_s, a[1], gap_e])
    n_start = a[0].size + gap_s.size
    delta = np.concatenate([np.ones(n_start, np.int8), -np.ones(pts.size - n_start, np.int8)])
    order = np.lexsort((delta, pts))  # by time, ends (-1) first
    p, depth = pts[order], np.cumsum(delta[order], dtype=np.int64)
    both = np.flatnonzero(depth[:-1] == 2)
    out_s, out_e = p[both], p[both + 1]
    keep = out_e > out_s
    return out_s[keep], out_e[keep]


def intersect(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    return subtract(a, subtract(a, b))


def per_window(iset: IntervalSet, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Measure of ``iset`` inside each window ``[lo[i], hi[i])`` (vectorised via prefix sums)."""
    s, e = iset
    if s.size == 0:
        return np.zeros(len(lo), dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(e - s)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # measure of iset in (-inf, t)
        k = np.searchsorted(s, t, side="right")  # intervals starting before t
        full = cum[k]
        # the last of those may extend past t
        last = np.clip(k - 1, 0, None)
        over = np.where(k > 0, np.maximum(e[last] - t, 0), 0)
        return full - over

    return covered_before(np.asarray(hi)) - covered_before(np.asarray(lo))
