#!/usr/bin/env python
"""mdlm-explorer entry point: `python run.py` starts the explorer; `python run.py --help` lists commands."""
import sys

from explorer.cli import main

if __name__ == "__main__":
    sys.exit(main())
