"""TFLite import: .tflite flatbuffers as Kiln graphs, with TFLite Micro's integer arithmetic."""

from compiler.frontends.tflite.loader import load_tflite

__all__ = ["load_tflite"]
