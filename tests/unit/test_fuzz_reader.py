"""Hostile input for the trace reader: truncated, bit-flipped and random bytes, malformed JSON.

The reader must either return a Trace or raise TraceError with one line: never another exception,
never a hang. The analysis must survive whatever the reader accepts.
"""

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfdoctor.analysis import analyze
from tfdoctor.errors import TraceError
from tfdoctor.trace import parse_chrome, parse_xspace

ROOT = Path(__file__).resolve().parents[2]
# seeds: small real xplanes recorded on TF 2.21 (Keras profile_batch profiles, in the repository)
_SEED_FILES = [
    next((ROOT / "sample_traces" / n).rglob("*.xplane.pb")) for n in ("keras-dense", "keras-conv2d")
]
SEEDS = [p.read_bytes() for p in _SEED_FILES]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read_or_reject(data: bytes):
    try:
        tr = parse_xspace(data, "fuzz")
    except TraceError as e:
        assert "\n" not in str(e)
        return None
    analyze(tr)  # whatever is accepted must be analysable
    return tr


@FUZZ
@given(st.data())
def test_truncated_xplane(data):
    seed = data.draw(st.sampled_from(SEEDS))
    cut = data.draw(st.integers(0, len(seed) - 1))
    _read_or_reject(seed[:cut])


@FUZZ
@given(st.data())
def test_bit_flipped_xplane(data):
    seed = bytearray(data.draw(st.sampled_from(SEEDS)))
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(seed) - 1))
        seed[i] ^= 1 << data.draw(st.integers(0, 7))
    _read_or_reject(bytes(seed))


@FUZZ
@given(st.binary(max_size=4096))
def test_random_bytes(blob):
    _read_or_reject(blob)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
    max_leaves=20,
)
event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "B", "E", "M", "i", "C", 3, None]),
        "pid": json_values,
        "tid": json_values,
        "ts": json_values,
        "dur": json_values,
        "name": json_values,
        "args": json_values,
    },
)


@FUZZ
@given(st.lists(event, max_size=30), st.booleans())
def test_malformed_chrome_json(events, wrap):
    doc = {"traceEvents": events} if wrap else events
    raw = json.dumps(doc).encode()
    try:
        tr = parse_chrome(raw, "fuzz.json")
    except TraceError:
        return
    analyze(tr)


def test_gzip_garbage_is_rejected(tmp_path):
    from tfdoctor.trace import read_chrome

    f = tmp_path / "x.trace.json.gz"
    f.write_bytes(gzip.compress(b'{"traceEvents": [')[:-4])
    with pytest.raises(TraceError):
        read_chrome(f)
