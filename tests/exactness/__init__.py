"""Exactness over data no one chose: random calibrations and inputs, interpreter against code."""
