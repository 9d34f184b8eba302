"""Tools > Tune…: kernel schedules searched by `kiln tune` run as a child process."""
