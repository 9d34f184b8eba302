"""The main window's feature panels, installed in this order; each module owns its panel.

A feature module exposes `install(window)`, which adds its docks, actions and signal
connections and returns its controller, and `screenshots(window, save)`, which renders its
panels for `kiln --screenshot`.
"""

from __future__ import annotations

from app.compare import controller as compare
from app.device import controller as device
from app.document import recovery, sessions
from app.explore import controller as explore
from app.export import controller as export
from app.export import picture as picture_export
from app.export import report as report_export
from app.export import walkthrough as walkthrough_export
from app.inspect import activations as activation_panel
from app.inspect import code as code_panel
from app.inspect import lessons, overlays, stepping
from app.inspect import lowering as lowering_stages
from app.inspect import memory as memory_panel
from app.quant import screens as quant_screens
from app.tune import controller as tune
from app.window import grouping

# (window attribute, module)
FEATURES = (("grouping", grouping), ("stepping", stepping), ("lowering", lowering_stages),
            ("lessons", lessons),
            ("memory", memory_panel),
            ("code", code_panel), ("export", export), ("quant", quant_screens),
            ("sessions", sessions), ("recovery", recovery), ("overlays", overlays),
            ("compare", compare), ("activations", activation_panel),
            ("picture", picture_export), ("report", report_export),
            ("walkthrough", walkthrough_export),
            ("explore", explore), ("device", device), ("tune", tune))


def install_all(window) -> None:
    """Install every feature and keep its controller as `window.<attribute>`."""
    for attribute, module in FEATURES:
        setattr(window, attribute, module.install(window))


def screenshot_all(window, save) -> None:
    """Let every feature render its panels."""
    for _, module in FEATURES:
        module.screenshots(window, save)
