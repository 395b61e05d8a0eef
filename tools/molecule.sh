#!/usr/bin/env bash
# Molecule on the simulated cluster: tools/molecule.sh test -s stack | test --all | list | ...
# Root, from a clean clone: sets up the venv if missing (tools/setup.sh), puts its binaries first
# on PATH (molecule runs ansible-config and ansible-playbook by name) and runs molecule from the
# repository root, where .config/molecule/config.yml and molecule/<scenario>/ live.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
[ -x .venv/bin/molecule ] || bash tools/setup.sh --test
export PATH="$repo/.venv/bin:$PATH"
# No colour codes in CI logs; the idempotence step reads the recap either way.
export NO_COLOR="${NO_COLOR:-1}" ANSIBLE_FORCE_COLOR="${ANSIBLE_FORCE_COLOR:-0}"
exec molecule "$@"
