"""The 20 vision corruptions: sizes, modes, determinism, errors, hand-checked values."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from vlmrobust.perturb.corruption import CORRUPTION_METHODS, corrupt_image, result_mode

# What each input mode becomes (the module docstring's table), written out independently.
EXPECTED_MODE = {
    "RGB": "RGB",
    "L": "L",
    "LA": "LA",
    "RGBA": "RGBA",
    "P": "RGB",
    "1": "L",
    "I;16": "L",
    "CMYK": "RGB",
}
NOISE = ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise")


def make_image(mode: str, width: int, height: int, content_seed: int) -> Image.Image:
    """A random image of ``mode`` (random pixels; a random palette for ``P``)."""
    rng = np.random.default_rng(content_seed)
    if mode == "1":
        return Image.fromarray(rng.integers(0, 2, (height, width)).astype(bool))
    if mode == "I;16":
        return Image.fromarray(rng.integers(0, 65536, (height, width)).astype(np.uint16))
    if mode == "P":
        im = Image.frombytes("P", (width, height), rng.integers(0, 256, width * height, np.uint8))
        im.putpalette(rng.integers(0, 256, 768, np.uint8).tobytes())
        return im
    nbands = Image.getmodebands(mode)
    data = rng.integers(0, 256, width * height * nbands, np.uint8).tobytes()
    return Image.frombytes(mode, (width, height), data)


def severity_for(method: str, severity: int) -> int | None:
    return None if method == "blank" else severity


def digest(image: Image.Image) -> str:
    return hashlib.sha256(image.mode.encode() + image.tobytes()).hexdigest()


images = st.builds(
    make_image,
    mode=st.sampled_from(sorted(EXPECTED_MODE)),
    width=st.integers(1, 80),
    height=st.integers(1, 80),
    content_seed=st.integers(0, 2**16),
)


@pytest.mark.parametrize("method", CORRUPTION_METHODS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image=images, severity=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_size_mode_alpha_and_determinism(method, image, severity, seed):
    sev = severity_for(method, severity)
    out = corrupt_image(image, method, sev, seed)
    assert out.size == image.size
    assert out.mode == EXPECTED_MODE[image.mode] == result_mode(image)
    if image.mode in ("LA", "RGBA"):
        assert out.getchannel("A").tobytes() == image.getchannel("A").tobytes()
    again = corrupt_image(image, method, sev, seed)
    assert again.tobytes() == out.tobytes()


@pytest.mark.parametrize("method", NOISE)
@settings(max_examples=6, deadline=None)
@given(
    mode=st.sampled_from(sorted(EXPECTED_MODE)),
    width=st.integers(16, 80),
    height=st.integers(16, 80),
    content_seed=st.integers(0, 2**16),
    severity=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 2),
)
def test_noise_depends_on_seed(method, mode, width, height, content_seed, severity, seed):
    image = make_image(mode, width, height, content_seed)
    a = corrupt_image(image, method, severity, seed)
    b = corrupt_image(image, method, severity, seed + 1)
    assert a.tobytes() != b.tobytes()


@pytest.mark.parametrize("method", CORRUPTION_METHODS[1:])
def test_equals_the_library_seeded_by_hand(method):
    """On an RGB image ≥ 32 px the result is exactly imagecorruptions' own, seeded."""
    from imagecorruptions import corrupt

    image = make_image("RGB", 48, 40, 3)
    seed = 1234
    np.random.seed(seed)
    kwargs = {"seed": seed} if method in ("glass_blur", "impulse_noise") else {}
    expected = corrupt(np.asarray(image), severity=2, corruption_name=method, **kwargs)
    np.random.seed(999)  # whatever state the global RNG is in does not matter
    got = np.asarray(corrupt_image(image, method, 2, seed))
    np.testing.assert_array_equal(got, expected)


def test_glass_blur_deterministic_after_rng_disturbance():
    from numba import njit

    @njit
    def draw_numba_random(n):  # advances numba's own (unseeded) generator
        total = 0.0
        for _ in range(n):
            total += np.random.random()
        return total

    image = make_image("RGB", 64, 48, 7)
    first = corrupt_image(image, "glass_blur", 3, seed=42)
    draw_numba_random(1000)
    np.random.seed(5)
    np.random.random(100)
    corrupt_image(image, "glass_blur", 5, seed=43)
    corrupt_image(image, "impulse_noise", 4, seed=44)
    corrupt_image(image, "fog", 2, seed=45)
    draw_numba_random(17)
    second = corrupt_image(image, "glass_blur", 3, seed=42)
    assert second.tobytes() == first.tobytes()
    other = corrupt_image(image, "glass_blur", 3, seed=41)
    assert other.tobytes() != first.tobytes()


_SUBPROCESS = """
import hashlib, json, sys
import numpy as np
from PIL import Image
from vlmrobust.perturb.corruption import CORRUPTION_METHODS, corrupt_image
np.random.seed(77)
np.random.random(3)
rng = np.random.default_rng(11)
image = Image.fromarray(rng.integers(0, 256, (36, 40, 3), dtype=np.uint8))
out = {}
for m in reversed(CORRUPTION_METHODS):
    sev = None if m == "blank" else 4
    img = corrupt_image(image, m, sev, 2024)
    out[m] = hashlib.sha256(img.tobytes()).hexdigest()
json.dump(out, sys.stdout)
"""


def test_same_bytes_in_another_process():
    proc = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS], capture_output=True, text=True, check=True
    )
    theirs = json.loads(proc.stdout)
    rng = np.random.default_rng(11)
    image = Image.fromarray(rng.integers(0, 256, (36, 40, 3), dtype=np.uint8))
    for method in CORRUPTION_METHODS:  # other order, other prior RNG state
        img = corrupt_image(image, method, severity_for(method, 4), 2024)
        assert hashlib.sha256(img.tobytes()).hexdigest() == theirs[method], method


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
@pytest.mark.parametrize(
    "method", ["blank", "gaussian_noise", "contrast", "jpeg_compression", "pixelate"]
)
def test_large_non_square(method, mode):
    image = make_image(mode, 3000, 500, 1)
    out = corrupt_image(image, method, severity_for(method, 3), 9)
    assert out.size == (3000, 500)
    assert out.mode == mode
    if method != "blank":
        # the corruption really acted on the whole width, not a crop
        diff = np.abs(np.asarray(out, np.int16) - np.asarray(image.convert(mode), np.int16))
        assert diff[:, -100:].any() and diff[:, :100].any()


@pytest.mark.parametrize(
    ("mode", "fill", "expected"),
    [
        ("RGB", "white", (255, 255, 255)),
        ("RGB", "#102030", (16, 32, 48)),
        ("L", "white", 255),
        ("L", "black", 0),
        ("P", "white", (255, 255, 255)),
        ("1", "white", 255),
        ("CMYK", "red", (255, 0, 0)),
    ],
)
def test_blank_is_uniform_fill(mode, fill, expected):
    image = make_image(mode, 37, 21, 2)
    out = corrupt_image(image, "blank", None, 0, blank_fill=fill)
    assert out.size == (37, 21)
    assert out.getcolors() == [(37 * 21, expected)]


def test_blank_keeps_alpha():
    image = make_image("RGBA", 20, 30, 4)
    out = corrupt_image(image, "blank", None, 0)
    assert out.mode == "RGBA"
    assert out.convert("RGB").getcolors() == [(600, (255, 255, 255))]
    assert out.getchannel("A").tobytes() == image.getchannel("A").tobytes()


@pytest.mark.parametrize("severity", [0, 6, -1])
def test_severity_out_of_range(severity):
    with pytest.raises(ValueError, match=rf"fog.*severity {severity}.*1, 2, 3, 4, 5"):
        corrupt_image(make_image("RGB", 40, 40, 0), "fog", severity, 0)


def test_severity_missing_or_given_to_blank():
    image = make_image("RGB", 40, 40, 0)
    with pytest.raises(ValueError, match="'fog' needs a severity"):
        corrupt_image(image, "fog", None, 0)
    with pytest.raises(ValueError, match="'blank' takes no severity"):
        corrupt_image(image, "blank", 3, 0)


def test_unknown_method():
    with pytest.raises(ValueError, match=r"unknown corruption method 'rain'; allowed: blank, "):
        corrupt_image(make_image("RGB", 40, 40, 0), "rain", 3, 0)


def test_bad_seed_and_fill():
    image = make_image("RGB", 40, 40, 0)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        corrupt_image(image, "fog", 3, -1)
    with pytest.raises(ValueError, match="blank_fill 'not-a-colour'"):
        corrupt_image(image, "blank", None, 0, blank_fill="not-a-colour")


def test_contrast_hand_checked():
    """contrast: x' = (x - mean) * c + mean per channel; severity 1 → c = 0.4."""
    arr = np.zeros((40, 40), np.uint8)
    arr[:, 20:] = 201  # mean 100.5
    out = np.asarray(corrupt_image(Image.fromarray(arr), "contrast", 1, 0))
    # 0 → 100.5 - 0.4 * 100.5 = 60.3 → 60; 201 → 100.5 + 0.4 * 100.5 = 140.7 → 140
    assert set(np.unique(out[:, :20])) == {60}
    assert set(np.unique(out[:, 20:])) == {140}


def test_brightness_hand_checked():
    """brightness: V + c in HSV; severity 3 → c = 0.3. Grey 100 → (100/255 + .3) * 255."""
    out = corrupt_image(Image.new("RGB", (33, 35), (100, 100, 100)), "brightness", 3, 0)
    assert out.getcolors() == [(33 * 35, (176, 176, 176))]  # 176.5 truncated
    out = corrupt_image(Image.new("L", (33, 35), 250), "brightness", 1, 0)
    assert out.getcolors() == [(33 * 35, 255)]  # clipped at 1.0


def test_sixteen_bit_is_scaled_not_clipped():
    arr = np.full((40, 40), 257 * 100, np.uint16)  # 16-bit value for 8-bit 100
    out = corrupt_image(Image.fromarray(arr), "pixelate", 1, 0)  # identity on a constant
    assert out.mode == "L"
    assert out.getcolors() == [(1600, 100)]


def test_palette_with_transparency_keeps_alpha():
    image = make_image("P", 40, 30, 5)
    image.info["transparency"] = 3
    out = corrupt_image(image, "gaussian_noise", 2, 1)
    assert out.mode == "RGBA"
    assert out.getchannel("A").tobytes() == image.convert("RGBA").getchannel("A").tobytes()


@pytest.mark.parametrize(("w", "h"), [(1, 1), (5, 3), (1, 90), (31, 32)])
def test_tiny_images_enlarged_then_reduced(w, h):
    """A side < 32 px is enlarged ×ceil(32/side) (nearest) for the library, then reduced."""
    from imagecorruptions import corrupt

    image = make_image("RGB", w, h, 8)
    fx, fy = -(-32 // w) if w < 32 else 1, -(-32 // h) if h < 32 else 1
    big = np.repeat(np.repeat(np.asarray(image), fy, axis=0), fx, axis=1)
    np.random.seed(3)
    expected = corrupt(big, severity=1, corruption_name="gaussian_noise")
    expected = expected[fy // 2 :: fy, fx // 2 :: fx]  # the centre pixel of each block
    got = corrupt_image(image, "gaussian_noise", 1, 3)
    assert got.size == (w, h)
    np.testing.assert_array_equal(np.asarray(got), expected)


_GLASS = """
import hashlib, sys
import numpy as np
from PIL import Image
from vlmrobust.perturb.corruption import corrupt_image
image = Image.fromarray(np.random.default_rng(5).integers(0, 256, (48, 40, 3), dtype=np.uint8))
print(hashlib.sha256(corrupt_image(image, "glass_blur", 3, 9).tobytes()).hexdigest())
"""


def test_glass_blur_kernel_is_cached_on_disk_and_gives_the_same_bytes(tmp_path):
    from vlmrobust.perturb.corruption import kernel_cache_dir

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, "-c", _GLASS], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    compiled = run()
    folder = tmp_path / "vlmrobust" / "numba"
    cached = sorted(p.name for p in folder.rglob("*glass_blur*"))
    assert any(n.endswith(".nbi") for n in cached) and any(n.endswith(".nbc") for n in cached)
    assert run() == compiled  # the second process loads the kernel
    image = Image.fromarray(np.random.default_rng(5).integers(0, 256, (48, 40, 3), dtype=np.uint8))
    assert (
        hashlib.sha256(corrupt_image(image, "glass_blur", 3, 9).tobytes()).hexdigest() == compiled
    )
    assert (
        kernel_cache_dir()
        == Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vlmrobust" / "numba"
    )


@pytest.mark.parametrize("method", ["defocus_blur", "motion_blur", "frost", "spatter", "fog"])
def test_results_do_not_depend_on_opencv_threads(method):
    import cv2

    image = Image.fromarray(np.random.default_rng(8).integers(0, 256, (400, 520, 3), np.uint8))
    before = cv2.getNumThreads()
    try:
        outs = []
        for n in (1, 2, 4):
            cv2.setNumThreads(n)
            outs.append(corrupt_image(image, method, 4, 3).tobytes())
    finally:
        cv2.setNumThreads(before)
    assert outs[0] == outs[1] == outs[2]
