"""Routing policies: the paper's routers (one interface, a registry), RM-Interval tiers and the composed learner."""
