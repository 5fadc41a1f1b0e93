"""``python -m msdoctor`` is ``msdoctor``."""
import sys

from msdoctor.cli import main

sys.exit(main())
