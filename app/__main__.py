"""`python -m app`: `kiln` itself (a command, or the window when none is named)."""

import sys

from app.main import main

sys.exit(main())
