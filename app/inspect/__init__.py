"""The panels that show one graph's parts: activations, code, memory, overlays, passes, lessons."""
