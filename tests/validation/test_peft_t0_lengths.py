"""The sequence shapes of the PEFT README's T0_3B runs (PM0066-PM0071, PM0082), read from the data they trained on.

The example script (peft @ f16750af examples/conditional_generation/pet_lora_seq2seq_accelerate_ds_zero3_offload.py,
the loop of the README's table and log) tokenizes each tweet with ``tokenizer(inputs, truncation=True)`` (no
max_length), pads each batch of 8 to its longest row (``tokenizer.pad(padding="longest")``) and pads the labels to
``target_max_length = max(len(tokenizer(c)["input_ids"]) for c in classes)``. So the peak step's encoder length is the
train split's longest tweet in tokens and its decoder length the longest class label. Both are counted here with
T5's own tokenizer (T0_3B's vocabulary) on RAFT's twitter_complaints train split (tests/fixtures/
raft_twitter_complaints: its README says where each file comes from), and must be the rows' settings.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from llmsizer.validation_cases import TRAINING_ROWS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "raft_twitter_complaints"
# ds["train"].features["Label"].names with '_' -> ' ' (the script's ``classes``), as the PEFT notebook prints them:
# examples/causal_language_modeling/peft_prefix_tuning_clm.ipynb @ 0032f32a line 77
CLASSES = ("Unlabeled", "complaint", "no complaint")
T0_ROWS = ("PM0066", "PM0068", "PM0070", "PM0071", "PM0082")


@pytest.fixture(scope="module")
def t5_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    with gzip.open(FIXTURE / "t5_tokenizer_pruned.json.gz", "rt", encoding="utf-8") as f:
        return tokenizers.Tokenizer.from_str(f.read())


def _tweets() -> list[str]:
    with (FIXTURE / "train.csv").open(newline="", encoding="utf-8") as f:
        return [r["Tweet text"] for r in csv.DictReader(f)]


def test_fixture_is_the_50_row_train_split_and_t5_tokenization(t5_tokenizer):
    tweets = _tweets()
    assert len(tweets) == 50  # RAFT: 50 labelled training examples per task (the README log's 7 steps of 8)
    # T5's sentencepiece (words of tweet 2): '</s>' appended, no '▁a' piece (the vocabulary splits a lone 'a')
    assert t5_tokenizer.encode("This is a slap").tokens == ["▁This", "▁is", "▁", "a", "▁", "s", "lap", "</s>"]


def test_t0_rows_source_length_is_the_longest_tweet(t5_tokenizer):
    longest = max(len(t5_tokenizer.encode(t).ids) for t in _tweets())
    for rid in T0_ROWS:
        model, fields, _, _, _ = TRAINING_ROWS[rid]
        assert model == "t0_3b"
        assert fields["seq_len"] == longest, rid
        assert fields["micro_batch"] == 8, rid


def test_t0_rows_target_length_is_the_longest_class_label(t5_tokenizer):
    target = max(len(t5_tokenizer.encode(c).ids) for c in CLASSES)
    for rid in T0_ROWS:
        assert TRAINING_ROWS[rid][1]["target_len"] == target, rid
