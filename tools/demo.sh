#!/usr/bin/env bash
# Installs the package (CPU torch) and translates the bundled fixture's test set with
# beam 10, then checks the result against what the original sample.py wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check "torch==2.13.0" -e .
mkdir -p out
F=fixtures/search
groundhog-port translate --beam-search --beam-size 10 --state $F/search_state.pkl \
    --source $F/test.en --trans out/trans_beam10.txt $F/search_model.npz
cmp out/trans_beam10.txt $F/trans_beam10.txt \
    && echo "out/trans_beam10.txt is byte-identical to the original sample.py output"
