"""Qt widgets that draw compiler data; they never import the app."""
