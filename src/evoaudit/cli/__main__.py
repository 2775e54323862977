"""``python -m evoaudit.cli``."""

import sys

from evoaudit.cli import main

sys.exit(main())
