"""The pytorch role installs a `gpufleet mirror`'s wheels by hash (issue 35 N15).

A mirror is served over plain http on the cluster's network, so what pip receives from it is checked
against the mirror's hash lock (wheels/requirements.lock, pinned in the inventory by its SHA256 as the
mirror printed it); a mirror without one is refused unless pytorch_allow_unhashed says otherwise.
"""

from __future__ import annotations

import base64

import yaml

from test_pytorch_inputs import LOADER, LOCK, ROLE, pip_runs, render, run_role, CONVERGED

MIRROR = "http://10.0.0.1:8080/m"
FROM_MIRROR = {"pytorch_mirror_url": MIRROR, "pytorch_index_url": f"{MIRROR}/wheels/simple/"}
LOCK_SHA = "ab" * 32


def test_from_a_mirror_with_its_lock_pip_installs_only_what_the_lock_pins_with_every_hash():
    argv = render("__pytorch_pip_argv", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA)
    assert argv[4:] == ["--require-hashes", "-r", "/opt/gpufleet/venv/gpufleet-requirements.lock"]
    assert render("__pytorch_mirror_lock_url", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA) == (
        f"{MIRROR}/wheels/requirements.lock")
    # The index stays the mirror's, its http host trusted as before.
    assert render("__pytorch_pip_env", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA) == {
        "PIP_INDEX_URL": f"{MIRROR}/wheels/simple/", "PIP_TRUSTED_HOST": "10.0.0.1"}


def test_an_index_that_is_not_the_mirrors_or_a_lock_of_the_operators_own_wins():
    elsewhere = render("__pytorch_pip_argv", pytorch_mirror_url=MIRROR, pytorch_index_url="https://download.pytorch.org/whl/cu121")
    assert elsewhere[4:] == ["torch==2.1.2+cu121", "torchvision==0.16.2+cu121", "numpy==1.26.4"]
    assert render("__pytorch_unhashed_mirror", pytorch_mirror_url=MIRROR,
                  pytorch_index_url="https://download.pytorch.org/whl/cu121") is False


def test_a_mirror_without_a_hash_lock_needs_unhashed_installs_allowed():
    assert render("__pytorch_unhashed_mirror", **FROM_MIRROR) is True
    assert render("__pytorch_unhashed_mirror", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA) is False
    assert render("__pytorch_unhashed_mirror", **FROM_MIRROR, pytorch_wheel_dir="/srv/wheels") is False
    # Allowed: the mirror's index, as before, without hashes.
    argv = render("__pytorch_pip_argv", **FROM_MIRROR, pytorch_allow_unhashed=True)
    assert argv[4:] == ["torch==2.1.2+cu121", "torchvision==0.16.2+cu121", "numpy==1.26.4"]


def test_a_mirror_without_a_hash_lock_is_refused_before_anything_runs(tmp_path):
    result = run_role(tmp_path, pytorch_wheel_dir="", pytorch_mirror_url="http://127.0.0.1:9/m",
                      pytorch_index_url="http://127.0.0.1:9/m/wheels/simple/")
    said = " ".join(result.out.split())
    assert result.returncode != 0
    assert "installs from the mirror http://127.0.0.1:9/m without checking a single hash" in said, result.out[-3000:]
    assert "pytorch_mirror_lock_sha256" in said and "pytorch_allow_unhashed" in said
    assert "TASK [gpufleet.cluster.pytorch : Ask the torch index whether it holds the planned wheels]" not in result.out


def test_the_mirrors_lock_must_pin_the_plan():
    read = {"content": base64.b64encode(LOCK.encode()).decode()}
    assert render("__pytorch_lock_missing", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA,
                  __pytorch_mirror_lock_read=read) == []
    other = {"content": base64.b64encode(LOCK.replace("torch==2.1.2+cu121", "torch==2.2.0+cu121").encode()).decode()}
    assert render("__pytorch_lock_missing", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA,
                  __pytorch_mirror_lock_read=other) == ["torch==2.1.2+cu121"]
    with_extras = {"content": base64.b64encode((LOCK + "pyyaml==6.0.1 \\\n    --hash=sha256:" + "c" * 64 + "\n").encode()).decode()}
    assert render("__pytorch_mirror_lock_lacks_extras", **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA,
                  __pytorch_mirror_lock_read=with_extras, pytorch_extra_packages=["PyYAML>=6", "requests"]) == ["requests"]


def test_the_lock_is_fetched_only_with_the_sha256_the_inventory_pins_and_a_new_one_reruns_pip():
    tasks = LOADER.load_from_file(str(ROLE / "tasks/main.yml"), trusted_as_template=True)
    fetch = next(t for t in tasks if t.get("name") == "Fetch the mirror's hash lock beside the venv it installs")
    assert fetch["ansible.builtin.get_url"]["checksum"] == "sha256:{{ pytorch_mirror_lock_sha256 }}"
    assert fetch["ansible.builtin.get_url"]["url"] == "{{ __pytorch_mirror_lock_url }}"
    assert pip_runs(CONVERGED, **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA,
                    __pytorch_mirror_lock_fetch={"changed": True}) is True
    assert pip_runs(CONVERGED, **FROM_MIRROR, pytorch_mirror_lock_sha256=LOCK_SHA) is False


def test_the_new_variables_are_declared_with_their_defaults():
    spec = yaml.safe_load((ROLE / "meta/argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    defaults = yaml.safe_load((ROLE / "defaults/main.yml").read_text())
    for name, kind in (("pytorch_mirror_url", "str"), ("pytorch_mirror_lock_sha256", "str"),
                       ("pytorch_allow_unhashed", "bool")):
        assert spec[name]["type"] == kind and name in defaults
    assert "pytorch_allow_unhashed" in (ROLE / "README.md").read_text()
