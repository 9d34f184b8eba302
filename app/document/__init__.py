"""The document (graph, pipeline, options), its edits as undo commands, sessions and recovery."""
