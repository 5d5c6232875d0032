"""`python -m cs336_basics.cli ...` runs `bpe ...`."""

import sys

from cs336_basics.cli import main

sys.exit(main())
