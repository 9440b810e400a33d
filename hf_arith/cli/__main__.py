"""`python -m hf_arith.cli`: the `hf-arith` command."""

import sys

from . import main

sys.exit(main())
