"""review35 N4: where no count of copies up to MAX_REPLICAS carries the whole request rate, recommend's rejected row
is the MAX_REPLICAS copies' pick priced as one copy; its reason now says what it is: refused at the rate, the count
of copies tried (and their devices), each copy's share, and that the figures and price are one copy's. The truth:
fit on one copy at that share refuses the rate too, and the price is the catalog instance's own."""

from __future__ import annotations

from llmsizer.catalog.hardware import HardwareCatalog, load_catalog
from llmsizer.estimate.fit import fit
from llmsizer.recommend import MAX_REPLICAS, recommend_inference

RATE = 500.0  # far past 64 L4s for an 8B model at 4k context (each about 0.27 requests/s), below rate_ceiling


def test_refused_row_says_the_copies_tried_and_prices_one() -> None:
    cat = load_catalog()
    inst = cat.instances["gcp-g2-standard-4"]
    one = HardwareCatalog({inst.device.id: inst.device}, {inst.id: inst}, dict(cat.interconnects), dict(cat.sources))
    rec = recommend_inference("llama-3.1-8b", engine="vllm", request_rate=RATE, catalog=one, quantization_advice=False)
    assert not rec.options
    (row,) = rec.rejected
    share = RATE / MAX_REPLICAS
    why = row.reasons[0]
    assert why.startswith(f"refused at {RATE:g} requests/s: even {MAX_REPLICAS} copies (the most tried, "
                          f"{MAX_REPLICAS} devices) at {share:.3g} requests/s each do not carry it: "), why
    assert why.endswith("the figures and price shown are one copy's (1 device) at that share"), why
    assert (row.count, row.instances) == (1, 1)
    assert row.price_per_hour == inst.price_per_hour  # one instance's hourly price
    # one copy at its share is refused by fit as well: the row's verdict is fit's
    assert "do not carry it: at bf16: does not carry the rate" in why  # the checkpoint's format, refused
    r = fit("llama-3.1-8b", inst.id, engine="vllm", weights="bf16", request_rate=share)
    assert not r.fits
