#!/usr/bin/env bash
# ruff lint + format and the import-linter layers (pyproject.toml), as CI runs them
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/venv.sh
ensure_venv test
ruff check .
ruff format --check .
lint-imports
