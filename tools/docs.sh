#!/usr/bin/env bash
# Builds the documentation site into site/ with warnings as errors (`bash tools/docs.sh`), or
# serves it at http://127.0.0.1:8000/ while you edit (`bash tools/docs.sh serve`).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/venv.sh
ensure_venv docs
export NO_MKDOCS_2_WARNING=1
if [ "${1:-build}" = serve ]; then
    exec mkdocs serve
fi
mkdocs build --strict
echo "[docs] site/index.html"
