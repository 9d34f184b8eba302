"""The GUI journeys keep their autosaves, explorations and settings in temporary folders too."""

from tests.gui.conftest import recovery_home, settings_dir  # noqa: F401 - autouse fixtures
