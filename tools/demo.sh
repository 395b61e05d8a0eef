#!/usr/bin/env bash
# The demo: set up, bring up a simulated 3-node HGX H100 cluster (network namespaces, booted
# systemd containers, a local signed NVIDIA-style repository; no GPU needed) and run the whole flow
# on it through the pipeline entry point. The cluster stays up afterwards for exploring.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# The simulated cluster needs root (network namespaces, mounts, systemd-nspawn): a user with sudo
# gets the demo re-run through it; a root shell (often without sudo at all) runs it directly.
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null; then
    echo "demo: the simulated cluster needs root; re-running through sudo" >&2
    exec sudo -- bash "$repo/tools/demo.sh" "$@"
  fi
  echo "demo: the simulated cluster needs root (network namespaces, mounts, systemd-nspawn), and sudo is not installed" >&2
  exit 2
fi
# The demo runs the simulated cluster and the CPU smoke job: it needs the test tools (and torch).
bash tools/setup.sh --test
export PATH="$repo/.venv/bin:$PATH" ANSIBLE_CONFIG="$repo/ansible.cfg"

name=demo
inventory=.sim/$name/inventory.yml
# A fresh artifacts directory for every run: gpufleet run refuses a directory it did not make (an older
# gpufleet's reports/demo has no marker file), and two runs' reports never mix. Older runs' stay.
mkdir -p reports
artifacts=$(mktemp -d "reports/demo-$(date -u +%Y%m%dT%H%M%SZ)-XXXXXX")
chmod 755 "$artifacts"
echo "demo: this run's artifacts go to $repo/$artifacts" >&2
python tests/sim/simcluster.py up --name "$name" --subnet 10.200.1.0/24 --nodes 3 --profile hgx-h100 \
  --inventory "$inventory"

set +e
gpufleet run site -i "$inventory" --artifacts "$artifacts" -e gpufleet_reboot_ok=true
rc=$?
set -e

echo
echo "Reports:  $repo/$artifacts/summary.json and $artifacts/reports/ (preflight.md, plan.json, health.json, smoke.md, smoke_busbw.svg)"
echo "Explore:  ansible-playbook playbooks/validate.yml -i $inventory --tags health"
echo "          ansible gpu_nodes -i $inventory -m ansible.builtin.command -a 'nvidia-smi -L'"
echo "          python tests/sim/simcluster.py fault --name $name node2 ecc-uncorrectable   # then re-run the health checks"
echo "Remove:   .venv/bin/python tests/sim/simcluster.py down --name $name   (as root, or with sudo)"
exit "$rc"
