import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tfdoctor.analysis import intervals as iv


def _brute(pairs, lo=0, hi=256):
    cov = np.zeros(hi - lo, dtype=bool)
    for s, e in pairs:
        cov[max(s, lo) - lo : max(min(e, hi), lo) - lo] = True
    return cov


pairs_st = st.lists(
    st.tuples(st.integers(0, 190), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1])), max_size=25
)


@given(pairs_st)
def test_union_is_sorted_disjoint_and_covers_the_same_points(pairs):
    s, e = iv.union(
        np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)
    )
    assert np.all(e > s)
    assert np.all(s[1:] > e[:-1])
    assert iv.measure((s, e)) == _brute(pairs).sum()


@given(pairs_st, pairs_st)
def test_subtract_and_intersect_match_pointwise_sets(a, b):
    A = iv.union(np.array([p[0] for p in a], dtype=np.int64), np.array([p[1] for p in a], dtype=np.int64))
    B = iv.union(np.array([p[0] for p in b], dtype=np.int64), np.array([p[1] for p in b], dtype=np.int64))
    ca, cb = _brute(a), _brute(b)
    assert iv.measure(iv.subtract(A, B)) == (ca & ~cb).sum()
    assert iv.measure(iv.intersect(A, B)) == (ca & cb).sum()


@given(pairs_st, st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200)), min_size=1, max_size=6))
def test_per_window_matches_clip(pairs, windows):
    A = iv.union(
        np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)
    )
    lo = np.array([min(w) for w in windows], dtype=np.int64)
    hi = np.array([max(w) for w in windows], dtype=np.int64)
    got = iv.per_window(A, lo, hi)
    want = [iv.measure(iv.clip(A, int(a), int(b))) for a, b in zip(lo, hi, strict=True)]
    assert got.tolist() == want
