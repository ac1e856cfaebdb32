#!/usr/bin/env bash
# Installs every Debian package gpool needs to build, test and run. Idempotent: when
# everything is already installed it only runs `dpkg-query` once and returns in well under a
# second. Needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang-format lld
  libboost1.74-dev libssl-dev nlohmann-json3-dev libsqlite3-dev sqlite3
  libpq-dev libpqxx-dev postgresql libtomlplusplus-dev libcli11-dev
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  procps tmux util-linux openssl curl pamtester zsh nftables iproute2 prometheus
  clang-14 libclang-rt-14-dev
  chromium chromium-driver
  podman runc busybox-static
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
