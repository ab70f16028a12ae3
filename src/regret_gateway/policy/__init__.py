"""Routing policies: networks, objectives, the training loop, the method registry and tiers."""
