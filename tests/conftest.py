"""Shared fixtures: the third-party models folder (skip without it, fail under CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MODELS = ROOT.parent / "shared" / "models"
SAMPLE_MODEL = ROOT / "resources" / "models" / "digits_cnn.onnx"


def shared_models() -> Path:
    """The shared models folder; skips the test when absent, fails instead under CI."""
    if not (SHARED_MODELS / "onnx").is_dir():
        message = "third-party models folder ../shared/models (beside the project) not found"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + "; CI must have it")
        pytest.skip(message)
    return SHARED_MODELS


@pytest.fixture
def models_dir() -> Path:
    """Fixture form of shared_models()."""
    return shared_models()
