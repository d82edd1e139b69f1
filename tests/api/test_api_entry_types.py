"""probe13 D6: a wrong type given to the Python API is one InputError/FieldError naming the argument (before: a raw
TypeError '<=' for context=None, AttributeError '.id' for fit(spec, None, 1), TypeError for load_model(None) and an
OSError 'File name too long' for a 100,000-character name)."""

from __future__ import annotations

import pytest

import llmsizer
from llmsizer.errors import FieldError, InputError

MODEL = "qwen2.5-0.5b"


@pytest.fixture(scope="module")
def spec():
    return llmsizer.load_model(MODEL)


@pytest.mark.parametrize("field", ["context", "concurrency"])
def test_none_for_a_field_with_a_value_default(spec, field) -> None:
    with pytest.raises(FieldError, match=rf"^{field}: None is not a value") as e:
        llmsizer.estimate_inference(spec, **{field: None})
    assert e.value.field == field


def test_none_where_the_default_is_none_still_means_the_default(spec) -> None:
    est = llmsizer.estimate_inference(spec, output_tokens=None)
    assert est.item("weights").bytes > 0


@pytest.mark.parametrize("hardware", [None, 5, ["h100-sxm"]])
def test_fit_with_no_hardware_names_the_argument(spec, hardware) -> None:
    with pytest.raises(InputError, match=r"^hardware: expected a device or instance name"):
        llmsizer.fit(spec, hardware, 1)


@pytest.mark.parametrize("ref", [None, 5, b"llama"])
def test_load_model_of_no_text_names_the_argument(ref) -> None:
    with pytest.raises(InputError, match=r"^model: expected a model name"):
        llmsizer.load_model(ref)


def test_estimate_of_no_model_names_the_argument() -> None:
    with pytest.raises(InputError, match=r"^model: expected a model name"):
        llmsizer.estimate_inference(None)


@pytest.mark.parametrize("n", [300, 100_000])  # past NAME_MAX (255) and past MAX_MODEL_NAME (4,096)
def test_a_long_model_name_is_one_line(n) -> None:
    with pytest.raises(llmsizer.LlmsizerError) as e:  # unknown (300), too long (100,000): never an OSError
        llmsizer.load_model("x" * n)
    assert len(str(e.value)) < 1000 and "\n" not in str(e.value)


def test_make_plan_of_no_request_names_the_argument() -> None:
    with pytest.raises(InputError, match=r"^request: expected a Request"):
        llmsizer.make_plan({"version": 1})


@pytest.mark.parametrize("path", [{"version": 1}, None, 3, b"request.yaml", ""])
def test_load_request_of_no_path_names_the_argument(path) -> None:
    # before: a raw TypeError from os.fspath ("expected str, bytes or os.PathLike object, not dict")
    with pytest.raises(InputError, match=r"^path: expected a request file's path"):
        llmsizer.load_request(path)


@pytest.mark.parametrize(("args", "field"), [
    ((float("nan"),), "tokens"), ((float("inf"),), "tokens"), ((-1,), "tokens"), ((None,), "tokens"),
    ((2.5,), "tokens"), ((True,), "tokens"),
    ((4096, float("nan")), "sequences"), ((4096, None), "sequences"), ((4096, -3), "sequences"),
])
def test_kv_cache_of_a_bad_count_names_the_argument(spec, args, field) -> None:
    # before: ValueError 'cannot convert float NaN to integer', OverflowError for inf, TypeError for None
    with pytest.raises(FieldError, match=rf"^{field}: ") as e:
        llmsizer.kv_cache(spec, *args)
    assert e.value.field == field and "\n" not in str(e.value)


def test_kv_cache_of_good_counts_is_unchanged(spec) -> None:
    # a whole float and an int give the same bytes: the entry check reads them as the same count
    assert llmsizer.kv_cache(spec, 4096.0, 2.0).total_bytes == llmsizer.kv_cache(spec, 4096, 2).total_bytes > 0
    assert llmsizer.kv_cache(spec, 0, 0).total_bytes == 0


def test_spec_first_functions_take_a_model_name_as_every_entry_point() -> None:
    """recfix: kv_cache / count_params / weight_bytes / estimate_speed took a ModelSpec only (a name: AttributeError
    from inside the formula); now a name resolves as estimate_inference's ``model`` does (models.spec_of). Truths
    from Qwen2.5-0.5B's config.json: 24 layers x (K, V) x 2 KV heads x 64 head_dim x 2 B x 4096 tokens; its
    parameter count as transformers counts it, 494,032,768 (the model card's 0.49B)."""
    assert llmsizer.kv_cache(MODEL, 4096).total_bytes == 24 * 2 * 2 * 64 * 2 * 4096
    assert llmsizer.kv_cache(spec=MODEL, tokens=4096).total_bytes == 24 * 2 * 2 * 64 * 2 * 4096
    assert llmsizer.count_params(MODEL).total == 494_032_768
    assert llmsizer.weight_bytes(MODEL, "bf16").total == 2 * 494_032_768
    h100 = llmsizer.find_hardware("h100-sxm")
    assert (llmsizer.estimate_speed(MODEL, h100).decode_tokens_per_second
            == llmsizer.estimate_speed(llmsizer.load_model(MODEL), h100).decode_tokens_per_second)


@pytest.mark.parametrize("bad", [None, 5])
def test_spec_first_functions_refuse_no_model_naming_the_argument(bad) -> None:
    with pytest.raises(InputError, match=r"^model: expected a model name"):
        llmsizer.kv_cache(bad, 4096)


# review15 low 8: the model-first wrappers say they take a name (help() and inspect.signature read __signature__)
@pytest.mark.parametrize("name", ["kv_cache", "count_params", "weight_bytes", "estimate_speed"])
def test_model_first_functions_say_they_take_a_name(name) -> None:
    import inspect

    first = next(iter(inspect.signature(getattr(llmsizer, name)).parameters.values()))
    assert first.name == "spec" and first.annotation == "ModelSpec | str"


def test_estimate_speed_reads_a_device_name_as_fit_reads_hardware(spec) -> None:
    # recfix: estimate_speed(spec, "h100-sxm") raised AttributeError; a name is now the catalog entry it names, and
    # an instance name its device with the instance's device count (8 for p5.48xlarge, as fit reads it)
    by_name = llmsizer.estimate_speed(MODEL, "h100-sxm", tensor_parallel=1)
    by_device = llmsizer.estimate_speed(spec, llmsizer.find_hardware("h100-sxm"), 1, tensor_parallel=1)
    assert by_name.decode == by_device.decode
    inst = llmsizer.estimate_speed(spec, "p5.48xlarge", tensor_parallel=8)
    assert inst.decode == llmsizer.estimate_speed(spec, llmsizer.find_hardware("h100-sxm"), 8,
                                                  tensor_parallel=8).decode


@pytest.mark.parametrize("device", [None, 5])
def test_estimate_speed_of_no_device_names_the_argument(spec, device) -> None:
    with pytest.raises(InputError, match=r"^device: expected a device or instance name"):
        llmsizer.estimate_speed(spec, device)
