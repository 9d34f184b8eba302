"""Plants in deployment: the Cortex-M firmware folder and what keeping a tensor float costs."""

from __future__ import annotations

from plants import Plant

FOLDER = "compiler/mcu/firmware_folder.py"
JOURNEY = "tests/journeys/test_cortex_m_export.py"
FOLDER_TESTS = "tests/codegen/test_firmware_folder.py"
COST = "compiler/quant/float_cost.py"
COST_TESTS = "tests/quant/test_float_cost.py"
DOCK_TESTS = "tests/gui/test_quant_float_cost.py"

PLANTS = (
    Plant("deploy-main-copies-half-the-input", FOLDER,
          'lines += [f"    memcpy({_REGIONS[tensor.region]} + {macro}_OFFSET, next, '
          '{macro}_BYTES);"',
          'lines += [f"    memcpy({_REGIONS[tensor.region]} + {macro}_OFFSET, next, '
          '{macro}_BYTES / 2);"',
          (JOURNEY,),
          "the firmware runs on half the input and leaves the rest of it as it was"),
    Plant("deploy-makefile-without-the-cpu", FOLDER,
          "f\"CFLAGS = {' '.join(firmware.gcc_flags(board))}\"",
          "f\"CFLAGS = {' '.join(firmware.gcc_flags(board)[1:])}\"",
          (JOURNEY,),
          "the Makefile compiles main.c for GCC's default core, not the board's"),
    Plant("deploy-wrong-emulated-board", FOLDER,
          "return next((b for b in MACHINES.values() if b.target == target), None)",
          "return next((b for b in MACHINES.values() if b.target != target), None)",
          (FOLDER_TESTS,),
          "the firmware is linked for a board of another core"),
    Plant("deploy-input-all-zeros", FOLDER,
          "values = ((i * 7) % 17).astype(np.float32) / np.float32(17) - np.float32(0.5)",
          "values = np.zeros(len(i), np.float32)",
          (FOLDER_TESTS,),
          "the folder's input is zeros, which shows little of what the network does"),
    Plant("deploy-users-readme-replaced", "compiler/driver.py",
          "theirs = [name for name in survey(folder).others if name in FILES]",
          "theirs = []",
          (FOLDER_TESTS,),
          "an export replaces the README of the user's firmware project"),
    Plant("deploy-build-line-without-firmware", "app/export/controller.py",
          'firmware_board(opts, request.board) if "Makefile" in written',
          'None if "Makefile" in written',
          (JOURNEY,),
          "the dialog's Build line names a main.c and linker script the folder does not hold"),
    Plant("deploy-float-macs-of-integer-nodes", COST,
          'if node.outputs and node.outputs[0].type.dtype == "float32")',
          'if node.outputs and node.outputs[0].type.dtype != "float32")',
          (COST_TESTS,),
          "the integer layers' MACs are counted as float work"),
    Plant("deploy-cost-keeps-the-tensor-on-both-sides", COST,
          "without = recipe.but(profile=replace(recipe.profile, keep_float=others),",
          "without = recipe.but(profile=recipe.profile,",
          (COST_TESTS,),
          "a tensor the recipe keeps float costs nothing, since both models keep it"),
    Plant("deploy-cost-arena-is-the-mutable-region", COST,
          "return Footprint(net.plan.arena.size, flash, ram, floating,",
          "return Footprint(net.plan.mutable, flash, ram, floating,",
          (COST_TESTS,),
          "the arena figure is the inputs' and outputs' region"),
    Plant("deploy-dock-cost-ignores-the-target", "app/quant/float_cost.py",
          "return (tensor, id(s.graph), choices, options)",
          "return (tensor, id(s.graph), choices)",
          (DOCK_TESTS,),
          "after another target is chosen the dock shows the last target's cost"),
    Plant("deploy-cost-names-the-layers-float-anyway", COST,
          "return tuple(n for n in self.kept.float_layers if n not in self.quantized.float_layers)",
          "return tuple(n for n in self.kept.float_layers if n in self.quantized.float_layers)",
          (COST_TESTS,),
          "the dock names the layers float without the tensor, not the ones it leaves float"),
    Plant("deploy-float-cost-instructions-swapped", "compiler/quant/float_cost.py",
          "options)) for r in _both(recipe, tensor))",
          "options)) for r in reversed(_both(recipe, tensor)))",
          ("tests/quant/test_float_cost.py",),
          "keeping a tensor float reports the instructions of the two models the wrong way round"),
    Plant("deploy-float-cost-never-counted", "app/quant/float_cost.py",
          "counted = cost.target in emulated_targets()", "counted = False",
          ("tests/gui/test_quant_float_cost.py",),
          "the dock never counts what keeping a tensor float costs in instructions"),
)
