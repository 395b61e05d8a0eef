#!/usr/bin/env bash
# The test command. Sets up what is missing, runs the static checks, then one tier of pytest:
#
#   tools/test.sh            the fast tier (CI, the README's command): unit tests, module tests through
#                            Ansible, and -- as root -- one shared simulated cluster converged once through
#                            `gpufleet run site`, then idempotence, verify, check mode and injected faults on it
#   tools/test.sh --full     the full tier (tests/full): every molecule scenario, the OS matrix, driver
#                            upgrades and flavour switches, hardware variants, the simulator's own sanity.
#                            When it passes whole, it records the hash of its inputs in
#                            tests/full-tier-passed.json (commit it): .ci/run runs the full tier itself
#                            whenever that record does not match the tree.
#
# Extra arguments go to pytest, e.g. `tools/test.sh -m "not sim"` or `tools/test.sh --full -k debian`
# (a partial full run records nothing). docs/testing.md says which tier covers which behaviour.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
tier=fast
if [ "${1:-}" = "--full" ]; then tier=full; shift; fi
bash tools/setup.sh --test
# Ansible's and molecule's own state (tmp, ssh control sockets, molecule's copy of the collection)
# stays in the clone, never under the user's home.
export PATH="$repo/.venv/bin:$PATH" ANSIBLE_CONFIG="$repo/ansible.cfg" ANSIBLE_HOME="${ANSIBLE_HOME:-$repo/.ansible}"

t0=$(date +%s)
stamp() { echo "== $1 (at $(( $(date +%s) - t0 )) s)"; }
# The static checks run beside pytest, not before it: the simulated fleet's bring-up and converge are the
# fast tier's longest chain, and the checks (about 45 s, one core) fit in the time its nodes wait.
static_checks() {
  echo "== yamllint"
  yamllint -s . || return 1
  # ansible-lint runs ansible-playbook --syntax-check on every playbook it finds (site.yml, playbooks/*.yml) and
  # fails on any error (seen: a bad play keyword in reboot.yml, a missing import in mirror_facts.yml, rc 2), so
  # a loop of our own over the same playbooks cost about 30 CPU-seconds for nothing.
  echo "== ansible-lint (production profile, with the syntax-check of every playbook)"
  ansible-lint -q || return 1
}
static_log=$(mktemp "${TMPDIR:-/tmp}/gpufleet-static.XXXXXX")
stamp "static checks (beside pytest; their output follows pytest's)"
static_checks >"$static_log" 2>&1 &
static_pid=$!
# Interrupted (CI's timeout, ^C), the checks end with the run and leave no log behind.
# Under set -e a failing command in the trap would end the script with its status: pkill finds no process once the
# checks are done (rc 1), which made every finished run exit 1 whatever pytest said.
trap 'pkill -P "$static_pid" 2>/dev/null || true; kill "$static_pid" 2>/dev/null || true; rm -f "$static_log"' EXIT

stamp "pytest ($tier tier)"
started=$(date +%s)
set +e
if [ "$tier" = full ]; then
  python -m pytest tests/full "$@"
else
  # Two workers: the fleet's tests all on one, in order (tests/tiers.py fleet_scheduler), the unit tests on
  # the other while the fleet waits on its nodes. (Three were tried on two cores: 17.5 min instead of 15.2, and
  # two CPU-bound tests missed their own limits.)
  python -m pytest -n "${GPUFLEET_TEST_WORKERS:-2}" "$@"
fi
rc=$?
wait "$static_pid"
static_rc=$?
set -e
cat "$static_log"
rm -f "$static_log"
stamp "static checks rc $static_rc"
stamp "done, pytest rc $rc"
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
if [ "$static_rc" -ne 0 ]; then
  echo "the static checks failed (above): that fails the run whatever pytest said" >&2
  exit 1
fi
if [ "$tier" = full ] && [ "$rc" -eq 0 ]; then
  if [ "$#" -eq 0 ] && [ "$(id -u)" = 0 ]; then
    python tests/tiers.py record-full "$(( $(date +%s) - started ))" >/dev/null
    echo "full tier passed in $(( $(date +%s) - started )) s: recorded in tests/full-tier-passed.json (commit it)"
  else
    echo "full tier: a partial run (pytest arguments given, or not root) records nothing"
  fi
fi
exit "$rc"
