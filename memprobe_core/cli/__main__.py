"""``python -m memprobe_core.cli``: the ``memprobe`` command."""

import sys

from memprobe_core.cli.main import main

sys.exit(main())
