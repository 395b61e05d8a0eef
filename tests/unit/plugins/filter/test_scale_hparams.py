"""scale_hparams: global batch, square-root LR scaling, the ceiling warning, bad values."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.cluster.plugins.filter.scale_hparams import FilterModule, scale_hparams


def test_registered_name():
    assert FilterModule().filters() == {"scale_hparams": scale_hparams}


def test_issue_example():
    out = scale_hparams({"per_gpu_batch": 32, "base_lr": 0.1, "base_gpus": 1}, 16)
    assert out["global_batch"] == 512
    assert out["lr"] == pytest.approx(0.4)
    assert out["warnings"] == []


@pytest.mark.parametrize("gpus, base_gpus, lr", [(1, 1, 0.1), (4, 1, 0.2), (16, 4, 0.2), (2, 8, 0.05), (64, 1, 0.8)])
def test_sqrt_scaling_relative_to_base(gpus, base_gpus, lr):
    out = scale_hparams({"per_gpu_batch": 8, "base_lr": 0.1, "base_gpus": base_gpus}, gpus)
    assert out["lr"] == pytest.approx(lr)
    assert out["global_batch"] == 8 * gpus


def test_base_gpus_defaults_to_one_and_linear_on_request():
    assert scale_hparams({"per_gpu_batch": 4, "base_lr": 0.01}, 9)["lr"] == pytest.approx(0.03)
    assert scale_hparams({"per_gpu_batch": 4, "base_lr": 0.01, "lr_scaling": "linear"}, 9)["lr"] == pytest.approx(0.09)


def test_ceiling_warning():
    out = scale_hparams({"per_gpu_batch": 32, "base_lr": 0.1, "max_global_batch": 256}, 16)
    assert out["global_batch"] == 512
    assert len(out["warnings"]) == 1
    w = out["warnings"][0]
    assert "512" in w and "256" in w and "max_global_batch" in w and "16" in w
    assert scale_hparams({"per_gpu_batch": 32, "base_lr": 0.1, "max_global_batch": 512}, 16)["warnings"] == []


def test_strings_from_extra_vars_are_accepted():
    assert scale_hparams({"per_gpu_batch": "32", "base_lr": "0.1"}, "4")["global_batch"] == 128


@pytest.mark.parametrize("config, gpus, words", [
    ({"per_gpu_batch": 0, "base_lr": 0.1}, 4, ["per_gpu_batch", "0"]),
    ({"per_gpu_batch": 32, "base_lr": -1}, 4, ["base_lr", "-1"]),
    ({"per_gpu_batch": 32, "base_lr": "fast"}, 4, ["base_lr", "fast"]),
    ({"per_gpu_batch": 32, "base_lr": 0.1}, 0, ["GPU count", "0"]),
    ({"per_gpu_batch": 32, "base_lr": 0.1}, "many", ["GPU count", "many"]),
    ({"per_gpu_batch": 2.5, "base_lr": 0.1}, 4, ["per_gpu_batch", "2.5"]),
    ({"per_gpu_batch": True, "base_lr": 0.1}, 4, ["per_gpu_batch", "True"]),
    ({"per_gpu_batch": 32, "base_lr": 0.1, "base_gpus": 0}, 4, ["base_gpus"]),
    ({"per_gpu_batch": 32, "base_lr": 0.1, "lr_scaling": "cubic"}, 4, ["lr_scaling", "cubic"]),
    ({"per_gpu_batch": 32, "base_lr": 0.1, "max_global_batch": -5}, 4, ["max_global_batch"]),
    ({"base_lr": 0.1}, 4, ["per_gpu_batch"]),
    ([32, 0.1], 4, ["mapping"]),
])
def test_bad_values_fail_clearly(config, gpus, words):
    with pytest.raises(AnsibleFilterError) as info:
        scale_hparams(config, gpus)
    for w in words:
        assert w in str(info.value)
