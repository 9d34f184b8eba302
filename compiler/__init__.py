"""Kiln's compiler: a pure library (no Qt) from model file to bundle."""
