"""The registry of routers: name -> class, for the offline bench and the CLI. Each class is imported when it
is asked for, so listing the names (``bench offline --help``) imports no torch."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from regret_gateway.servable import CandidateKind

if TYPE_CHECKING:
    from regret_gateway.policy.router import Router

# name -> (module of regret_gateway.policy, class); each class's ``name`` is its key (a test checks)
ROUTERS: dict[str, tuple[str, str]] = {
    "full-feedback": ("methods", "FullFeedbackPolicy"),
    "full-info-regret": ("methods", "FullInfoRegret"),
    "full-info-regression": ("methods", "FullInfoRegression"),
    "baseline": ("methods", "Baseline"),
    CandidateKind.R_AND_C.value: ("methods", "RandC"),
    "carrot-knn": ("methods", "CarrotKNN"),
    "carrot-embednet": ("methods", "CarrotEmbedNet"),
    "cf-regression": ("methods", "CFRegression"),
    "rm-classification": ("methods", "RMClassification"),
    "rm-softmax": ("methods", "RMSoftmax"),
    CandidateKind.RM_INTERVAL.value: ("rm_interval", "RMInterval"),
    CandidateKind.RM_CLUSTER.value: ("cluster", "RMCluster"),
}


def method_names() -> list[str]:
    return list(ROUTERS)


def router_class(name: str) -> type[Router]:
    if name not in ROUTERS:
        raise ValueError(f"unknown method '{name}'; choose from {', '.join(ROUTERS)}")
    module, cls = ROUTERS[name]
    return getattr(import_module(f"regret_gateway.policy.{module}"), cls)


def make_router(name: str, **kwargs) -> Router:
    """Instantiate a router by its registry name (``full-feedback``, ``rm-softmax``, ...)."""
    return router_class(name)(**kwargs)
