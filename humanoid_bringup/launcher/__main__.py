"""``python -m humanoid_bringup.launcher``: the same as ``humanoid-launch``."""

import sys

from humanoid_bringup.launcher.cli import main

sys.exit(main())
