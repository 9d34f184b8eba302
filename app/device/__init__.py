"""Tools > Validate on Device…: the document's model run on a board or QEMU, checked and timed."""
