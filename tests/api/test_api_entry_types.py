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
