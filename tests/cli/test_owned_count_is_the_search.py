"""probe20 C5: a hardware file marks ``rtx-4090`` owned and says nothing of how many (a device entry has no count);
recommend answered "rtx-4090 (your hardware): 2 x rtx-4090", which read as the file's count. The count is the
search's: one card holds no format, so recommend asks the fewest that do (recommend.py ``_fewest_cards``). The option
now says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_capture import run

ASK = ("recommend", "qwen3-30b-a3b", "--context", "32k", "--concurrency", "4")


def _json(*argv: str) -> dict[str, Any]:
    code, out, err = run(*argv, "--json")
    assert code in (0, 1), err
    return json.loads(out)


def test_an_owned_device_without_a_count_says_the_count_is_the_searchs(tmp_path: Path) -> None:
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"devices": [{"id": "rtx-4090", "owned": True}]}), "utf-8")
    rec = _json(*ASK, "--hardware-file", str(hw))
    mine = [o for o in rec["options"] + rec["rejected"] if o["ownership"] == "your hardware"]
    one = [o for o in mine if o["count"] == 1]
    more = [o for o in mine if o["count"] > 1]
    # one card holds no format (fit's verdict), so the option that meets is the search's count of cards
    assert one and all(o["status"] != "meets" and o["tokens_per_second"] is None for o in one)
    assert rec["chosen"]["ownership"] == "your hardware" and rec["chosen"]["count"] == 2
    for o in more:
        note = next(r for r in o["reasons"] if "the count is this search's" in r)
        assert note.startswith(f"{o['count']} x rtx-4090:") and "not how many you have" in note
    code, text, _ = run(*ASK, "--hardware-file", str(hw))
    chosen = next(line for line in text.splitlines() if line.startswith("chosen:"))
    assert "2 x rtx-4090: the count is this search's" in chosen
    assert all("count is this search's" not in r for o in one for r in o["reasons"])
