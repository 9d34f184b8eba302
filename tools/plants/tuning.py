"""Plants in kernel tuning: the schedule knobs, the search, the log and its application."""

from __future__ import annotations

from plants import Plant

SCHEDULES = "tests/tuning/test_schedules.py"
CLI = "tests/tuning/test_tune_cli.py"

PLANTS = (
    Plant("tuning-border-taps-skip-bounds", "compiler/codegen/window.py",
          "                    with inside(k, iw, width, checked):\n                        body(",
          "                    with inside(k, iw, width, False):\n                        body(",
          (SCHEDULES,), "unrolled border taps lose their column bounds test: wrong sums"),
    Plant("tuning-block-weights-not-arranged", "compiler/codegen/qconv_dot.py",
          '    block = channel_block(node, prepared_knob("block", BLOCK))',
          "    block = BLOCK", (SCHEDULES,),
          "a channel block of 8 reads weights arranged in blocks of 4"),
    Plant("tuning-knob-ignored", "compiler/codegen/schedules.py",
          "    knobs = clean(schedules.get(key), family, target)",
          "    knobs = {}", (SCHEDULES, CLI),
          "a tuning log's schedules are read and never applied"),
    Plant("tuning-best-is-worst", "compiler/tuning/log.py",
          "        if known is None or entry.per_layer < known.per_layer:",
          "        if known is None or entry.per_layer > known.per_layer:", (CLI,),
          "compile --tuning applies the slowest measured schedule"),
    Plant("tuning-resume-measures-again", "compiler/tuning/search.py",
          "            if schedule in self.costs:\n                self.study.tell(",
          "            if False:\n                self.study.tell(", (CLI,),
          "a resumed tuning run measures schedules the log already has"),
    Plant("tuning-build-file-drops-schedules", "compiler/driver.py",
          "                   if o.schedules or o.tuning_log else {})}",
          "                   if False else {})}", (CLI,),
          "a tuned bundle's build file rebuilds the untuned network"),
)
