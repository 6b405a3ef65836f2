"""Snapshots as files under a directory (the embedded default; the format:
``service.durability.store``).

``<dir>/<model>/<version:012d>.snap`` is written to a temporary file, fsynced and renamed,
then the pointer ``<dir>/<model>/LATEST`` replaced the same way: a crash leaves either the
old or the new snapshot, never half of one. ``LATEST`` names the newest version written,
whatever order concurrent saves finish in. A deletion's tombstone is a file under
``<dir>/.tombstones``.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from service.durability.store import (
    PREFIX,
    SnapshotError,
    SnapshotMeta,
    header_length,
    read_header,
)


class LocalStore:
    """Snapshots as files under a directory (atomic rename; see the module docstring)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        #: moves LATEST and prunes, one save at a time (the worker's and a route's snapshot
        #: of one model may be written at once, and finish in either order)
        self._commit = threading.Lock()

    def _dir(self, model: str) -> Path:
        return self.directory / model

    def save(
        self,
        model: str,
        version: int,
        blob: bytes | memoryview,
        retention: int,
        incarnation: str | None = None,
        create: bool = False,
        fence: str | None = None,
        rate: float | None = None,
    ) -> None:
        """Write a snapshot (``incarnation`` and ``fence`` are not checked: one process owns a local
        store, and its models' lifecycle keeps writes out of deleted models; ``rate`` is
        ``RedisStore``'s, a file is written at once)."""
        folder = self._dir(model)
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / f"{version:012d}.snap", blob)
        with self._commit:  # LATEST never goes back to an older version (as in Redis)
            numbers = sorted(int(path.stem) for path in folder.glob("*.snap"))
            if version == numbers[-1]:
                _atomic_write(folder / "LATEST", str(version).encode())
            for old in numbers[:-retention]:
                (folder / f"{old:012d}.snap").unlink(missing_ok=True)

    def load(self, model: str, version: int | None = None) -> bytes:
        folder = self._dir(model)
        if version is None:
            try:
                version = int((folder / "LATEST").read_text())
            except FileNotFoundError:
                raise SnapshotError(f"no snapshot of {model!r}") from None
        try:
            return (folder / f"{version:012d}.snap").read_bytes()
        except FileNotFoundError:
            raise SnapshotError(f"no snapshot {version} of {model!r}") from None

    def versions(self, model: str) -> list[SnapshotMeta]:
        metas = []
        for path in sorted(self._dir(model).glob("*.snap")):
            try:
                with open(path, "rb") as handle:
                    prefix = handle.read(PREFIX)
                    header = read_header(prefix + handle.read(header_length(prefix)))
                    size = os.fstat(handle.fileno()).st_size
            except FileNotFoundError:  # pruned by a save meanwhile
                continue
            metas.append(SnapshotMeta(model, int(path.stem), header["created_at"], size))
        return metas

    def models(self) -> list[str]:
        if not self.directory.exists():
            return []
        deleting = set(self.deleting())  # (read once: a start lists every model)
        return sorted(
            p.name
            for p in self.directory.iterdir()
            if p.name not in deleting and (p / "LATEST").exists()
        )

    def incarnation(self, model: str) -> str | None:
        return None

    def delete(self, model: str) -> None:
        shutil.rmtree(self._dir(model), ignore_errors=True)
        if self._dir(model).exists():
            raise SnapshotError(f"could not delete the snapshots of {model!r}")

    @property
    def _tombstones(self) -> Path:
        return self.directory / ".tombstones"  # (model names cannot start with a dot)

    def mark_deleting(self, model: str) -> None:
        self._tombstones.mkdir(parents=True, exist_ok=True)
        _atomic_write(self._tombstones / model, b"")

    def deleting(self) -> list[str]:
        if not self._tombstones.exists():
            return []
        return sorted(p.name for p in self._tombstones.iterdir() if not p.name.startswith("."))

    def clear_deleting(self, model: str) -> None:
        (self._tombstones / model).unlink(missing_ok=True)

    def ping(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK):
            raise SnapshotError(f"{self.directory} is not writable")

    def close(self) -> None:
        pass


#: a snapshot file is written and flushed to disk this many bytes at a time
SYNC_CHUNK = 8 << 20


def _atomic_write(path: Path, data: bytes | memoryview) -> None:
    """Write ``data`` to ``path`` atomically and durably.

    The data goes to disk a chunk at a time (``fdatasync`` after each ``SYNC_CHUNK``), never
    as one large flush: on a journaling file system (ext4's ordered mode), an fsync of any
    other file, such as the feedback log's before each acknowledgement, waits for the dirty
    data before it, and a whole large snapshot pending there stalled feedback for hundreds
    of milliseconds. The last chunk goes with the file's ``fsync`` (one flush, not two: a
    small file, such as a new model's first snapshot or ``LATEST``, costs one)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    view = memoryview(data).cast("B")
    with open(temporary, "wb", buffering=0) as handle:
        for start in range(0, len(view), SYNC_CHUNK):
            chunk = view[start : start + SYNC_CHUNK]
            while chunk:
                chunk = chunk[handle.write(chunk) :]
            if start + SYNC_CHUNK < len(view):
                os.fdatasync(handle.fileno())
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
