"""Images on llama.cpp at the faces: pan-and-scan refused (llama.cpp has none), and `infer --max-context` saying
the image tokens each sequence holds beside the text (probe27 D1, N1)."""

from __future__ import annotations

import json

import pytest

from cli_capture import run, run_cli


def test_pan_and_scan_on_llamacpp_is_one_line_exit_2():
    """llama.cpp's mtmd resizes every Gemma 3 image to one 896x896 square (tools/mtmd/mtmd.cpp L738-745 @ 0c1e5709:
    mtmd_image_preprocessor_fixed_size); it has no crops to add."""
    code, out, err = run("infer", "gemma-3-4b-it", "--images", "1", "--image-size", "1920x1080", "--pan-and-scan",
                         "--engine", "llamacpp")
    assert (code, out) == (2, "") and err.count("\n") == 1 and "Traceback" not in err, err
    assert "--pan-and-scan" in err and "no pan-and-scan" in err and "--engine" in err
    # the processor's engines keep it: 2 crops of 1920x1080 (round(1920 / 1080)), 3 x 258 tokens
    r = run_cli("infer", "gemma-3-4b-it", "--images", "1", "--image-size", "1920x1080", "--pan-and-scan",
                "--engine", "vllm", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["details"]["media_tokens"] == 3 * 258


def test_the_web_refuses_it_with_the_field():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/infer", json={"model": "gemma-3-4b-it", "images": 1, "image_size": "1920x1080",
                                               "pan_and_scan": True, "engine": "llamacpp"})
    assert r.status_code == 400 and "no pan-and-scan" in r.json()["detail"], r.text


def test_max_context_says_the_image_tokens_per_sequence():
    """1920x1080 on Qwen2.5-VL: 1932 x 1092 px, 69 x 39 = 2691 tokens + <|vision_start|> <|vision_end|> = 2693
    (qwen2_vl smart_resize; the same on llama.cpp, inside its 8..4096 tokens). The text context that fits plus
    them is the largest context that fits without the image."""
    common = ("qwen2.5-vl-7b-instruct", "--memory", "24GiB", "--max-context")
    code, out, err = run("infer", *common, "--images", "1", "--image-size", "1920x1080")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("largest context that fits"))
    assert line.endswith(" text tokens at concurrency 1"), line
    text = int(line.split(": ")[1].split(" ")[0].replace(",", ""))
    note = (f"note: the largest context that fits counts text tokens: each sequence also holds 2,693 image tokens, "
            f"{text + 2693:,} tokens in all")
    assert any(x.startswith(note) for x in out.splitlines()), out
    r = run_cli("infer", *common, "--images", "1", "--image-size", "1920x1080", "--json")
    data = json.loads(r.stdout)
    assert data["reverse"] == {"max_context": text, "max_context_media_tokens": 2693}
    assert any(n.startswith(note[len("note: "):]) for n in data["reverse_notes"]), data["reverse_notes"]
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:  # the page prints the same notes
        web = client.post("/api/v1/infer", json={"model": "qwen2.5-vl-7b-instruct", "memory": "24GiB", "images": 1,
                                                 "image_size": "1920x1080", "max_context": True}).json()
    assert web["reverse_notes"] == data["reverse_notes"], web
    plain = json.loads(run_cli("infer", *common, "--json").stdout)["reverse"]
    assert plain == {"max_context": text + 2693}


def test_video_on_llamacpp_counts_frames_by_its_image_rules_on_every_face():
    """llama.cpp's mtmd takes video (mtmd-cli /video, llama-server input_video; tools/mtmd/mtmd-helper.cpp L504-511
    @ 0c1e5709): 8 frames at 4/s are "Video:", F0, "[0m0.00s]", F1 .. F7, so [F0], (F1 F2), (F3 F4), (F5 F6), [F7] =
    5 chunks of 1280x720 -> 46 x 26 = 1196 + 2 tokens; + 2 + 9 text tokens = 6001 (hand count in
    tests/estimate/test_llamacpp_media_tokens.py)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    r = run_cli("infer", "qwen2.5-vl-7b-instruct", "--video-frames", "8", "--video-size", "1280x720",
                "--engine", "llamacpp", "--weights", "q4_k_m", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["details"]["video_tokens"] == 5 * 1198 + 2 + 9
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        w = client.post("/api/v1/infer", json={"model": "qwen2.5-vl-7b-instruct", "video_frames": 8,
                                               "video_size": "1280x720", "engine": "llamacpp", "weights": "q4_k_m"})
    assert w.status_code == 200, w.text
    assert w.json()["details"]["video_tokens"] == 5 * 1198 + 2 + 9
