from gpufleet.cli import main
import sys

sys.exit(main())
