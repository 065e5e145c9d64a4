import sys

from tfdoctor.cli import main

sys.exit(main())
