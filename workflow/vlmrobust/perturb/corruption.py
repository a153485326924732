"""The 20 vision corruptions of Distract-Bench (paper Appendix B, Table 7).

``blank`` (the whole image replaced by one colour) plus the 19 ImageNet-C-style
corruptions of ``imagecorruptions`` (the maintained fork ``imagecorruptions-imaug``),
each at severity 1-5. :func:`corrupt_image` wraps the library so that it is

* **deterministic**: the global ``np.random`` is seeded with ``seed`` right before the
  library call (most methods draw from it), ``glass_blur`` and ``impulse_noise`` also
  get ``seed=`` (their generators are separate: numba's own ``np.random`` and a NumPy
  ``Generator``). The same (image, method, severity, seed) gives the same bytes in any
  process, whatever ran before. Nothing is restored afterwards: the global
  ``np.random`` state is left seeded.
* **total over the images a dataset can hold**: the library needs an ``uint8``
  H×W×3 array of at least 32×32 pixels. Every image is brought into that form and the
  result is brought back; the output always has the input's size.

Mode mapping (input mode → output mode; the same for every method, ``blank`` included):

============================  =======  ====================================================
input                         output   how
============================  =======  ====================================================
``RGB``                       ``RGB``  corrupted as is
``L``                         ``L``    stacked to 3 equal channels (as ``imagecorruptions.
                                       corrupt`` does), corrupted, converted back with
                                       PIL's ITU-R 601-2 luma (``convert("L")``). Methods
                                       that add independent noise per channel therefore
                                       come out with ~0.67× the noise standard deviation
                                       of the RGB case; colour effects (frost, spatter)
                                       become their luma.
``LA``                        ``LA``   ``L`` band as ``L``; alpha band unchanged
``RGBA``                      ``RGBA`` RGB bands as ``RGB``; alpha band unchanged
``P`` (palette)               ``RGB``  palette expanded to RGB
``P`` with transparency,      ``RGBA`` expanded to RGBA; the alpha from the palette is kept
``PA``                                 unchanged
``1`` (1-bit)                 ``L``    0/1 → 0/255, then as ``L``
``I;16``, ``I;16L/B/N``       ``L``    16-bit values scaled to 8 bits (``round(v / 257)``)
``I`` (32-bit int)            ``L``    values in 0..255 taken as they are; else values in
                                       0..65535 scaled by 1/257; else min-max scaled
``F`` (32-bit float)          ``L``    values in [0, 1] ×255; else values in [0, 255] as
                                       they are; else min-max scaled (NaN → 0)
``La``, ``RGBa``              ``LA``,  un-premultiplied by PIL, then as ``LA``/``RGBA``
                              ``RGBA``
``CMYK``, ``YCbCr``, ``LAB``, ``RGB``  converted by PIL to RGB
``HSV``, ``RGBX``, other
============================  =======  ====================================================

Small images: a side shorter than 32 px is enlarged by an integer factor
(``ceil(32 / side)``, nearest neighbour, each axis on its own) for the corruption, and the
result is reduced back to the original size with nearest neighbour, so an identity
corruption would give back the input exactly. Effects with a spatial scale (blurs,
pixelate, elastic) act on the enlarged grid, i.e. they are weaker per original pixel.

Conversion of the library's float result to ``uint8`` truncates (``np.uint8``), as
``imagecorruptions.corrupt`` does.
"""

from __future__ import annotations

import math
import operator
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageColor

__all__ = [
    "CORRUPTION_METHODS",
    "SEVERITIES",
    "MIN_SIDE",
    "corrupt_image",
    "result_mode",
    "validate_method_severity",
]

#: The 20 methods in the paper's Table 7 order (blank first).
CORRUPTION_METHODS: tuple[str, ...] = (
    "blank",
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "gaussian_blur",
    "glass_blur",
    "defocus_blur",
    "motion_blur",
    "zoom_blur",
    "fog",
    "frost",
    "snow",
    "spatter",
    "contrast",
    "brightness",
    "saturate",
    "jpeg_compression",
    "pixelate",
    "elastic_transform",
)
SEVERITIES: tuple[int, ...] = (1, 2, 3, 4, 5)
#: The smallest side ``imagecorruptions`` accepts.
MIN_SIDE = 32
#: Methods whose randomness does not come (only) from the global ``np.random``.
_SEED_KWARG = frozenset({"glass_blur", "impulse_noise"})

_AS_RGB_ALPHA = {"RGBA", "RGBa", "PA"}
_AS_L_ALPHA = {"LA", "La"}
_AS_L = {"L", "1", "I", "F"}


def validate_method_severity(method: str, severity: int | None) -> int | None:
    """Check (method, severity); return the severity as a plain ``int`` (or None).

    ``blank`` takes no severity (None); every other method takes an integer 1-5.
    """
    if method not in CORRUPTION_METHODS:
        raise ValueError(
            f"unknown corruption method {method!r}; allowed: {', '.join(CORRUPTION_METHODS)}"
        )
    if method == "blank":
        if severity is not None:
            raise ValueError(
                f"corruption method 'blank' takes no severity (None), got {severity!r}"
            )
        return None
    allowed = ", ".join(map(str, SEVERITIES))
    if severity is None or isinstance(severity, bool):
        raise ValueError(
            f"corruption method {method!r} needs a severity in {allowed}, got {severity!r}"
        )
    try:
        sev = operator.index(severity)
    except TypeError:
        raise ValueError(
            f"corruption method {method!r}: severity {severity!r} is not an integer; "
            f"allowed: {allowed}"
        ) from None
    if sev not in SEVERITIES:
        raise ValueError(
            f"corruption method {method!r}: severity {sev} is outside 1-5; allowed: {allowed}"
        )
    return sev


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool):
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    try:
        s = operator.index(seed)
    except TypeError:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}") from None
    if not 0 <= s < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {s}")
    return s


def result_mode(image: Image.Image) -> str:
    """The mode :func:`corrupt_image` returns for ``image`` (see the module docstring)."""
    mode = image.mode
    if mode in _AS_RGB_ALPHA or (mode == "P" and "transparency" in image.info):
        return "RGBA"
    if mode in _AS_L_ALPHA:
        return "LA"
    if mode in _AS_L or mode.startswith("I;16"):
        return "L"
    return "RGB"


def _scale_to_uint8(arr: np.ndarray, *, sixteen_bit: bool) -> np.ndarray:
    """Map a single-band array of any numeric range to uint8 (rules in the docstring)."""
    a = np.asarray(arr, dtype=np.float64)
    a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
    if a.size == 0:
        return a.astype(np.uint8)
    lo, hi = float(a.min()), float(a.max())
    if sixteen_bit:
        a = a / 257.0
    elif np.issubdtype(np.asarray(arr).dtype, np.floating) and lo >= 0.0 and hi <= 1.0:
        a = a * 255.0
    elif lo >= 0.0 and hi <= 255.0:
        pass
    elif not np.issubdtype(np.asarray(arr).dtype, np.floating) and lo >= 0 and hi <= 65535:
        a = a / 257.0
    else:
        a = (a - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(a)
    return np.clip(np.round(a), 0, 255).astype(np.uint8)


def _split(image: Image.Image) -> tuple[Image.Image, Image.Image | None, str]:
    """Split ``image`` into an 8-bit colour part (mode ``RGB`` or ``L``) and its alpha."""
    out_mode = result_mode(image)
    mode = image.mode
    if out_mode == "RGBA":
        rgba = image.convert("RGBA")
        return rgba.convert("RGB"), rgba.getchannel("A"), out_mode
    if out_mode == "LA":
        la = image.convert("LA")
        return la.getchannel("L"), la.getchannel("A"), out_mode
    if out_mode == "L":
        if mode == "L":
            return image.copy(), None, out_mode
        if mode == "1":
            return image.convert("L"), None, out_mode
        arr = np.asarray(image)
        sixteen = mode.startswith("I;16")
        return Image.fromarray(_scale_to_uint8(arr, sixteen_bit=sixteen), "L"), None, out_mode
    return image.convert("RGB"), None, out_mode


def _merge(colour: Image.Image, alpha: Image.Image | None, out_mode: str) -> Image.Image:
    if alpha is None:
        return colour
    return Image.merge(out_mode, (*colour.split(), alpha))


def _fill_colour(blank_fill: Any, mode: str) -> Any:
    try:
        if isinstance(blank_fill, str):
            return ImageColor.getcolor(blank_fill, mode)
        Image.new(mode, (1, 1), blank_fill)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"blank_fill {blank_fill!r} is not a colour for mode {mode} "
            f"(use a PIL colour name or '#rrggbb'): {exc}"
        ) from None
    return blank_fill


def kernel_cache_dir() -> Path:
    """Where the compiled ``glass_blur`` kernel is kept: ``$XDG_CACHE_HOME/vlmrobust/numba``
    (default ``~/.cache/vlmrobust/numba``); numba's own ``NUMBA_CACHE_DIR`` wins when set."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vlmrobust" / "numba"


_kernel_cache: list[str] = []  # the cache folder once caching is on (or "" if it cannot be)


def _cache_kernel() -> None:
    """Once per process: keep numba's compiled ``glass_blur`` kernel on disk.

    ``imagecorruptions`` compiles its pixel shuffle with numba on the first call in every
    process, several seconds (a variants job and each of its worker processes); the
    library does not ask numba to cache it. Cached, a process loads the compiled kernel
    instead (measured: 9.1 s -> 0.8 s on a loaded 2-core machine); the machine code, and
    so every pixel, is the same. Only this function's cache is pointed at
    :func:`kernel_cache_dir` (numba's ``config.CACHE_DIR`` is set while its cache is
    made, then put back), never the library's folder. Anything that fails leaves
    numba compiling as before.
    """
    if _kernel_cache:
        return
    try:
        import numba
        from imagecorruptions import corruptions

        folder = numba.config.CACHE_DIR or str(kernel_cache_dir())
        os.makedirs(folder, exist_ok=True)
        before, numba.config.CACHE_DIR = numba.config.CACHE_DIR, folder
        try:
            corruptions._shuffle_pixels_njit_glass_blur.enable_caching()
        finally:
            numba.config.CACHE_DIR = before
        _kernel_cache.append(folder)
    except Exception:  # noqa: BLE001 - an optimisation only: compile as the library does
        _kernel_cache.append("")


def _run_library(rgb: np.ndarray, method: str, severity: int, seed: int) -> np.ndarray:
    """Call ``imagecorruptions`` on an uint8 H×W×3 array (H, W ≥ 32) with seeded RNGs."""
    from imagecorruptions import corrupt  # heavy (skimage, cv2, numba): import on use

    if method == "glass_blur":
        _cache_kernel()
    kwargs: dict[str, Any] = {"seed": seed} if method in _SEED_KWARG else {}
    np.random.seed(seed)
    out = corrupt(rgb, severity=severity, corruption_name=method, **kwargs)
    out = np.asarray(out)
    if out.shape != rgb.shape:  # the library promises the input's shape; never pass on less
        raise RuntimeError(
            f"imagecorruptions {method} (severity {severity}) returned shape {out.shape} "
            f"for an input of shape {rgb.shape}"
        )
    return out


def corrupt_image(
    image: Image.Image,
    method: str,
    severity: int | None,
    seed: int,
    blank_fill: Any = "white",
) -> Image.Image:
    """Apply one of :data:`CORRUPTION_METHODS` to ``image``; return a new image.

    ``severity`` is 1-5 (None for ``blank``); ``seed`` an integer in [0, 2**32).
    ``blank_fill`` is the colour of ``blank`` (a PIL colour name, ``#rrggbb`` or a value
    for the output mode). The result has the input's size and the mode given in the
    module docstring (:func:`result_mode`); an alpha band is passed through unchanged.
    """
    severity = validate_method_severity(method, severity)
    seed = _check_seed(seed)
    colour, alpha, out_mode = _split(image)
    cmode = colour.mode  # "RGB" or "L"
    width, height = colour.size

    if method == "blank":
        result = Image.new(cmode, (width, height), _fill_colour(blank_fill, cmode))
        return _merge(result, alpha, out_mode)
    assert severity is not None

    rgb = colour if cmode == "RGB" else Image.merge("RGB", (colour, colour, colour))
    fx = math.ceil(MIN_SIDE / width) if width < MIN_SIDE else 1
    fy = math.ceil(MIN_SIDE / height) if height < MIN_SIDE else 1
    if fx > 1 or fy > 1:
        rgb = rgb.resize((width * fx, height * fy), Image.Resampling.NEAREST)

    out = _run_library(np.asarray(rgb, dtype=np.uint8), method, severity, seed)
    result = Image.fromarray(np.ascontiguousarray(out, dtype=np.uint8), "RGB")
    if fx > 1 or fy > 1:
        result = result.resize((width, height), Image.Resampling.NEAREST)
    if cmode == "L":
        result = result.convert("L")
    return _merge(result, alpha, out_mode)
