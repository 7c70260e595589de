"""`python -m kerasenv_image.bench`: the bench (kerasenv_image.bench says what it measures)."""

import sys

from .main import main

sys.exit(main())
