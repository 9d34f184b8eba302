"""Plants for Explore from its defaults: accuracy control, the front, keys, the form, progress."""

from __future__ import annotations

from plants import Plant

RULES = "tests/explore/test_control_rules.py"
FRONT = "tests/explore/test_front_and_keys.py"
KWS = ("tests/explore/test_defaults_journey.py::"
       "test_kws_explores_from_its_defaults_and_a_click_applies")

PLANTS = (
    Plant("control-ranking-reversed", "compiler/explore/accuracy_control.py",
          "return sorted(tried, key=lambda t: gains[t], reverse=True)",
          "return sorted(tried, key=lambda t: gains[t], reverse=False)",
          (RULES,),
          "accuracy control reverts the tensor that gives back least first"),
    Plant("control-drop-at-bound-infeasible", "compiler/explore/accuracy_control.py",
          "return float_score - score <= max_drop + 1e-12",
          "return float_score - score < max_drop",
          (RULES,),
          "a point losing exactly the bound (or 1.0 - 0.98 in binary) is called infeasible"),
    Plant("front-ignores-ram", "compiler/explore/front.py",
          "return (-m.score, m.instructions, m.flash, m.ram)",
          "return (-m.score, m.instructions, m.flash)",
          (FRONT,),
          "RAM dropped from the Pareto front's dominance: a point lighter in RAM falls off"),
    Plant("key-ignores-a-field", "compiler/explore/config.py",
          'text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))',
          'text = json.dumps({k: v for k, v in self.to_json().items() if k != "io_in_arena"},'
          ' sort_keys=True, separators=(",", ":"))',
          (FRONT,),
          "a resumed run reads back another configuration's figures for I/O in the arena"),
    Plant("coarse-warning-threshold-doubled", "compiler/explore/problem.py",
          "if samples <= 0 or 1 / samples <= max_drop + 1e-12:",
          "if samples <= 0 or 1 / samples <= 2 * max_drop:",
          (RULES,),
          "72 samples against a 1-point bound (1.39 points a sample) go unwarned"),
    Plant("control-progress-silent", "compiler/explore/engine.py",
          "cancelled=self.cancelled, progress=heard)",
          "cancelled=self.cancelled, progress=None)",
          (KWS,),
          "accuracy control says nothing for minutes: no candidates measured, no score"),
    Plant("form-takes-the-sample-digits", "app/explore/sources.py",
          "return request.data, request.evaluate or request.data",
          'return "digits:train", "digits:test"',
          (KWS,),
          "Explore's form holds the sample model's digits on every model"),
    Plant("warnings-not-shown", "app/explore/controller.py",
          'p.set_warnings(progress["warnings"])', "pass",
          (KWS,),
          "the coarse-evaluation warning reaches the panel only after the run"),
    Plant("warning-label-hidden", "views/explore_panel.py",
          "self.warning.setVisible(bool(warnings))", "self.warning.setVisible(False)",
          (KWS,),
          "the coarse-evaluation warning is never shown"),
    Plant("row-click-only-picks", "app/explore/controller.py",
          "        if number is not None:\n            self.apply(number)",
          "        if number is not None:\n            self.chosen = number",
          (KWS,),
          "a click on a row of the front selects its point but does not apply it"),
    Plant("ray-keeps-its-sigterm", "compiler/explore/executors.py",
          "signal.signal(signal.SIGTERM, stop)",
          "signal.getsignal(signal.SIGTERM)",
          (KWS,),
          "Cancel on a local Ray instance ends as a failure instead of stopping with the trials"),
)
