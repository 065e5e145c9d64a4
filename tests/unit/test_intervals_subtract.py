"""The vectorised interval subtraction returns exactly what the straightforward loop returns."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfdoctor.analysis import intervals as iv


def loop_subtract(a: iv.IntervalSet, b: iv.IntervalSet) -> iv.IntervalSet:
    """The reference: walk each interval of ``a`` over the intervals of ``b``."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    out_s: list[int] = []
    out_e: list[int] = []
    bs, be = b
    for s, e in zip(a[0].tolist(), a[1].tolist(), strict=True):
        j = int(np.searchsorted(be, s, side="right"))
        cur = s
        while j < bs.size and bs[j] < e:
            if bs[j] > cur:
                out_s.append(cur)
                out_e.append(int(bs[j]))
            cur = max(cur, int(be[j]))
            if cur >= e:
                break
            j += 1
        if cur < e:
            out_s.append(cur)
            out_e.append(e)
    return np.array(out_s, dtype=np.int64), np.array(out_e, dtype=np.int64)


spans = st.lists(st.tuples(st.integers(-50, 200), st.integers(0, 40)), max_size=25)


def as_set(pairs: list[tuple[int, int]]) -> iv.IntervalSet:
    return iv.union(
        np.array([s for s, _ in pairs], dtype=np.int64), np.array([s + d for s, d in pairs], dtype=np.int64)
    )


@settings(max_examples=400, deadline=None)
@given(spans, spans)
def test_subtract_equals_the_loop(a, b):
    A, B = as_set(a), as_set(b)
    got, want = iv.subtract(A, B), loop_subtract(A, B)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert got[0].dtype == np.int64 and got[1].dtype == np.int64


def test_large_coordinates_near_the_int64_range():
    big = np.iinfo(np.int64).max // 2
    A = (np.array([big, big + 100], dtype=np.int64), np.array([big + 50, big + 200], dtype=np.int64))
    B = (np.array([big + 10, big + 150], dtype=np.int64), np.array([big + 20, big + 160], dtype=np.int64))
    got = iv.subtract(A, B)
    assert got[0].tolist() == [big, big + 20, big + 100, big + 160]
    assert got[1].tolist() == [big + 10, big + 50, big + 150, big + 200]
