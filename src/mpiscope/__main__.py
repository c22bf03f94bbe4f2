import sys

from mpiscope.cli import main

sys.exit(main())
