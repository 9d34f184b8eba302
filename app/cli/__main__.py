"""`python -m app.cli`: the command line alone (the window is `python -m app`)."""

import sys

from app.cli import main

sys.exit(main())
