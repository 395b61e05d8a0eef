#!/usr/bin/env bash
# Prepares a Debian 12 controller for gpufleet: the apt tools the simulated cluster needs (as root)
# and the Python virtual environment with the pinned toolchain. Safe to run again: it only adds
# what is missing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# debootstrap/systemd-nspawn/sshd/iptables build and run the simulated nodes; gnupg, dpkg-dev and
# apt-utils build and sign the local package repository they install from.
apt_packages=(openssh-server openssh-client debootstrap systemd-container iptables iproute2
              gnupg dpkg-dev apt-utils ca-certificates procps util-linux)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing apt packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not root (or no apt): skipping apt packages; the simulated cluster needs root" >&2
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "setup: $python is not Python 3.11 (ansible-core 2.19 and the on-disk torch wheel need 3.11); set PYTHON=" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
# The CPU torch wheel lies in /opt/wheels on this kind of machine; elsewhere pip fetches it.
find_links=()
[ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)
stamp=.venv/.gpufleet-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check "${find_links[@]}" -e '.[test,smoke]'
  touch "$stamp"
fi
echo "setup: ready (venv: $repo/.venv)"
