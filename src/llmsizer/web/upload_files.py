"""The uploaded model-file headers that every worker process of one ``llmsizer serve`` shares: one file per header
in a private folder the parent process created for this run (``tempfile.mkdtemp``: mode 0700, removed when the
server stops), so an id one worker returned can be used on any other.

A file's name is the hex SHA-256 the server computed over the upload (checked against ``HEX`` before any path is
built: no path ever comes from a request). Its content is one line of JSON (kind, file name label, file size) and
then the header bytes as sent. Writes go to a temporary name first and are renamed (atomic on POSIX), so a reader
never sees half a header. Bounded like the in-memory store: at most ``keep`` headers and ``keep_bytes`` bytes,
the least recently used dropped first (a read refreshes the file's modification time).
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

HEX = re.compile(r"^[0-9a-f]{64}$")
SUFFIX = ".header"


@dataclass(frozen=True)
class StoredHeader:
    kind: str
    name: str
    size: int
    data: bytes


class HeaderFiles:
    """``put`` / ``get`` of raw uploaded headers by their hex digest in ``folder`` (which must exist)."""

    def __init__(self, folder: str | Path, keep: int, keep_bytes: int) -> None:
        self.folder, self.keep, self.keep_bytes = Path(folder), keep, keep_bytes

    def _path(self, digest: str) -> Path:
        if not HEX.match(digest):
            raise ValueError("not a SHA-256 hex digest")
        return self.folder / f"{digest}{SUFFIX}"

    def put(self, digest: str, header: StoredHeader) -> None:
        meta = json.dumps({"kind": header.kind, "name": header.name, "size": header.size}).encode()
        final = self._path(digest)
        tmp = self.folder / f".{digest}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(meta + b"\n" + header.data)
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        self._evict()

    def get(self, digest: str) -> StoredHeader | None:
        path = self._path(digest)
        try:
            raw = path.read_bytes()
            os.utime(path)  # most recently used
        except FileNotFoundError:  # never stored, or dropped by another worker
            return None
        line, _, data = raw.partition(b"\n")
        meta = json.loads(line)
        return StoredHeader(str(meta["kind"]), str(meta["name"]), int(meta["size"]), data)

    def _evict(self) -> None:
        """Drop the least recently used headers past ``keep`` files or ``keep_bytes`` bytes (the newest always
        stays). Two workers evicting at once may both drop a file: a missing file is a forgotten id."""
        entries = []
        for p in self.folder.glob(f"*{SUFFIX}"):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            entries.append((st.st_mtime_ns, st.st_size, p))
        entries.sort(reverse=True)
        total = 0
        for i, (_, size, p) in enumerate(entries):
            total += size
            if i > 0 and (i >= self.keep or total > self.keep_bytes):
                p.unlink(missing_ok=True)
