"""The Kiln application: command line today, main window later."""
