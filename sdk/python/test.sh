#!/usr/bin/env bash
# The Python SDK's tests, against a real `clearance serve`: the binary named by
# CLEARANCE_BIN, or one built from this repository with `go build`.
set -euo pipefail
cd "$(dirname "$0")"

python3 - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"the Python SDK needs Python 3.11 or later, not {sys.version.split()[0]}")
try:
    import cryptography  # noqa: F401
except ImportError:
    sys.exit("the Python SDK needs the cryptography package (Debian: python3-cryptography)")
PY

exec python3 -m unittest discover --start-directory tests --top-level-directory . "$@"
