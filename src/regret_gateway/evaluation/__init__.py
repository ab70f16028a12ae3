"""Offline evaluation: benchmark loaders, simulated logs, the offline experiment and its report."""
