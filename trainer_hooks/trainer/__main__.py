"""``python -m trainer_hooks.trainer``: the bundled trainer (see :mod:`trainer_hooks.trainer.run`)."""
import sys

from trainer_hooks.trainer.run import main

sys.exit(main())
