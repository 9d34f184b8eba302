"""Model file readers (ONNX now, TFLite later) that build a Kiln graph."""
