"""Command-line entry point; the stage runner lands with the pipelines work."""

import sys


def main(argv=None) -> int:
    print("gpufleet: no command implemented yet", file=sys.stderr)
    return 2
