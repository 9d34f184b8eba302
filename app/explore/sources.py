"""Which samples the Explore form starts from: the document's own, and what each field is for.

A user opening Explore on their model should be able to press Start: the form takes the data
the document was calibrated with (never the sample model's digits on another model, nor
another model's remembered files), and says in one sentence what is missing or weak.
"""

from __future__ import annotations

from compiler.explore.problem import EVALUATION_PURPOSE

SAMPLE = "digits_cnn.onnx"  # the bundled model: its digits are built in


def document_sources(document) -> tuple[str, str]:
    """(calibration, evaluation) from the document's calibration, or ("", "").

    The evaluation samples it was calibrated with, else the calibration samples themselves;
    the bundled sample without a calibration has its digits.
    """
    session = document.quant.current()
    request = session.request if session is not None else None
    if request is not None and request.data:
        return request.data, request.evaluate or request.data
    if document.path is not None and document.path.name == SAMPLE:
        return "digits:train", "digits:test"
    return "", ""


def hint(data: str, evaluation: str) -> str:
    """The line under the form: what is missing, or what the evaluation samples are for."""
    if not data:
        return ("Calibrate the model first (Quantize > Calibrate…) or name its samples: "
                "Explore starts from the document's calibration data.")
    if evaluation == data:
        return ("Evaluation: the calibration samples (the document has no others). They are "
                f"{EVALUATION_PURPOSE}; held-out samples measure the drop more fairly.")
    return f"Evaluation: {EVALUATION_PURPOSE}."


def missing_data(calibration: str, evaluation: str) -> str:
    """Why the form cannot start (an empty data field), or ""."""
    if not calibration.strip():
        return ("Calibration is empty: calibrate the model (Quantize > Calibrate…) or name "
                "the samples each tensor's range is measured on.")
    if not evaluation.strip():
        return f"Evaluation is empty: it needs {EVALUATION_PURPOSE}."
    return ""
