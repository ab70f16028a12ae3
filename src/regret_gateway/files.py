"""Checksums of the files a router or a published encoder is made of, and files written whole."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextmanager
def new_folder(folder: str | Path) -> Iterator[Path]:
    """A temporary sibling of ``folder`` to fill; renamed into place when the block ends (so no reader ever sees
    it half written), removed if the block raises."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        yield tmp
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextmanager
def new_file(path: str | Path) -> Iterator[Path]:
    """A file of this writer's own beside ``path`` to write; renamed onto it when the block ends, removed if the
    block raises: writers of the same file at once (replays side by side) each write whole and the last rename
    wins, and no reader sees a half-written or vanished file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(name)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def file_matches(folder: str | Path, name: str, expected: object) -> bool:
    """Whether ``folder/name`` is a regular file of the folder itself -- not a link, so nothing outside the
    folder is read in its place -- whose SHA-256 is ``expected``."""
    path = Path(folder) / name
    return not path.is_symlink() and path.is_file() and isinstance(expected, str) and sha256_file(path) == expected


def update_with_tree(h: "hashlib._Hash", root: str | Path) -> None:  # h: a hashlib hash
    """Feed every file of the folder ``root`` (its path in the folder and its bytes, in name order) to ``h``:
    what identifies a local model folder in the encoders' cache keys."""
    root = Path(root)
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
