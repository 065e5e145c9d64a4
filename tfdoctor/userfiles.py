"""The one place that reads and writes the user's source files.

- Read with the file's declared encoding (PEP 263 cookie or BOM, as ``tokenize.detect_encoding``
  finds it), so a latin-1 script with ``# -*- coding: latin-1 -*-`` reads as Python reads it.
- Keep line endings: a file whose lines all end the same way (``\\r\\n``, ``\\n`` or ``\\r``) is
  handed out with ``\\n`` and written back with its own ending; a file with mixed endings is handed
  out untranslated and written back as given. Untouched lines stay byte-identical either way.
- ``Source.sha256`` hashes the bytes on disk, so "did the file change since we read it" compares
  bytes with bytes (never bytes with newline-translated text).
- Write atomically: a temporary file in the same folder, fsync, ``os.replace``, fsync of the folder.
  On any failure (full disk, quota, a vanished folder) the original stays byte-identical.
- Backups are created with ``O_CREAT|O_EXCL|O_NOFOLLOW``: never through a link, never over a file.
- ``check_writable`` probes the folder and the file before a long fix loop, so ``--apply`` in a
  folder the user cannot write fails in one line at the start, not after every fix was measured.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path

from tfdoctor.errors import TfdoctorError

#: suffix of the backup ``--apply`` leaves beside the script (``train.py.tfdoctor-bak``, ``.1``...)
BACKUP_SUFFIX = ".tfdoctor-bak"
#: backup names tried before giving up (``.tfdoctor-bak``, ``.tfdoctor-bak.1`` ... ``.N``)
MAX_BACKUPS = 1000
#: copy buffer for backups
_CHUNK = 1 << 20


class UserFileError(TfdoctorError):
    """A user's file could not be read or written; the message says what happened to the original."""


@dataclass(frozen=True)
class Source:
    """A source file as read from disk.

    ``text`` is what a codemod edits (``\\n`` line endings unless ``newline`` is ``""``, which
    means the file mixes endings and ``text`` keeps them as they are); ``encoding`` is the codec
    Python would use for it (``utf-8-sig`` when it starts with a BOM); ``sha256`` is the hash of the
    bytes on disk.
    """

    path: Path
    text: str
    encoding: str
    newline: str
    sha256: str

    @property
    def raw_bytes_hash(self) -> str:
        return self.sha256

    def to_disk(self, text: str) -> str:
        """``text`` (as a codemod returns it) with this file's line endings restored."""
        if self.newline in ("", "\n"):
            return text
        return text.replace("\r\n", "\n").replace("\n", self.newline)

    def encode(self, text: str) -> bytes:
        """The bytes ``write_source`` would write for ``text``; ``UserFileError`` if the encoding can't hold it."""
        disk = self.to_disk(text)
        try:
            return disk.encode(self.encoding)
        except UnicodeEncodeError as e:
            bad = disk[e.start : e.end]
            raise UserFileError(
                f"{self.path}: the new source has {bad!r}, which the file's encoding {self.encoding} "
                "cannot hold; not written"
            ) from None

    def unchanged_on_disk(self) -> bool:
        """True when the file still holds exactly the bytes it held when it was read."""
        try:
            return sha256_of(self.path) == self.sha256
        except OSError:
            return False


def sha256_of(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _newline_of(text: str) -> str:
    """The one ending all lines use (``\\r\\n``, ``\\n``, ``\\r``); ``""`` when mixed; ``\\n`` when none."""
    crlf = text.count("\r\n")
    cr = text.count("\r") - crlf
    lf = text.count("\n") - crlf
    kinds = [(n, nl) for n, nl in ((crlf, "\r\n"), (lf, "\n"), (cr, "\r")) if n]
    if not kinds:
        return "\n"
    if len(kinds) > 1:
        return ""
    return kinds[0][1]


def decode_source(raw: bytes, path: Path | str = "<source>") -> tuple[str, str, str]:
    """``(text, encoding, newline)`` for a source file's bytes, decoded as Python would."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise UserFileError(f"{path}: cannot decode the source ({e})") from None
    if encoding == "utf-8-sig" and text.startswith("\ufeff"):
        text = text[1:]  # the codec strips it; belt and braces for odd inputs
    newline = _newline_of(text)
    if newline not in ("", "\n"):
        text = text.replace(newline, "\n")
    return text, encoding, newline


def read_source(path: Path | str) -> Source:
    """Read a Python source file with its declared encoding, keeping track of its line endings."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserFileError(f"{p}: cannot read ({e.strerror or e})") from None
    text, encoding, newline = decode_source(raw, p)
    return Source(
        path=p, text=text, encoding=encoding, newline=newline, sha256=hashlib.sha256(raw).hexdigest()
    )


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a folder; the data itself was fsynced
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` atomically; the original is untouched on failure.

    A symlinked ``path`` is resolved first, so the file the link points at is replaced and the link
    stays a link. The new file keeps the old one's permission bits. Raises ``OSError``.
    """
    target = os.path.realpath(path)
    folder = os.path.dirname(target) or "."
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o644
    base = os.path.basename(target)
    tmp = ""
    fd = -1
    for i in range(100):
        tmp = os.path.join(folder, f".{base}.tfdoctor-tmp.{os.getpid()}.{i}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            break
        except FileExistsError:
            continue
    if fd < 0:
        raise FileExistsError(errno.EEXIST, "no free temporary name", tmp)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(folder)


def write_source(path: Path | str, text: str, like: Source) -> None:
    """Write ``text`` to ``path`` in ``like``'s encoding and line endings, atomically.

    Raises ``UserFileError`` (one line: the original is unchanged) when it cannot be written.
    """
    data = like.encode(text)
    try:
        atomic_write_bytes(path, data)
    except OSError as e:
        raise UserFileError(f"{path}: not written ({e.strerror or e}); the file is unchanged") from None


def backup_candidates(script: Path) -> list[Path]:
    return [script.with_name(script.name + BACKUP_SUFFIX)] + [
        script.with_name(f"{script.name}{BACKUP_SUFFIX}.{n}") for n in range(1, MAX_BACKUPS)
    ]


def make_backup(script: Path | str) -> Path:
    """Copy ``script`` to the first free ``SCRIPT.tfdoctor-bak[.N]``; returns the backup's path.

    The backup is created with ``O_CREAT|O_EXCL|O_NOFOLLOW``: a name that exists in any form (a
    file, a folder, a link, a dangling link) is skipped, never written through or over. The copy is
    fsynced; a partial backup (full disk) is removed and ``UserFileError`` raised.
    """
    src = Path(script)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        mode = stat.S_IMODE(os.stat(src).st_mode)
        with open(src, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UserFileError(f"{src}: cannot read it to back it up ({e.strerror or e}); not applied") from None
    for bak in backup_candidates(src):
        try:
            fd = os.open(bak, flags, mode & 0o777)
        except FileExistsError:
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:  # O_NOFOLLOW on a link: taken
                continue
            raise UserFileError(
                f"{bak}: cannot create the backup ({e.strerror or e}); {src} not changed"
            ) from None
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            try:
                os.unlink(bak)
            except OSError:
                pass
            raise UserFileError(
                f"{bak}: cannot write the backup ({e.strerror or e}); {src} not changed"
            ) from None
        _fsync_dir(str(bak.parent))
        return bak
    raise UserFileError(f"{src}: {MAX_BACKUPS} backups already exist beside it; remove some")


def check_writable(script: Path | str) -> None:
    """Fail now, in one line, if ``--apply`` could not replace ``script`` and leave a backup beside it.

    Probes by creating (and removing) a file in the script's folder, which is what the atomic write
    and the backup need; ``os.access`` alone is wrong for root and for read-only mounts. A script
    the user may not write (mode) is refused too, though replacing it would succeed: its owner said
    read-only.
    """
    p = Path(script)
    target = Path(os.path.realpath(p))
    for folder in {target.parent, p.parent}:
        probe = folder / f".tfdoctor-probe.{os.getpid()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        except OSError as e:
            raise UserFileError(
                f"--apply needs to write in {folder} ({e.strerror or e}); no fix was measured. "
                "Run without --apply to get fix.patch, or make the folder writable",
                exit_code=2,
            ) from None
        os.close(fd)
        try:
            os.unlink(probe)
        except OSError:
            pass
    if not os.access(target, os.W_OK):
        raise UserFileError(
            f"--apply needs to write {target}, which is read-only; no fix was measured. "
            "Run without --apply to get fix.patch, or make the file writable",
            exit_code=2,
        )
