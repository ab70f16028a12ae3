"""An unfitted copy of a nuisance model with another seed, the one way: cross-fitting fits one model per
fold, each from the same settings and its own seed (:class:`Reseedable`)."""

from __future__ import annotations

import inspect
from typing import TypeVar

M = TypeVar("M", bound="Reseedable")


class Reseedable:
    """A model whose constructor's keyword arguments are kept as attributes of the same names (as
    scikit-learn's estimators keep theirs): :meth:`with_seed` rebuilds it from them, so a new setting is
    copied without a hand-written list to keep up to date."""

    def with_seed(self: M, random_state: int) -> M:
        """An unfitted copy with every constructor setting of this one and ``random_state``."""
        names = [n for n in inspect.signature(type(self).__init__).parameters if n != "self"]
        missing = [n for n in names if not hasattr(self, n)]
        if missing:
            raise TypeError(f"{type(self).__name__} keeps no attribute for its settings {missing}: it cannot be copied")
        return type(self)(**{n: getattr(self, n) for n in names} | {"random_state": random_state})
