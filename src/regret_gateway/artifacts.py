"""Versioned router bundles on disk, and the ``ACTIVE`` pointer the gateway watches.

Layout of an artifact folder::

    <root>/ACTIVE                      the active version id (replaced atomically on publish)
    <root>/<version>/manifest.json     format, version, created, model names, tiers {name: lambda},
                                       embedder {model, template, id, dim}, metrics, sha256 of files, and
                                       ``policy``: the servable policy's state (:mod:`regret_gateway.servable`:
                                       its kind, e.g. RM-Interval's tier policies + interval nets) with every
                                       array replaced by ``{"$array": name}``
    <root>/<version>/weights.npz       those arrays (numpy's ``.npz``, read with ``allow_pickle=False``)

The format is numpy and JSON only: the gateway reads a router without torch. A version folder is written
under a temporary name and renamed into place, so a reader never sees half of one. :func:`load_artifact`
verifies the checksum and the shapes and refuses (``ArtifactError``) a corrupted or incompatible bundle,
and a format-1 bundle (torch weights, written before format 2) with one line that says to retrain.
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
from regret_gateway.servable import ServablePolicy, from_state

FORMAT = 2
ACTIVE = "ACTIVE"
WEIGHTS = "weights.npz"
ARRAY = "$array"  # {"$array": name}: an array of weights.npz in the manifest's policy tree


class ArtifactError(ValueError):
    """A router bundle that cannot be used: missing, corrupted or incompatible."""


@dataclass(frozen=True)
class RouterArtifact:
    """A published router ready to serve: ``logits(X, lam)`` gives (n, T) scores over ``model_names`` for
    any lambda >= 0 (how depends on the policy's kind, see :mod:`regret_gateway.servable`)."""

    version: str
    model_names: tuple[str, ...]
    tiers: dict[str, float]
    embedder: dict
    policy: ServablePolicy
    metrics: dict = field(default_factory=dict)
    created_at: str = ""

    def logits(self, X: np.ndarray, lam: float) -> np.ndarray:
        return self.policy.logits(X, lam)

    def utility_estimates(self, X: np.ndarray, lam: float) -> np.ndarray | None:
        return self.policy.utility_estimates(X, lam)

    def logits_and_utilities(self, X: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray | None]:
        return self.policy.logits_and_utilities(X, lam)


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
    policy: ServablePolicy,
    tiers: dict[str, float],
    embedder: dict,
    metrics: dict | None = None,
    version: str | None = None,
) -> Path:
    """Write a new version folder under ``root`` (not yet active). Returns its path."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    version = version or new_version_id()
    if not version_id_ok(version):
        raise ArtifactError(f"version {version[:80]!r} must be 1-{MAX_VERSION_CHARS} printable characters, no path separator")
    final = root / version
    if final.exists():
        raise ArtifactError(f"version {version} already exists in {root}")
    tree, arrays = pack_state(policy.state())
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=root))
    try:
        with open(tmp / WEIGHTS, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]
        manifest = {
            "format": FORMAT,
            "version": version,
            "created_at": datetime.now(timezone.utc).isoformat(),
            "model_names": list(policy.model_names),
            "kind": policy.kind,
            "tiers": {k: float(v) for k, v in tiers.items()},
            "embedder": {**embedder, "dim": policy.dim},
            "metrics": metrics or {},
            "files": {WEIGHTS: sha256_file(tmp / WEIGHTS)},
            "policy": tree,
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
    if manifest.get("format") == 1:
        raise ArtifactError(f"{path}: a format-1 router (torch weights), which this version no longer reads: "
                            f"run `regret-gateway retrain` to publish a format-{FORMAT} one")  # fmt: skip
    if manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: artifact format {manifest.get('format')!r}, this gateway reads format {FORMAT}")
    shape = {"version": str, "model_names": list, "tiers": dict, "embedder": dict, "files": dict, "policy": dict}
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


PROBE_ROWS = 8  # rows routed at load, at every tier's lambda: an artifact must give finite scores on them


def _probe(path: Path, policy: ServablePolicy, lams: set[float]) -> None:
    """Route a few probe rows (zeros, and unit-norm random rows like normalised embeddings) at each lambda and
    refuse an artifact whose scores or utility estimates are not finite (NaN or inf weights behind a valid
    checksum): it would otherwise be served and fail every routed request."""
    dim = policy.dim if policy.dim is not None else 8
    X = np.random.default_rng(0).standard_normal((PROBE_ROWS, dim)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[0] = 0.0
    for lam in sorted(lams):
        try:
            logits, estimates = policy.logits_and_utilities(X, lam)
        except Exception as exc:  # noqa: BLE001 - any failure here means an unusable bundle
            raise ArtifactError(f"{path}: routing a probe row at lambda {lam:g} fails ({type(exc).__name__}: {exc})") from None
        if logits.shape != (PROBE_ROWS, len(policy.model_names)) or not np.isfinite(logits).all():
            raise ArtifactError(f"{path}: routing scores at lambda {lam:g} are not finite (NaN or inf in the weights?)")
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
        policy = from_state(unpack_state(manifest.get("policy"), arrays), names)
    except Exception as exc:  # noqa: BLE001 - any failure here means an unusable bundle
        raise ArtifactError(f"{path}: weights cannot be loaded ({type(exc).__name__}: {exc})") from None
    if policy.dim != manifest["embedder"].get("dim"):
        raise ArtifactError(
            f"{path}: weights do not match the manifest (embedding size {policy.dim} vs {manifest['embedder'].get('dim')})"
        )
    if embedding_dim is not None and policy.dim is not None and policy.dim != embedding_dim:
        raise ArtifactError(f"{path}: reads {policy.dim}-d embeddings, the gateway's embedder gives {embedding_dim}-d")
    tier_lams = {float(v) for v in manifest["tiers"].values() if isinstance(v, (int, float)) and np.isfinite(v) and v >= 0}
    _probe(path, policy, {0.0, *tier_lams, *(float(v) for v in lams)})
    return RouterArtifact(
        version=manifest["version"],
        model_names=names,
        tiers=manifest["tiers"],
        embedder=manifest["embedder"],
        policy=policy,
        metrics=manifest.get("metrics", {}),
        created_at=manifest.get("created_at", ""),
    )
