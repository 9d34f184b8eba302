"""The standalone build's entry point: the same `kiln` command the wheel installs."""

import sys

from app.main import main

if __name__ == "__main__":
    sys.exit(main())
