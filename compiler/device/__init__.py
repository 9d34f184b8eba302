"""The device in the loop: the runner firmware, the serial link, validation on the board."""
