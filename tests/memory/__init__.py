"""Tests of scheduling, the low-level IR and memory planning."""
