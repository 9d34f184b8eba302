"""ONNX import and export."""

from compiler.frontends.onnx.export import save_onnx, to_onnx
from compiler.frontends.onnx.loader import SUPPORTED_OPSETS, load_onnx

__all__ = ["SUPPORTED_OPSETS", "load_onnx", "save_onnx", "to_onnx"]
