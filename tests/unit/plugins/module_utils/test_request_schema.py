"""Issue 34: the stack request, the profiles and gpufleet's variable names checked against a schema, each
problem one `[CODE] ...` line that names the value and the nearest valid one."""

import pytest

from ansible_collections.gpufleet.cluster.plugins.module_utils import request_schema as schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.profiles import PROFILE_KEYS, ProfileError, resolve_profile


@pytest.mark.parametrize(("request_", "code", "parts"), [
    ({"torh": "2.3.0"}, "UNKNOWN_REQUEST_KEY", [".torh: unknown request key", "did you mean 'torch'?"]),
    ({"cuda_version": "12.4"}, "UNKNOWN_REQUEST_KEY", [".cuda_version: unknown", "did you mean 'cuda'"]),
    ({"cuda": "12.99"}, "UNKNOWN_CUDA", ["12.99", "known toolkits"]),
    ({"torch": "2.1.2", "torch_variant": "cu124", "cuda": "12.1"}, "TORCH_NO_WHEEL_FOR_CUDA", ["cu124"]),
    ({"driver_compat": "fulll"}, "BAD_REQUEST", ["'fulll'", "\"full\" or \"minor\""]),
    ("2.3.0", "BAD_REQUEST", ["'2.3.0'", "must be a mapping"]),
])
def test_request_problems_name_the_value_and_what_works(request_, code, parts):
    problems = schema.request_problems(request_)
    assert problems and problems[0].startswith(f"[{code}] gpufleet_stack_request")
    for part in parts:
        assert part in problems[0], problems[0]
    assert schema.CONFIG_ERROR.match(problems[0])


def test_an_unknown_gpu_gets_the_nearest_few_models_not_all():
    problem = schema.request_problems({"gpus": ["NVIDIA H10 80GB"]})[0]
    assert problem.startswith("[UNKNOWN_GPU]") and "NVIDIA H100 80GB HBM3" in problem
    assert problem.count(";") <= schema.NEAREST + 1, problem


@pytest.mark.parametrize("request_", [None, {}, {"torch": "2.4.1"}, {"torch": "2.1.2", "cuda": "12.1"},
                                      {"cuda": ["11.8", "12.4"]}, {"gpus": ["NVIDIA H100 80GB HBM3"], "os": "ubuntu22.04"}])
def test_good_requests_have_no_problem(request_):
    assert schema.request_problems(request_) == []


def test_variable_near_misses_are_named_and_others_left_alone():
    known = ["smoke_test_launcher", "gpufleet_stack_request", "preflight_mode"]
    problems = schema.variable_problems(["smoke_test_launchr", "my_site_var", "ansible_host", "preflight_mode"], known)
    assert problems == ["[UNKNOWN_VARIABLE] variable 'smoke_test_launchr' is not one of gpufleet's and would be "
                        "ignored; did you mean 'smoke_test_launcher'?"]


def test_a_profile_key_typo_is_refused_with_the_nearest_key():
    with pytest.raises(ProfileError, match=r"^\[UNKNOWN_PROFILE_KEY\] gpufleet_custom_profiles.big.min_gpu_per_node: "
                                           r"unknown profile key \(did you mean 'min_gpus_per_node'\?\)"):
        resolve_profile("big", {"training": {}}, {"big": {"extends": "training", "min_gpu_per_node": 8}})
    assert schema.profile_problems({"a": {"ecc": "required"}}, PROFILE_KEYS, "p") == []


def test_config_error_cuts_ansibles_wrapper():
    wrapped = ("Task failed: Finalization of task args for 'ansible.builtin.set_fact' failed: Error while resolving "
               "value for '__preflight_plan': stack_plan: [UNKNOWN_CUDA] CUDA 12.99 is not in the data; known: 12.4.")
    assert schema.config_error(wrapped) == "[UNKNOWN_CUDA] CUDA 12.99 is not in the data; known: 12.4."
    assert schema.config_error("n1: gpu_count is 0, expected >= 1") is None


@pytest.mark.parametrize("declined", ["none", "None", "", False, None])
def test_a_request_for_no_pytorch_is_no_configuration_error(declined):
    """torch: none (or null, false, "") is a documented request shape (docs/stack.md): the schema passes it on to
    the solver, which plans no PyTorch; before, the CLI refused every stage with [BAD_REQUEST]."""
    assert schema.request_problems({"cuda": "13.0", "torch": declined}) == []


def test_a_torch_that_is_no_version_is_shown_a_torch_example():
    problems = schema.request_problems({"torch": "abc"})
    assert problems and 'such as "2.8.0"' in problems[0]


def test_a_gpu_name_close_to_nothing_is_not_shown_arbitrary_models():
    problems = schema.request_problems({"gpus": ["xyz123"], "torch": "2.8.0"})
    assert len(problems) == 1 and "no known model is close" in problems[0] and "nearest" not in problems[0]
