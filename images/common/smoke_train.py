#!/usr/bin/env python3
"""/opt/kerasenv/smoke_train.py, the images' default command: runs kerasenv_image.smoke.

The code lives in the package beside this file (images/common/kerasenv_image/smoke/);
this path stays so `docker run kerasenv:<id> python /opt/kerasenv/smoke_train.py ...`,
compose, Kubernetes and the docs keep working.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kerasenv_image.smoke.main import exit_now, main  # noqa: E402

if __name__ == "__main__":
    exit_now(main())
