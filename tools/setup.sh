#!/usr/bin/env bash
# Prepares a controller for gpufleet: a Python virtual environment (.venv) with the controller's
# dependencies (ansible-core, ansible-runner), on Python 3.10-3.13. Safe to run again: it only adds
# what is missing.
#
#   tools/setup.sh            the controller only (what a production controller needs)
#   tools/setup.sh --test     also the test tools (pytest, ansible-lint, molecule, torch CPU) and, as
#                             root, the apt packages the simulated cluster needs (tools/test.sh uses this)
#   tools/setup.sh --check    only check the Python interpreter and say what would be installed
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
mode="controller"
case "${1:-}" in
  --test) mode="test" ;;
  --check) mode="check" ;;
  "") ;;
  *) echo "setup: unknown option $1 (use --test, --check or nothing)" >&2; exit 2 ;;
esac

# The interpreter: $PYTHON, else the first of python3, python3.13 ... python3.10 that is 3.10-3.13.
python_ok() { "$1" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 13)))' 2>/dev/null; }
if [ -n "${PYTHON:-}" ]; then
  python=$PYTHON
  python_ok "$python" || { echo "setup: PYTHON=$python is not Python 3.10-3.13 (the controller's range)" >&2; exit 2; }
else
  python=
  for candidate in python3 python3.13 python3.12 python3.11 python3.10; do
    if command -v "$candidate" >/dev/null && python_ok "$candidate"; then python=$candidate; break; fi
  done
  [ -n "$python" ] || { echo "setup: no Python 3.10-3.13 found; install one or set PYTHON=" >&2; exit 2; }
fi
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# The CPU torch wheel on this kind of machine's disk (/opt/wheels) is built for CPython 3.11 only.
if [ "$mode" = test ] && ls /opt/wheels/torch-*-cp311-* >/dev/null 2>&1 && [ "$version" != 3.11 ]; then
  echo "setup: --test needs Python 3.11 here (the torch wheel in /opt/wheels is cp311); set PYTHON=python3.11" >&2
  exit 2
fi
extras=.
[ "$mode" = test ] && extras='.[test,smoke]'
if [ "$mode" = check ]; then
  echo "setup: Python $version ($python) is fine for the controller; would install -e $extras into .venv"
  exit 0
fi

# debootstrap/systemd-nspawn/sshd/iptables build and run the simulated nodes; gnupg, dpkg-dev and
# apt-utils build and sign the local package repository they install from.
apt_packages=(openssh-server openssh-client debootstrap systemd-container iptables iproute2
              gnupg dpkg-dev apt-utils ca-certificates procps util-linux)
if [ "$mode" != test ]; then
  :  # a production controller needs no apt packages from us
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
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

[ -x .venv/bin/python ] || "$python" -m venv .venv
# The CPU torch wheel lies in /opt/wheels on this kind of machine; elsewhere pip fetches it.
find_links=()
[ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)
stamp=.venv/.gpufleet-installed-$mode
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check "${find_links[@]}" -e "$extras"
  touch "$stamp"
fi
echo "setup: ready ($mode; Python $version; venv: $repo/.venv)"
