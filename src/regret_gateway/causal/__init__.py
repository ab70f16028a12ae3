"""Nuisance stage of the causal router: propensity, outcome models and counterfactual scores."""
