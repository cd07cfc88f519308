#!/usr/bin/env bash
# Make sure Debian's headless-capable Chromium is installed; print the path of its binary.
#
#   scripts/setup-chromium.sh          # installs the `chromium` package with apt-get if missing (needs root)
#
# Used by tests/project/test_html_reports.py to open the HTML feedback pages the
# way a person would. Progress goes to stderr; stdout is only the binary's path.
set -euo pipefail

find_chromium() {
    for name in chromium chromium-browser; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"
            return 0
        fi
    done
    return 1
}

if ! find_chromium >/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "setup-chromium: chromium is not installed and installing it needs root (apt-get install chromium)" >&2
        exit 1
    fi
    echo "setup-chromium: installing chromium with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
fi

find_chromium
