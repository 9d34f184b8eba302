"""Model file readers (ONNX and TFLite) that build a Kiln graph."""
