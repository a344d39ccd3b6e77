"""python -m loom.plan: the loom-plan command."""
import sys

from .cli import main

sys.exit(main())
