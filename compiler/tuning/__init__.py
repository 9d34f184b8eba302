"""Kernel tuning: schedules measured on the target, kept in a log, applied at compile time."""
