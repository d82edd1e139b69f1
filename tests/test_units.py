import pytest

from llmsizer.errors import InputError
from llmsizer.units import GiB, format_bytes, parse_bytes, parse_count, parse_tokens


@pytest.mark.parametrize("text,expected", [
    ("24GiB", 24 * 2**30), ("80GB", 80 * 10**9), ("512 MiB", 512 * 2**20), ("1.5TB", 1.5e12),
    ("100Gb", 100e9 / 8), ("4096", 4096), (1000, 1000),
])
def test_parse_bytes_keeps_binary_decimal_and_bits_apart(text, expected):
    assert parse_bytes(text) == int(round(expected))


@pytest.mark.parametrize("bad", ["24 gigs", "-3GB", "GiB", "", "1e"])
def test_parse_bytes_rejects_with_a_clear_message(bad):
    with pytest.raises(InputError, match="memory"):
        parse_bytes(bad)


def test_counts_are_decimal_and_contexts_binary():
    assert parse_count("7B") == 7_000_000_000
    assert parse_count("500k") == 500_000
    assert parse_tokens("8k") == 8192
    assert parse_tokens("128K") == 131072  # Llama 3.1 max_position_embeddings
    assert parse_tokens("4096") == 4096


def test_format_bytes_never_mixes_units():
    assert format_bytes(GiB) == "1.00 GiB"
    assert format_bytes(10**9, binary=False) == "1.00 GB"
    assert format_bytes(10**9) == "953.67 MiB"
