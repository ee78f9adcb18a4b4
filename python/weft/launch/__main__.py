import sys

from weft.launch.cli import main

sys.exit(main())
