"""Trained weights as float32 arrays and the numpy forward passes that serve them (no torch): the exact GELU,
stacked MLPs, RM-Interval's interval nets, and the nearest-centroid assignment of the clustered kinds."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

# erf by Abramowitz and Stegun 7.1.26 (absolute error <= 1.5e-7, float32's resolution): numpy has no erf.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


def gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU of torch's default, in float32: 0.5 x (1 + erf(x / sqrt 2)). In place on two
    temporaries (Horner's rule for the polynomial): half the time of the plain expression, the same bits."""
    z = np.abs(x)
    z *= np.float32(1 / np.sqrt(2))
    t = _ERF_P * z
    t += 1
    np.reciprocal(t, out=t)
    erf = t * _ERF_A[0]
    for a in _ERF_A[1:]:
        erf += a
        erf *= t
    np.multiply(z, z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    erf *= z
    np.subtract(1, erf, out=erf)
    np.copysign(erf, x, out=erf)
    erf += 1
    erf *= x
    erf *= np.float32(0.5)
    return erf


def _float32(value: Any) -> np.ndarray:
    """A trained parameter (a torch tensor, read without importing torch) or an array, as a float32 numpy
    array that owns its memory. A snapshot must not view the tensor's memory: what it serves would change
    with further training of the network, and torch moves a tensor's storage into shared memory when the
    network is sent to another process (``torch.multiprocessing``), after which a view reads freed memory."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.array(value, dtype=np.float32, order="C", copy=True)


class MLPArrays:
    """M stacked MLPs' weights as float32 arrays (``weights[i]`` (M, in, out), ``biases[i]`` (M, 1, out)),
    GELU between layers, and their forward pass in numpy: ``forward(X)`` -> (M, n, d_out) for X (n, d_in);
    ``forward(X, m)`` -> (n, d_out), member ``m`` alone. ``MLPArrays.of(net)`` snapshots a trained
    :class:`~regret_gateway.nn.networks.StackedMLP`."""

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any]) -> None:
        self.weights = [_float32(w) for w in weights]
        self.biases = [_float32(b) for b in biases]
        if not self.weights or len(self.weights) != len(self.biases):
            raise ValueError("an MLP needs one bias per weight matrix, and at least one layer")
        members = self.weights[0].shape[0]
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            fan_in = self.weights[i - 1].shape[2] if i else w.shape[1]
            if w.ndim != 3 or w.shape[0] != members or w.shape[1] != fan_in or b.shape != (members, 1, w.shape[2]):
                raise ValueError(f"layer {i}: weight {w.shape} / bias {b.shape} do not chain ({members} members)")

    @classmethod
    def of(cls, net: Any) -> "MLPArrays":
        return cls(list(net.weights), list(net.biases))

    @property
    def n_members(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def d_in(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def d_out(self) -> int:
        return int(self.weights[-1].shape[2])

    def state(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "biases": list(self.biases)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "MLPArrays":
        return cls(state["weights"], state["biases"])

    BLOCK = 2048  # rows per pass: a block's activations stay in the cache (a request batch is one block)

    def forward(self, X: np.ndarray, member: int | None = None) -> np.ndarray:
        """(M, n, d_out), or (n, d_out) for one ``member``. Past :attr:`BLOCK` rows, block by block: each
        layer's GELU (a dozen passes over the activations) then runs on what the cache holds -- on 50,000
        rows x 4 members, 1.7 times as fast as one pass over all of them. The products agree with one pass
        to float32's rounding, as they do between any two batch sizes."""
        if len(X) <= self.BLOCK:
            return self._forward(X, member)
        blocks = [self._forward(X[start : start + self.BLOCK], member) for start in range(0, len(X), self.BLOCK)]
        return np.concatenate(blocks, axis=-2)

    def _forward(self, X: np.ndarray, member: int | None) -> np.ndarray:
        h = X
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w + b if member is None else h @ w[member] + b[member]
            if i < last:
                h = gelu(h)
        return h


class IntervalArrays:
    """RM-Interval's K interval nets as float32 arrays: g(s) = GELU(s * g_weight + g_bias) (K, 1, 2T);
    out = (ends + g) @ out_weight (K, 2T, T) + out_bias (K, 1, T). ``IntervalArrays.of(nets)`` snapshots a
    trained :class:`~regret_gateway.nn.networks.IntervalNets`."""

    FIELDS = ("g_weight", "g_bias", "out_weight", "out_bias")

    def __init__(self, g_weight: Any, g_bias: Any, out_weight: Any, out_bias: Any) -> None:
        self.g_weight, self.g_bias = _float32(g_weight), _float32(g_bias)
        self.out_weight, self.out_bias = _float32(out_weight), _float32(out_bias)
        K, two_t, T = self.out_weight.shape
        if (self.g_weight.shape, self.g_bias.shape, self.out_bias.shape) != ((K, 1, two_t),) * 2 + ((K, 1, T),) or two_t != 2 * T:
            raise ValueError(f"interval arrays do not fit together: out_weight {self.out_weight.shape}, "
                             f"g {self.g_weight.shape}/{self.g_bias.shape}, out_bias {self.out_bias.shape}")  # fmt: skip

    @classmethod
    def of(cls, nets: Any) -> "IntervalArrays":
        return cls(*(getattr(nets, f) for f in cls.FIELDS))

    @property
    def n_intervals(self) -> int:
        return int(self.out_weight.shape[0])

    def state(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.FIELDS}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "IntervalArrays":
        return cls(*(state[f] for f in cls.FIELDS))

    def forward(self, ends: np.ndarray, s: float, j: int) -> np.ndarray:
        """Interval ``j``'s logits (n, T) at position ``s`` in [0, 1] from its ends' logits (n, 2T)."""
        g = gelu(np.float32(s) * self.g_weight[j] + self.g_bias[j])
        return (ends + g) @ self.out_weight[j] + self.out_bias[j]


def nearest_centroid(X: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """(n,) the index of each row's nearest of the unit ``centroids`` (K, d) by cosine similarity (a row's
    norm does not change its argmax): how RM-Cluster and the regional policy assign a request."""
    return np.argmax(X @ centroids.T, axis=1)


def unit_rows(Z: np.ndarray) -> np.ndarray:
    """Rows of ``Z`` scaled to unit length (zero rows stay zero)."""
    norm = np.linalg.norm(Z, axis=-1, keepdims=True)
    return Z / np.where(norm > 0, norm, 1.0)
