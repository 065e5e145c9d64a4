"""Opening trace files safely: regular files only, bounded reads, bounded decompression.

A FIFO, a device or a socket named ``*.xplane.pb`` would block a plain ``open().read()`` forever (in a
stored run, one web worker per request). Files are opened with ``O_NONBLOCK`` and checked with ``fstat``
before anything is read; only regular files are read.
"""

from __future__ import annotations

import os
import stat
import zlib
from typing import BinaryIO

from tfdoctor.errors import TraceError

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
}


def is_regular(path: str | os.PathLike[str]) -> bool:
    """The path is a regular file (links followed); never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def open_regular(path: str) -> tuple[BinaryIO, int]:
    """Open ``path`` for reading if it is a regular file: (file, size). Anything else is a TraceError."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise TraceError(f"{path}: is {kind}, not a trace file: only regular files are read")
        # back to blocking reads for a regular file (O_NONBLOCK has no effect on them anyway)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, max_bytes: int) -> bytes:
    """The whole of a regular file of at most ``max_bytes``."""
    f, size = open_regular(path)
    with f:
        if size > max_bytes:
            raise TraceError(
                f"{path}: {size / 1024**2:.0f} MiB is over the {max_bytes / 1024**2:.0f} MiB limit"
            )
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise TraceError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > max_bytes:
        raise TraceError(f"{path}: over the {max_bytes / 1024**2:.0f} MiB limit")
    return data


#: bytes inflated per call (the output grows in pieces of this size)
_STEP = 8 << 20


def inflate(path: str, raw: bytes, max_out: int) -> bytearray:
    """Decompress gzip ``raw`` incrementally, refusing to produce more than ``max_out`` bytes (a small
    file that inflates to gigabytes is stopped at the limit, not after)."""
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    out = bytearray()
    pos, chunk = 0, 1 << 20
    try:
        while True:
            buf = d.unconsumed_tail or raw[pos : pos + chunk]
            if not d.unconsumed_tail:
                pos += len(buf)
            if not buf and not d.unconsumed_tail:
                break
            out += d.decompress(buf, min(_STEP, max_out + 1 - len(out)))  # bounded pieces: no 2x peak
            if len(out) > max_out:
                raise TraceError(
                    f"{path}: inflates to over {max_out / 1024**2:.0f} MiB of JSON (from "
                    f"{len(raw) / 1024**2:.1f} MiB): refused (a real trace of that size: profile fewer steps)"
                )
            if d.eof:
                rest = d.unused_data
                if rest.strip(b"\0"):  # a second gzip member: continue with it
                    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                    raw, pos = rest, 0
                    continue
                break
        out += d.flush()
    except zlib.error as e:
        raise TraceError(f"{path}: cannot read (corrupt gzip: {e})") from None
    if not d.eof:
        raise TraceError(f"{path}: cannot read (truncated gzip)")
    return out  # not copied to bytes: json reads a bytearray, and the copy would double the peak
