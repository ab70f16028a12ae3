"""Benchmarks and the closed-loop demo: local servers, the mock upstream, timing runs. The top layer: it may
import every other package, and nothing imports it."""
