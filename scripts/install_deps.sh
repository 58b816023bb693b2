#!/usr/bin/env bash
# Installs the Debian packages pcgx builds against, skipping those already present.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libeigen3-dev libtbb-dev libz3-dev
          nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev ccache
          openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pcgx: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
