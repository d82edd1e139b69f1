"""Cut a Unigram tokenizer.json down to the pieces a fixed set of texts can use, for a small test fixture.

A Unigram model segments each pre-tokenized word by Viterbi over the lattice of vocabulary pieces that occur in it
(tokenizers ``models/unigram/lattice.rs``): a piece that is no substring of any word never enters a lattice, so
dropping it leaves every segmentation of those texts unchanged. The normalizer, pre-tokenizer, post-processor, the
special tokens and the lowest-scoring piece (the unknown-token penalty is measured from it) are kept; the result is
checked token for token against the full tokenizer before it is written.

    python scripts/prune_unigram_tokenizer.py FULL_tokenizer.json TEXTS.csv COLUMN OUT.json.gz [EXTRA_TEXT ...]
"""

from __future__ import annotations

import csv
import gzip
import json
import sys


def main(full_path: str, csv_path: str, column: str, out_path: str, *extra: str) -> None:
    from tokenizers import Tokenizer

    full_text = open(full_path, encoding="utf-8").read()
    full = json.loads(full_text)
    tok = Tokenizer.from_str(full_text)
    with open(csv_path, newline="", encoding="utf-8") as f:
        texts = [r[column] for r in csv.DictReader(f)] + list(extra)
    words = {w for t in texts for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(t))}
    vocab = full["model"]["vocab"]
    special = {a["id"] for a in full["added_tokens"] if a["id"] < len(vocab)}
    lowest = min(range(len(vocab)), key=lambda i: vocab[i][1])
    keep = [i for i, (piece, _) in enumerate(vocab)
            if i in special or i == lowest or any(piece in w for w in words)]
    ids = {old: new for new, old in enumerate(keep)}
    small = dict(full, added_tokens=[dict(a, id=ids[a["id"]]) for a in full["added_tokens"] if a["id"] in ids],
                 model=dict(full["model"], vocab=[vocab[i] for i in keep], unk_id=ids[full["model"]["unk_id"]]))
    small_text = json.dumps(small, ensure_ascii=False)
    pruned = Tokenizer.from_str(small_text)
    for t in texts:
        if pruned.encode(t).tokens != tok.encode(t).tokens:
            raise SystemExit(f"pruned tokenizer differs on {t!r}")
    with open(out_path, "wb") as f:
        f.write(gzip.compress(small_text.encode("utf-8"), mtime=0))
    print(f"{len(keep)} of {len(vocab)} pieces kept; identical on {len(texts)} texts -> {out_path}")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
