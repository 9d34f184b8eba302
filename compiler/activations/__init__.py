"""One sample's activations: every value of a graph on one input, and its int8 counterpart.

`sample` runs a sample and describes one value (statistics, histogram, heat maps); `layout`
finds each value's channel axis; `pairs` matches the quantized model's int8 tensors to the
float values. It runs the quantizer and the driver, so it sits above them.
"""
