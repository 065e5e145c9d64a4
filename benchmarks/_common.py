"""Shared helpers for the benchmark scripts: the cache dir, robust statistics, versions, process
memory, and regenerating one section of docs/benchmarks.md without touching the others.

Each script owns one section, delimited by ``<!-- bench:NAME -->`` … ``<!-- /bench:NAME -->``;
``update_section(NAME, markdown)`` replaces only that block (appending it when it is missing), so
scripts can run alone or from ``run_all.sh`` in any order.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TFDOCTOR_BENCH_CACHE") or ROOT / "benchmarks" / "cache")
DOC = ROOT / "docs" / "benchmarks.md"

DOC_HEADER = """# Benchmarks

How fast tfdoctor is, and how much it speeds training scripts up. Every figure is produced by a
script in `benchmarks/` (`make bench` runs them all; `make bench-quick` only checks that each one
executes). Each script rewrites only its own section below, between its `bench:` markers.

Machines are noisy (this one is shared: two cores, other jobs running): every figure is a
**median of repeated windows**, and every comparison is a **ratio measured side by side in one
run** (A/B interleaved), never one absolute time against a number from another day.
"""


def versions(when: str | None = None) -> str:
    """One line: the date (now, or ``when`` for figures re-rendered later) and the versions."""
    parts = [f"Python {platform.python_version()}"]
    for dist in ("tensorflow-cpu", "tensorflow", "keras", "xprof", "protobuf", "numpy", "tfdoctor"):
        try:
            v = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist == "tensorflow" and "tensorflow-cpu" in " ".join(parts):
            continue
        parts.append(f"{dist} {v}")
    cpu = _cpu_model()
    when = when or now_utc()
    return f"Measured {when} on {cpu} ({os.cpu_count()} cores), " + ", ".join(parts) + "."


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def spread(xs: Sequence[float]) -> float:
    """(max - min) / median: the noise band of repeated windows."""
    m = median(xs)
    return (max(xs) - min(xs)) / m if xs and m else float("nan")


def rss_kib() -> tuple[int, int]:
    """(current RSS, peak RSS) of this process in KiB, from /proc/self/status (Linux)."""
    cur = peak = 0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return cur, peak


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


#: the line a section's hand-written reading starts with (kept when a script rewrites the section)
READING = "**Reading it**"


def section_reading(name: str, until: str, doc: Path = DOC) -> str | None:
    """The hand-written "Reading it" paragraph of the ``bench:name`` block of ``doc``: from its
    ``**Reading it**`` line to the first line starting with ``until`` (or the block's end), so that a
    script rewriting the block keeps it. None: no such block or paragraph."""
    if not doc.exists():
        return None
    m = re.search(rf"<!-- bench:{name} -->(.*?)<!-- /bench:{name} -->", doc.read_text("utf-8"), re.S)
    if not m:
        return None
    body = m.group(1)
    start = body.find("\n" + READING)
    if start < 0:
        return None
    end = body.find("\n" + until, start)
    return body[start : end if end >= 0 else len(body)].strip() or None


def update_section(name: str, body: str, doc: Path = DOC, after: str | None = None) -> Path:
    """Replace the ``bench:name`` block of docs/benchmarks.md with ``body``. When missing, the block is
    created right after the ``bench:after`` block (when given and present), else at the end."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = doc.read_text(encoding="utf-8") if doc.exists() else DOC_HEADER
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    anchor = f"<!-- /bench:{after} -->" if after else None
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    elif anchor and anchor in text:
        text = text.replace(anchor, anchor + "\n\n" + block, 1)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    tmp = doc.with_name(f".{doc.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, doc)
    return doc


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def say(*parts: object) -> None:
    print(*parts, flush=True)
    sys.stdout.flush()
