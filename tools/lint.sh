#!/usr/bin/env bash
# ruff lint + format, the import-linter layers and the mypy type check (pyproject.toml), as CI
# runs them
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/venv.sh
ensure_venv test
ruff check .
ruff format --check .
lint-imports
# types: every package, strictly the ones [tool.mypy] lists (~1 min without .mypy_cache/)
mypy
