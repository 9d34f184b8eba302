"""Kiln's typed graph IR."""

from compiler.ir.graph import Constant, Graph, Node, Placeholder, Value
from compiler.ir.types import QuantParams, TensorType

__all__ = ["Constant", "Graph", "Node", "Placeholder", "QuantParams", "TensorType", "Value"]
