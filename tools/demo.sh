#!/usr/bin/env bash
# Installs groundhog-port into the project's virtual environment .venv/ (created on the
# first run, see tools/venv.sh; TORCH_SPEC / TORCH_INDEX_URL choose torch), translates the
# bundled fixture's test set with beam 10 and checks the result against what the
# original sample.py wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/venv.sh
ensure_venv ""
mkdir -p out
F=fixtures/search
echo "[demo] groundhog-port translate --beam-search --beam-size 10 on $F/test.en"
groundhog-port translate --beam-search --beam-size 10 --state $F/search_state.pkl \
    --source $F/test.en --trans out/trans_beam10.txt $F/search_model.npz
cmp out/trans_beam10.txt $F/trans_beam10.txt \
    && echo "out/trans_beam10.txt is byte-identical to the original sample.py output"
