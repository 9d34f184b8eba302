"""Plants of the recovery journal, restored sessions, the unsaved-changes question and sessions."""

from __future__ import annotations

from plants import Plant

JOURNAL = "tests/gui/test_recovery_journal.py"
PROMPTS = "tests/gui/test_unsaved_prompts.py"

PLANTS = (
    Plant("recovery-journal-every-30-s", "app/document/recovery.py",
          "JOURNAL_MS = 400  #", "JOURNAL_MS = 30_000  #",
          (f"{JOURNAL}::test_a_range_dragged_two_seconds_before_a_kill_comes_back",),
          "a range dragged seconds before a crash is lost: the journal waits 30 s"),
    Plant("recovery-journal-by-undo-index", "app/document/recovery.py",
          "        if self._changes == self._written and self.path.is_file():\n"
          "            return None  # nothing new since the last write\n"
          "        return self._changes\n",
          "        index = self.window.document.undo_stack.index()\n"
          "        if index == self._written and self.path.is_file():\n"
          "            return None  # nothing new since the last write\n"
          "        return index\n",
          (f"{JOURNAL}::test_each_kind_of_change_is_on_disk_within_a_second",),
          "Ctrl+Z then a new range comes back to an undo index written: never journaled"),
    Plant("recovery-restored-mark-leaks-to-the-next-model", "app/document/document.py",
          "        self.undo_stack.setClean()\n        self.path = Path(path)",
          "        self.path = Path(path)",
          (f"{JOURNAL}::test_a_restored_session_leaves_the_next_two_models_unmodified",),
          "after a restored session every model opened is titled modified, Undo greyed"),
    Plant("recovery-recovered-ranges-not-unsaved", "app/document/sessions.py",
          "            document.mark_unsaved(graph_edited=edited)",
          "            if edited:\n                document.mark_unsaved(graph_edited=edited)",
          (f"{JOURNAL}::test_a_recovered_range_alone_is_unsaved_work_on_an_unedited_model",),
          "recovered ranges on an unedited model look saved: close drops them unasked"),
    Plant("recovery-restore-drops-the-crash-file-first", "app/document/recovery.py",
          "        if self._claimed is not None:\n            self.autosave()\n",
          "",
          (f"{JOURNAL}::test_a_recovered_range_alone_is_unsaved_work_on_an_unedited_model",),
          "between a restore and the next journal write no recovery file is on disk"),
    Plant("prompt-default-save-on-an-unedited-file", "views/dialogs.py",
          '"and leaves the model file as it is.", QMessageBox.StandardButton.Cancel)',
          '"and leaves the model file as it is.", QMessageBox.StandardButton.Save)',
          (f"{PROMPTS}::test_enter_on_the_question_never_rewrites_a_model_nobody_edited",),
          "Enter on the question rewrites a third-party model nobody edited"),
    Plant("prompt-save-rewrites-an-unedited-model", "app/window/mainwindow.py",
          "return self.save() if edited else self.sessions.save_dialog()",
          "return self.save()",
          (f"{PROMPTS}::test_save_on_ranges_alone_writes_a_session_and_leaves_the_model",),
          "Save on ranges alone rewrites the model file, which holds none of them"),
    Plant("session-copies-an-unedited-graph", "app/document/sessions.py",
          "edited = model is None or doc.graph_edited()",
          "edited = model is None or doc.is_dirty()",
          (f"{PROMPTS}::test_a_session_of_an_unedited_graph_names_the_model_instead_of_"
           "copying_it",),
          "Save Session writes a copy of an unedited graph because a range changed"),
    Plant("session-forgets-io-in-arena", "app/document/sessions.py",
          '"io_in_arena": doc.io_in_arena,', '"io_in_arena": False,',
          (f"{PROMPTS}::test_a_session_keeps_inputs_and_outputs_in_the_arena",),
          "a session forgets that inputs and outputs live in the arena"),
    Plant("session-never-sets-io-in-arena", "app/document/sessions.py",
          '        document.set_io_in_arena(bool(doc.get("io_in_arena")))\n', "",
          (f"{PROMPTS}::test_a_session_keeps_inputs_and_outputs_in_the_arena",),
          "opening a session keeps the window's arena choice instead of the session's"),
    Plant("session-dialog-starts-in-the-model-folder", "app/document/sessions.py",
          "start = folders.start_folder(\"session\") / f\"{model.stem if model else 'model'}",
          "start = (model.parent if model else folders.start_folder(\"session\")) / "
          "f\"{model.stem if model else 'model'}",
          (f"{PROMPTS}::test_writing_dialogs_start_in_a_writable_folder_then_the_last_one",),
          "Save Session starts in the model's folder, often read-only"),
    Plant("walkthrough-forgets-the-last-folder", "app/export/walkthrough.py",
          '        folders.remember("walkthrough", chosen)\n', "",
          (f"{PROMPTS}::test_writing_dialogs_start_in_a_writable_folder_then_the_last_one",),
          "the walkthrough dialog never starts where the last walkthrough went"),
    Plant("quant-dock-keeps-the-filter", "views/quant_panel.py",
          "        self.filter.clear()  # its tensor names", "        # its tensor names",
          (f"{PROMPTS}::test_another_model_opens_with_the_quantization_docks_filter_and_"
           "method_reset",),
          "another model opens with the last one's filter text hiding its tensors"),
    Plant("quant-dock-says-not-calibrated-while-restoring", "app/quant/controller.py",
          "self.panel.status.setText(text or NOT_CALIBRATED)",
          "self.panel.status.setText(NOT_CALIBRATED)",
          (f"{PROMPTS}::test_the_dock_says_a_sessions_calibration_is_coming_not_that_there_is_"
           "none",),
          "the dock says Not calibrated while a session's profile is being restored"),
)
