"""The ``floodwall`` console script: the command of the C library (fw_cli_run), run in this process.

Its code is the native one every language ships (``floodwall --help``); this module only hands it the
command line and writes what it says. The store comes from ``--store`` or ``FLOODWALL_STORE``.
"""

import os
import sys
from typing import List, Optional

from . import _floodwall


def main(argv: Optional[List[str]] = None) -> int:
    """Runs ``floodwall`` with ``argv`` (default: ``sys.argv[1:]``) and returns its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    code, out, err = _floodwall.cli_run(["floodwall"] + [os.fsdecode(a) for a in args])
    sys.stdout.flush()
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(err)
    sys.stderr.buffer.flush()
    return code


def _script() -> None:
    sys.exit(main())


if __name__ == "__main__":
    _script()
