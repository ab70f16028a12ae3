"""The registry of routers: name -> class, for the offline bench and the CLI."""

from __future__ import annotations

from regret_gateway.policy.cluster import RMCluster
from regret_gateway.policy.methods import (
    Baseline,
    CarrotEmbedNet,
    CarrotKNN,
    CFRegression,
    FullFeedbackPolicy,
    FullInfoRegression,
    FullInfoRegret,
    RandC,
    RMClassification,
    RMSoftmax,
)
from regret_gateway.policy.rm_interval import RMInterval
from regret_gateway.policy.router import Router

ROUTERS: dict[str, type[Router]] = {
    cls.name: cls
    for cls in (
        FullFeedbackPolicy,
        FullInfoRegret,
        FullInfoRegression,
        Baseline,
        RandC,
        CarrotKNN,
        CarrotEmbedNet,
        CFRegression,
        RMClassification,
        RMSoftmax,
        RMInterval,
        RMCluster,
    )
}


def method_names() -> list[str]:
    return list(ROUTERS)


def router_class(name: str) -> type[Router]:
    if name not in ROUTERS:
        raise ValueError(f"unknown method '{name}'; choose from {', '.join(ROUTERS)}")
    return ROUTERS[name]


def make_router(name: str, **kwargs) -> Router:
    """Instantiate a router by its registry name (``full-feedback``, ``rm-softmax``, ...)."""
    return router_class(name)(**kwargs)
