"""Checksums of the files a router or a published encoder is made of."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_matches(folder: str | Path, name: str, expected: object) -> bool:
    """Whether ``folder/name`` is a regular file of the folder itself -- not a link, so nothing outside the
    folder is read in its place -- whose SHA-256 is ``expected``."""
    path = Path(folder) / name
    return not path.is_symlink() and path.is_file() and isinstance(expected, str) and sha256_file(path) == expected
