"""`python -m eidos`: the same as the `eidos` command."""

import sys

from eidos.cli import main

sys.exit(main())
