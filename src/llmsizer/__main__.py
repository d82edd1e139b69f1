"""``python -m llmsizer ...`` runs the command line (the same entry point as the ``llmsizer`` script)."""

import sys

from .cli.main import main

sys.exit(main())
