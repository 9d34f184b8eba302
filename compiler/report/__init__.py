"""A self-contained analysis report of one model on one target: its figures, then one HTML file."""

from compiler.report.figures import Layer, Quantization, Report, collect_report
from compiler.report.html import render_html

__all__ = ["Layer", "Quantization", "Report", "collect_report", "render_html"]
