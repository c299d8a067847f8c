from __future__ import annotations

import sys

from kernodeck.cli import main

sys.exit(main())
