"""Versioned router bundles on disk, and the ``ACTIVE`` pointer the gateway watches.

Layout of an artifact folder::

    <root>/ACTIVE                      the active version id (replaced atomically on publish)
    <root>/<version>/manifest.json     format, version, created, model names, embedder {model, template,
                                       id, dim}, metrics, sha256 of files, and ``router``: the published
                                       router's state (:class:`~regret_gateway.servable.PublishedRouter`:
                                       each tier by name with its lambda, candidate and policy -- of any
                                       kind, :mod:`regret_gateway.servable` --, the utility estimator, the
                                       budget ladders) with every array replaced by ``{"$array": name}``
    <root>/<version>/weights.npz       those arrays (numpy's ``.npz``, read with ``allow_pickle=False``)

The format is numpy and JSON only: the gateway reads a router without torch. A version folder is written
under a temporary name and renamed into place, so a reader never sees half of one. :func:`load_artifact`
verifies the checksum and the shapes and refuses (``ArtifactError``) a corrupted or incompatible bundle,
and an older format (1: torch weights; 2: tiers by lambda) with one line that says to retrain.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from regret_gateway.files import sha256_file
from regret_gateway.servable import PublishedRouter

FORMAT = 3
OLD_FORMATS = {1: "torch weights", 2: "tiers by lambda"}  # what each older format was: refused with one line
ACTIVE = "ACTIVE"
WEIGHTS = "weights.npz"
ARRAY = "$array"  # {"$array": name}: an array of weights.npz in the manifest's policy tree


class ArtifactError(ValueError):
    """A router bundle that cannot be used: missing, corrupted or incompatible."""


@dataclass(frozen=True)
class RouterArtifact:
    """A published router ready to serve: its tiers by name (:class:`~regret_gateway.servable.PublishedRouter`),
    the version that names it, the embedder it reads, retrain's report of it."""

    version: str
    router: PublishedRouter
    embedder: dict
    metrics: dict = field(default_factory=dict)
    created_at: str = ""

    @property
    def model_names(self) -> tuple[str, ...]:
        return self.router.model_names

    @property
    def tiers(self) -> dict[str, float]:
        """Each tier's name -> the lambda it was chosen for."""
        return {name: t.lam for name, t in self.router.tiers.items()}


def pack_state(state: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """A policy state (plain values and numpy arrays) -> (a JSON tree with each array replaced by
    ``{"$array": name}``, {name: array})."""
    arrays: dict[str, np.ndarray] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            name = f"a{len(arrays)}"
            arrays[name] = value
            return {ARRAY: name}
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        raise TypeError(f"a policy state holds plain values and numpy arrays, not {type(value).__name__}")

    return walk(state), arrays


def unpack_state(tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The inverse of :func:`pack_state` (``KeyError`` for a reference to an array that is not there)."""
    if isinstance(tree, dict):
        if set(tree) == {ARRAY}:
            return arrays[tree[ARRAY]]
        return {k: unpack_state(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [unpack_state(v, arrays) for v in tree]
    return tree


def new_version_id() -> str:
    return datetime.now(timezone.utc).strftime("v%Y%m%d-%H%M%S-") + os.urandom(3).hex()


def save_artifact(
    root: str | Path,
    *,
    router: PublishedRouter,
    embedder: dict,
    metrics: dict | None = None,
    version: str | None = None,
) -> Path:
    """Write a new version folder under ``root`` (not yet active). Returns its path."""
    if not isinstance(router, PublishedRouter):
        raise TypeError(f"an artifact publishes a PublishedRouter (tiers by name), not a {type(router).__name__}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    version = version or new_version_id()
    if not version_id_ok(version):
        raise ArtifactError(f"version {version[:80]!r} must be 1-{MAX_VERSION_CHARS} printable characters, no path separator")
    final = root / version
    if final.exists():
        raise ArtifactError(f"version {version} already exists in {root}")
    tree, arrays = pack_state(router.state())
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
    try:
        with open(tmp / WEIGHTS, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]
        manifest = {
            "format": FORMAT,
            "version": version,
            "created_at": datetime.now(timezone.utc).isoformat(),
            "model_names": list(router.model_names),
            "embedder": {**embedder, "dim": router.dim},
            "metrics": metrics or {},
            "files": {WEIGHTS: sha256_file(tmp / WEIGHTS)},
            "router": tree,
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, default=float))
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def activate(root: str | Path, version: str) -> None:
    """Point ``root/ACTIVE`` at ``version`` (atomic replace); the version must load."""
    root = Path(root)
    load_artifact(root / version)
    tmp = root / f".{ACTIVE}.{os.getpid()}"
    tmp.write_text(version + "\n")
    os.replace(tmp, root / ACTIVE)


def active_version_id(root: str | Path) -> str | None:
    """The version ``root/ACTIVE`` names (None: no ACTIVE yet). The pointer is read as text, not trusted:
    see :func:`version_folder` for what may be loaded from it."""
    try:
        return (Path(root) / ACTIVE).read_text().strip() or None
    except FileNotFoundError:
        return None


def version_folder(root: str | Path, version: str) -> Path:
    """The folder of ``version`` in the artifacts directory ``root``: a version id (no path separator, not
    ``.`` or ``..``) whose folder is a real directory directly inside ``root`` (not a link out of it).
    ArtifactError otherwise: an ``ACTIVE`` that names an absolute path, ``../..`` or a link elsewhere is
    refused, never loaded."""
    root = Path(root)
    if not version_id_ok(version) or version in (".", ".."):
        raise ArtifactError(f"{root / ACTIVE} names {version[:80]!r}, which is not a version id of {root}")
    folder = root / version
    if folder.is_symlink() or folder.resolve().parent != root.resolve():
        raise ArtifactError(f"{root / ACTIVE} names {version!r}, a link out of {root}: only its own version folders are served")
    return folder


def _check_manifest(path: Path, manifest: object) -> dict:
    """The manifest's shape, checked before anything in it is used (valid JSON of the wrong shape is refused)."""
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{path}: manifest.json must be an object, got {type(manifest).__name__}")
    if (old := OLD_FORMATS.get(manifest.get("format"))) is not None:  # type: ignore[arg-type]
        raise ArtifactError(f"{path}: a format-{manifest['format']} router ({old}), which this version no longer "
                            f"reads: run `regret-gateway retrain` to publish a format-{FORMAT} one")  # fmt: skip
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: artifact format {manifest.get('format')!r}, this gateway reads format {FORMAT}")
    shape = {"version": str, "model_names": list, "embedder": dict, "files": dict, "router": dict}
    wrong = [f"{key} ({kind.__name__})" for key, kind in shape.items() if not isinstance(manifest.get(key), kind)]
    if wrong:
        raise ArtifactError(f"{path}: manifest.json lacks or mistypes: {', '.join(wrong)}")
    if not all(isinstance(m, str) for m in manifest["model_names"]) or len(set(manifest["model_names"])) < 2:
        raise ArtifactError(f"{path}: manifest.json `model_names` must be at least 2 distinct names")
    version = manifest["version"]
    if version != path.name or not version_id_ok(version):
        raise ArtifactError(f"{path}: manifest.json `version` must be the folder's name, a printable id of <= "
                            f"{MAX_VERSION_CHARS} characters (every decision logs it), got {version[:80]!r}")  # fmt: skip
    return manifest


MAX_VERSION_CHARS = 64  # the store's router_version column


def version_id_ok(version: str) -> bool:
    """A version id the store and the ACTIVE pointer can hold: 1-64 printable characters, no path separator."""
    return (
        0 < len(version) <= MAX_VERSION_CHARS
        and version.isprintable()
        and not set(version) & {"/", "\\"}
        and version.strip() == version
    )


PROBE_ROWS = 8  # rows routed at load, for every tier at its lambda and the deployment's: finite scores on them


def _probe(path: Path, router: PublishedRouter, lams: set[float]) -> None:
    """Route a few probe rows (zeros, and unit-norm random rows like normalised embeddings) for every tier at
    its own lambda and at each of ``lams``, and refuse an artifact whose scores or utility estimates are not
    finite (NaN or inf weights behind a valid checksum): it would otherwise be served and fail every routed
    request."""
    dim = router.dim if router.dim is not None else 8
    X = np.random.default_rng(0).standard_normal((PROBE_ROWS, dim)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[0] = 0.0
    for name, served in router.tiers.items():
        for lam in sorted({served.lam, *lams}):
            try:
                logits, estimates = router.logits_and_utilities(name, X, lam)
            except Exception as exc:  # noqa: BLE001 - any failure here means an unusable bundle
                raise ArtifactError(f"{path}: routing a probe row of tier {name!r} at lambda {lam:g} fails "
                                    f"({type(exc).__name__}: {exc})") from None  # fmt: skip
            if logits.shape != (PROBE_ROWS, router.n_models) or not np.isfinite(logits).all():
                raise ArtifactError(f"{path}: tier {name!r}'s routing scores at lambda {lam:g} are not finite "
                                    "(NaN or inf in the weights?)")  # fmt: skip
            if estimates is not None and not np.isfinite(estimates).all():
                raise ArtifactError(f"{path}: utility estimates at lambda {lam:g} are not finite (NaN or inf in the weights?)")


def load_artifact(
    path: str | Path,
    *,
    models: tuple[str, ...] | None = None,
    embedder_model: str | None = None,
    embedding_dim: int | None = None,
    lams: tuple[float, ...] = (),
) -> RouterArtifact:
    """Load and check one version folder. ``models``: the models the deployment can call (every model of
    the artifact must be one of them); ``embedder_model`` and ``embedding_dim``: the embedding id the gateway
    logs (``EmbedderSpec.embedding_id``: model and context template) and the size of its embeddings (both
    must match); ``lams``: the deployment's tier lambdas, probed beside the manifest's (see :func:`_probe`)."""
    path = Path(path)
    try:
        manifest = _check_manifest(path, json.loads((path / "manifest.json").read_text()))
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no manifest.json (not a router artifact)") from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: manifest.json is not valid JSON ({exc})") from None
    weights = path / WEIGHTS
    if not weights.is_file():
        raise ArtifactError(f"{path}: {WEIGHTS} is missing")
    expected = manifest.get("files", {}).get(WEIGHTS)
    if expected != sha256_file(weights):
        raise ArtifactError(f"{path}: {WEIGHTS} checksum mismatch (corrupted or partially copied)")
    names = tuple(manifest["model_names"])
    if models is not None and (unknown := [m for m in names if m not in models]):
        raise ArtifactError(f"{path}: routes to models the gateway does not serve: {unknown} (configured: {list(models)})")
    trained_on = manifest["embedder"].get("id", manifest["embedder"].get("model"))
    if embedder_model is not None and trained_on != embedder_model:
        raise ArtifactError(f"{path}: trained on embeddings of {trained_on!r}, the gateway embeds with {embedder_model!r}")
    try:
        with np.load(weights, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        router = PublishedRouter.from_state(unpack_state(manifest["router"], arrays), names)
    except Exception as exc:  # noqa: BLE001 - any failure here means an unusable bundle
        raise ArtifactError(f"{path}: weights cannot be loaded ({type(exc).__name__}: {exc})") from None
    if router.dim != manifest["embedder"].get("dim"):
        raise ArtifactError(
            f"{path}: weights do not match the manifest (embedding size {router.dim} vs {manifest['embedder'].get('dim')})"
        )
    if embedding_dim is not None and router.dim is not None and router.dim != embedding_dim:
        raise ArtifactError(f"{path}: reads {router.dim}-d embeddings, the gateway's embedder gives {embedding_dim}-d")
    _probe(path, router, {0.0, *(float(v) for v in lams)})
    return RouterArtifact(
        version=manifest["version"],
        router=router,
        embedder=manifest["embedder"],
        metrics=manifest.get("metrics", {}),
        created_at=manifest.get("created_at", ""),
    )
