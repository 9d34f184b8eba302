"""GUI tests of the views run offscreen: set the platform before anything imports Qt."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
