"""A multimodal job's traffic in carries its images (smalls3 #2): a qwen2.5-vl job with 2 x 1024x768 images per
request showed `network in 9.47 KB/s`, less than the same job without images (9.98 KB/s), because only the prompt's
text tokens were counted. Images arrive inline, as the OpenAI-style chat API carries them: a base64 JPEG data URL
per image (formulas/network.py eq. 10', JPEG_BITS_PER_PIXEL 1.5 from Wallace 1991's "excellent quality" range). The
base64 length is measured here with Python's own encoder on a JPEG-sized payload, not read from llmsizer."""

from __future__ import annotations

import base64
import math

import pytest

from llmsizer.formulas import network as N
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

REQUEST = """\
version: 1
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-vl-7b-instruct}
    media: {images: 2, image_size: 1024x768}
    traffic:
      concurrency: {typical: 4, peak: 8}
      context: {typical: 4096, peak: 4096}
      output: {typical: 256, peak: 256}
    resources: {device: h100-sxm}
"""


def test_one_inline_image_is_its_base64_jpeg_and_content_part() -> None:
    jpeg = math.ceil(1024 * 768 * 1.5 / 8)  # 147,456 B at 1.5 bits per pixel
    encoded = len(base64.b64encode(bytes(jpeg)))  # RFC 4648: 4 characters per 3 bytes, padded
    part = len(',{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,"}}')
    assert N.inline_image_bytes(1024, 768) == encoded + part == 196_608 + part
    assert N.inline_image_bytes(1000, 1001) == len(base64.b64encode(bytes(math.ceil(1000 * 1001 * 1.5 / 8)))) + part


def test_the_plan_adds_the_images_to_the_traffic_in() -> None:
    net = make_plan(parse_request(REQUEST, source="t.yaml"), alternatives=False).jobs[0].section("network")
    rate = net.value("requests_typical")
    images = 2 * N.inline_image_bytes(1024, 768)
    text = (4096 - 256) * N.TEXT_BYTES_PER_TOKEN + N.REQUEST_OVERHEAD_BYTES
    assert net.value("ingress_typical") == pytest.approx(rate * (text + images))
    assert "2 image(s) of 1024x768" in net.get("ingress_typical").formula
    # the images dominate: 2 x 197 kB against 15 kB of text per request
    assert net.value("ingress_typical") > 20 * rate * text


def test_a_text_job_has_no_image_bytes() -> None:
    text_only = REQUEST.replace("    media: {images: 2, image_size: 1024x768}\n", "")
    net = make_plan(parse_request(text_only, source="t.yaml"), alternatives=False).jobs[0].section("network")
    rate = net.value("requests_typical")
    assert net.value("ingress_typical") == pytest.approx(rate * ((4096 - 256) * 4 + N.REQUEST_OVERHEAD_BYTES))
    assert "image" not in net.get("ingress_typical").formula
