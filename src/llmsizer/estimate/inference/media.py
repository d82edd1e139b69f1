"""Images and video in the prompt: the tokens they add to each sequence's context and the vision encoder's work.

The one place the inference estimate turns ``images`` / ``image_size`` / ``video_frames`` / ``video_size`` into
numbers (formulas/vision_tokens.py for the tokens, formulas/vision_activations.py for the encoder's peak), so
``infer``, ``fit``, ``recommend`` and ``plan`` read the same answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ...errors import FieldError, InputError
from ...formulas.vision_activations import (
    EncoderActivations,
    encoder_activation_bytes,
    llama4_encoder_activation_bytes,
    mllama_encoder_activation_bytes,
    qwen_encoder_activation_bytes,
)
from ...formulas.vision_compute import media_encoder_flops
from ...formulas.vision_tokens import (
    DELIMITERS,
    LLAMACPP_MTMD,
    LLAMACPP_VIDEO_FPS,
    QWEN3_VL_VIDEO_FPS,
    TRANSFORMERS_PROCESSOR,
    ImageRules,
    MediaTokens,
    image_tokens,
    llamacpp_video_tokens,
    video_tokens,
)
from ...numbers import TOKENS
from ...result import Assumption, Notes
from ...specs import InferenceWorkload, ModelSpec

# the engines that preprocess images themselves (formulas/vision_tokens.py ImageRules); vLLM, SGLang and transformers
# run the transformers processor
_OWN_IMAGE_RULES = {"llamacpp": LLAMACPP_MTMD}


def image_rules(engine: str | None) -> ImageRules:
    """How ``engine`` turns an image into tokens: its own preprocessing, else the transformers processor's."""
    return _OWN_IMAGE_RULES.get(str(engine), TRANSFORMERS_PROCESSOR)


_BOUNDS = (("image_min_tokens", 0, "min"), ("image_max_tokens", 1, "max"))


def token_bounds(spec: ModelSpec, w: InferenceWorkload, rules: ImageRules, notes: Notes) -> ImageRules:
    """``rules`` with llama.cpp's --image-min-tokens / --image-max-tokens (``w.image_min_tokens`` /
    ``image_max_tokens``) in place of the model's own token bounds, each recorded as an assumption (ggml-org/llama.cpp
    @ 0c1e5709: common/arg.cpp L2637-2650 stores them, tools/mtmd/clip.cpp L210-215 hands a positive one to the
    model's hparams, clip-model.h L192-196 ``set_limit_image_tokens`` puts it in place of the model's bound x
    (patch x merge)^2 pixels, which mtmd-image.cpp L772-787 resizes every image and video frame into). Only the
    dynamic-resolution projectors call ``set_limit_image_tokens`` (Qwen2/2.5/3-VL: clip.cpp L1668-1678); llama.cpp
    does not read the bounds for Gemma 3's fixed 896x896 (L1634-1642) or Llama 4's tiles (L1788-1794), so there they
    are refused, not ignored; an effective minimum above the maximum is refused as llama.cpp's load does (clip.cpp
    L2057-2059)."""
    given = [(name, getattr(w, name), i, word) for name, i, word in _BOUNDS]
    named = [name for name, value, _, _ in given if value is not None]
    if not named:
        return rules
    verb = "are" if len(named) > 1 else "is"
    if rules.qwen_tokens is None:  # (the workload refuses them on a named engine other than llama.cpp)
        raise FieldError(named[0], also=(*named[1:], "engine"), message=(
            f"{' and '.join(named)} {verb} llama.cpp's (engine llamacpp), not engine {w.engine}'s"))
    v = spec.vision
    assert v is not None
    if v.token_rule not in ("qwen2_vl", "qwen3_vl"):
        raise FieldError(named[0], also=tuple(named[1:]), message=(
            f"{' and '.join(named)} {verb} not read for model {spec.name!r}: llama.cpp reads the image token bounds "
            "of dynamic-resolution models only (Qwen2/2.5/3-VL), and resizes this model's images to a fixed size "
            "or tiles (tools/mtmd/clip.cpp @ 0c1e5709); drop it"))
    lo, hi = (value if value is not None else rules.qwen_tokens[i] for _, value, i, _ in given)
    if lo > hi:  # one bound given past the model's other: llama.cpp's load refuses it
        other = next(name for name, *_ in _BOUNDS if name not in named)
        raise FieldError(named[0], also=(other,), message=(
            f"{named[0]} {w.image_min_tokens or w.image_max_tokens} is past the model's own {other} "
            f"({rules.qwen_tokens[0 if other == 'image_min_tokens' else 1]} in llama.cpp for {spec.name}): llama.cpp "
            f"refuses to load the projector then (image_max_pixels less than image_min_pixels); give {other} too"))
    for name, value, i, word in given:
        notes.assumptions.append(Assumption(name, (lo, hi)[i], value is None, (
            f"llama.cpp --image-{word}-tokens: {word}imum tokens per image and video frame, x (patch x merge)^2 "
            "pixels bound its resize (tools/mtmd/clip-model.h L192-196 @ 0c1e5709)" if value is not None else
            f"the model's own {word}imum in llama.cpp (tools/mtmd/clip.cpp L1668-1678 @ 0c1e5709)")))
    return dataclasses.replace(rules, qwen_tokens=(lo, hi), source=f"{rules.source}, with image tokens {lo}..{hi}")


@dataclass(frozen=True)
class Media:
    tokens: int  # context tokens the media add to each sequence
    encoder_sequences: int  # encoder sequences per request (images, tiles, crops, video)
    encoder_patches: int  # patches of the largest of them
    details: dict[str, float]
    cross_tokens: int = 0  # image states each sequence's cross-attention layers hold (Llama-3.2-Vision)
    encoder_tokens: int = 0  # patches of all encoder sequences of one request (images, crops, video groups)

    def encoder(self, spec: ModelSpec, sequences: int, act_bytes: int, attention: str) -> EncoderActivations:
        """The encoder's peak when it runs over ``sequences`` encoder sequences (images, crops, tiles) at once: every
        encoder layout has a formula checked against live tensors of a real forward (formulas/vision_activations.py)."""
        assert spec.vision is not None
        v = spec.vision
        if v.encoder == "siglip":
            return encoder_activation_bytes(v, sequences, self.encoder_patches, act_bytes, attention)
        if v.encoder == "mllama":  # every image runs as max_tiles tiles (eqs. 9-13)
            images = -(-sequences // v.max_tiles)
            return mllama_encoder_activation_bytes(v, images, v.intermediate_features, act_bytes, attention)
        if v.encoder == "llama4":  # every tile (and the global tile) its own sequence (eqs. 14-17)
            return llama4_encoder_activation_bytes(v, sequences, act_bytes, attention)
        # the Qwen towers pack every sequence of the batch into one (eqs. 5-8): whole requests, or one sequence
        whole, rest = divmod(sequences, self.encoder_sequences)
        tokens = self.encoder_tokens * whole if not rest else sequences * self.encoder_patches
        return qwen_encoder_activation_bytes(v, tokens, self.encoder_patches, spec.hidden_size, act_bytes, attention)


def _size(spec: ModelSpec, given: tuple[int, int] | None, what: str, flag: str, notes: Notes) -> tuple[int, int]:
    v = spec.vision
    assert v is not None
    if given is not None:
        return given
    if v.token_rule in ("qwen2_vl", "qwen3_vl"):
        raise FieldError(f"{what}_size", spelled=True, message=(  # the field at fault carried (the web's ``field``)
            f"model {spec.name!r} resizes each {what} to its own size (dynamic resolution): give the {what} size, "
            f"WIDTHxHEIGHT ({flag} on the command line, {what}_size in the web API, {what}_size=(W, H) in Python, "
            f"media.{what}_size in a request file)"))
    notes.assumptions.append(Assumption(f"{what}_size", f"{v.image_size}x{v.image_size}", True,
                                        f"not given: the vision encoder's input size (every {what} is resized "
                                        "or tiled to it)"))
    return v.image_size, v.image_size


def media_in_context(spec: ModelSpec, w: InferenceWorkload, notes: Notes) -> Media | None:
    """What ``w``'s images and video add to each sequence (None: none given). One-line InputError for a model
    without a vision encoder, a video on an image-only model, or a missing size a rule needs."""
    if not w.images and not w.video_frames:
        bounds = [name for name, *_ in _BOUNDS if getattr(w, name) is not None]
        if bounds:  # llama.cpp's per-image bounds with no image: refused, not ignored
            raise FieldError(bounds[0], also=(*bounds[1:], "images", "video_frames"), message=(
                f"{' and '.join(bounds)} bound{'' if len(bounds) > 1 else 's'} the tokens of each image or video "
                "frame, and none is given: set images or video_frames"))
        return None
    v = spec.vision
    if v is None:
        raise InputError(f"model {spec.name!r} has no vision encoder (text only): images and video do not apply")
    tokens, sequences, patches, cross, enc_tokens = 0, 0, 0, 0, 0
    details: dict[str, float] = {}
    parts: list[tuple[str, int, MediaTokens, str]] = []  # + whose rules made the tokens
    rules = token_bounds(spec, w, image_rules(w.engine), notes)
    if w.images:
        iw, ih = _size(spec, w.image_size, "image", "--image-size", notes)
        if w.pan_and_scan and not v.pan_and_scan:
            raise InputError(f"model {spec.name!r}: its image processor has no pan-and-scan")
        if w.pan_and_scan and not rules.pan_and_scan:  # llama.cpp: one 896x896 image (vision_tokens.py)
            raise FieldError("pan_and_scan", f"pan_and_scan on engine {w.engine}: {rules.source} has no "
                             "pan-and-scan (every image is resized to the encoder's square): drop pan_and_scan or "
                             "use another engine", also=("engine",))
        per = image_tokens(v, iw, ih, w.pan_and_scan, rules)
        if per.cross_tokens and w.engine != "transformers":
            raise InputError(f"model {spec.name!r}: its images enter through cross-attention layers, whose image "
                             f"K/V is modelled for the transformers engine only (not {w.engine})")
        parts.append((f"{w.images} image(s) of {iw}x{ih}", w.images, per, rules.source))
        details.update({"image_tokens_each": per.tokens, "image_width": iw, "image_height": ih})
    if w.video_frames:
        if not v.video_max_pixels:
            raise InputError(f"model {spec.name!r} takes no video input (its processor has no video rule)")
        fw, fh = _size(spec, w.video_size, "video", "--video-size", notes)
        if rules.qwen_tokens is not None:  # llama.cpp: every frame an image by its rules (vision_tokens.py)
            per = llamacpp_video_tokens(v, w.video_frames, fw, fh, rules)
            notes.assumptions.append(Assumption(
                "video_fps", LLAMACPP_VIDEO_FPS, True, "frames taken as sampled at llama.cpp's default --video-fps "
                "(frames per second): the frame times its \"[XmY.YYs]\" timestamps, every 5 s, are written from "
                "(formulas/vision_tokens.py llamacpp_video_parts)"))
        else:
            per = video_tokens(v, w.video_frames, fw, fh)
        parts.append((f"1 video of {w.video_frames} frames of {fw}x{fh}", 1, per, rules.source))
        if v.token_rule == "qwen3_vl" and rules.qwen_tokens is None:
            notes.assumptions.append(Assumption(
                "video_fps", QWEN3_VL_VIDEO_FPS, True, "frames taken as sampled at the video processor's rate "
                "(frames per second): the frame times its per-group \"<t seconds>\" timestamps are written from "
                "(formulas/vision_tokens.py qwen3_vl_timestamps)"))
        details["video_tokens"] = per.tokens
    flops = 0.0
    for label, count, per, source in parts:
        flops += count * media_encoder_flops(v, per)  # the tower's work on them (formulas/vision_compute.py)
        tokens += count * per.tokens
        cross += count * per.cross_tokens
        sequences += count * per.encoder_sequences
        enc_tokens += count * per.encoder_sequences * per.encoder_patches
        patches = max(patches, per.encoder_patches)
        notes.assumptions.append(Assumption(
            "media", label, False, f"{per.detail}; {per.tokens} context tokens each with the delimiter tokens "
            f"(formulas/vision_tokens.py, from {source})"))
    if w.context + tokens > TOKENS.high:  # the sum is the context the KV cache holds: the same limit as --context
        raise InputError(f"context {w.context:,} + {tokens:,} image/video tokens = {w.context + tokens:,} tokens per "
                         f"sequence, more than the {int(TOKENS.high):,} a context may hold ({TOKENS.why}): lower the "
                         "context or the media")
    notes.assumptions.append(Assumption(
        "media_tokens", tokens, False, f"image/video tokens per sequence, added to the {w.context} text tokens of "
        f"the context: the KV cache and the prefill hold {w.context + tokens} tokens per sequence"))
    details.update({"media_tokens": tokens, "text_context": w.context, "context_with_media": w.context + tokens,
                    "vision_encoder_flops": flops})
    if cross:
        details["cross_attention_tokens"] = cross
        notes.assumptions.append(Assumption(
            "cross_attention_tokens", cross, False, f"image states per sequence held as K/V by each of the "
            f"{spec.cross_attention_layer_count} cross-attention layers (formulas/kv_cache.py eq. 4)"))
    return Media(tokens, sequences, patches, details, cross, enc_tokens)


# the image sizes whose rule has one largest image: a dynamic-resolution processor's is max_pixels' (vLLM's
# Qwen2VLProcessingInfo.get_image_size_with_most_features: smart_resize of a huge square), a fixed-size one's its
# input size; Llama 4 / Llama-3.2-Vision (tiles by aspect ratio) are not covered
_HUGE = 9_999_999


def largest_image(spec: ModelSpec) -> tuple[Media, int] | None:
    """The image with the most features ``spec``'s processor makes (one item of the maximum feature size, what
    vLLM's profile run encodes), as a Media of that one image, and its embeddings (context tokens less the
    delimiters: vLLM's ``get_num_embeds``). None for a model without vision or with a tiled rule."""
    v = spec.vision
    if v is None or v.token_rule not in ("qwen2_vl", "qwen3_vl", "fixed"):
        return None
    side = _HUGE if v.token_rule != "fixed" else v.image_size
    per = image_tokens(v, side, side)
    media = Media(per.tokens, per.encoder_sequences, per.encoder_patches, {}, 0,
                  per.encoder_sequences * per.encoder_patches)
    return media, per.tokens - DELIMITERS[v.token_rule]
