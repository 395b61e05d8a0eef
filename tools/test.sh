#!/usr/bin/env bash
# The test command: sets up what is missing, then runs the static checks and the whole pytest suite
# (unit tests, module tests through Ansible, and -- as root -- the simulated-cluster tests).
# Extra arguments go to pytest, e.g. `tools/test.sh -m "not sim"`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bash tools/setup.sh --test
export PATH="$repo/.venv/bin:$PATH" ANSIBLE_CONFIG="$repo/ansible.cfg"

echo "== yamllint"
yamllint -s .
echo "== ansible-lint (production profile)"
ansible-lint -q
echo "== syntax-check of every playbook"
for pb in site.yml playbooks/*.yml; do
  ansible-playbook --syntax-check -i localhost, "$pb" >/dev/null
  echo "ok  $pb"
done
echo "== pytest"
set +e
python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$rc"
