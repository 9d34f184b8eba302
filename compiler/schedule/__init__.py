"""Scheduling: a topological order of the final graph that minimizes peak live memory."""

from compiler.schedule.model import VIEW_OPS, MemoryModel, is_view
from compiler.schedule.order import Schedule, schedule

__all__ = ["MemoryModel", "Schedule", "VIEW_OPS", "is_view", "schedule"]
