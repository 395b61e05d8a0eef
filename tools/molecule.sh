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
# molecule's runtime installs a copy of the collection under $ANSIBLE_HOME/collections: in the clone, never in
# the user's ~/.ansible, and in a home of molecule's own, never the one tools/test.sh gives ansible-lint: lint
# resolves modules from that home's collections first, so once the code moved on, molecule's copy made it report
# a module added since (gpufleet.cluster.stack_record) as unknown.
export ANSIBLE_HOME="$repo/.ansible/molecule"
# No colour codes in CI logs; the idempotence step reads the recap either way.
export NO_COLOR="${NO_COLOR:-1}" ANSIBLE_FORCE_COLOR="${ANSIBLE_FORCE_COLOR:-0}"
# One simulator job at a time on this host (tests/sim/gfsim/util.py, SIM_LOCK): molecule waits for a
# running test session, and the simcluster.py it runs knows its parent holds the lock.
lock=${GPUFLEET_SIM_LOCK:-/run/lock/gpufleet-sim.lock}
case "${1:-}" in list|--help|-h|--version) exec molecule "$@" ;; esac
if [ -z "${GPUFLEET_SIM_LOCK_HELD:-}" ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$(dirname "$lock")"
  export GPUFLEET_SIM_LOCK_HELD="molecule $$"
  exec flock "$lock" molecule "$@"
fi
exec molecule "$@"
