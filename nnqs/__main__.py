"""``python -m nnqs`` is the ``nnqs`` command."""

import sys

from nnqs.app.cli import main

sys.exit(main())
