"""The main window, its menus and docks, and what every feature shares: workers and settings."""
