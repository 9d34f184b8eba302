"""The Compare window: two graphs side by side, with their metrics."""
