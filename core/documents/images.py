"""Reading an attached image: its size, format and dominant colour (what the demo model "sees"
and what a model without vision is told), and a WebP thumbnail. Run in the reading child
process like every reader (`extract.py`)."""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

from .base import Extracted, ExtractError, reason

MAX_IMAGE_PIXELS = 60_000_000
THUMBNAIL_SIDE = 320

COLOUR_NAMES: dict[str, tuple[int, int, int]] = {
    "black": (0, 0, 0),
    "grey": (128, 128, 128),
    "white": (255, 255, 255),
    "red": (220, 40, 40),
    "orange": (245, 140, 30),
    "yellow": (245, 220, 40),
    "green": (50, 170, 60),
    "teal": (30, 160, 160),
    "blue": (40, 90, 220),
    "purple": (130, 60, 200),
    "pink": (240, 120, 180),
    "brown": (130, 80, 40),
}


def colour_name(rgb: tuple[int, int, int]) -> str:
    return min(COLOUR_NAMES, key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOUR_NAMES[name], rgb, strict=True)))


def dominant_colour(image: Any) -> tuple[int, int, int]:
    """The most common colour of the image shrunk to 64×64, in 32 steps per channel."""
    small = image.convert("RGBA").resize((64, 64))
    counts: Counter[tuple[int, int, int]] = Counter()
    pixels = small.get_flattened_data() if hasattr(small, "get_flattened_data") else small.getdata()
    for red, green, blue, alpha in pixels:
        if alpha >= 128:
            counts[(red // 8 * 8 + 4, green // 8 * 8 + 4, blue // 8 * 8 + 4)] += 1
    if not counts:
        return (255, 255, 255)
    rgb = counts.most_common(1)[0][0]
    return (min(rgb[0], 255), min(rgb[1], 255), min(rgb[2], 255))


def describe_image(facts: dict[str, Any]) -> str:
    """One deterministic sentence about an image: size, format, dominant colour."""
    return (
        f"A {facts['width']}×{facts['height']} {facts['format']} image; its dominant colour is "
        f"{facts['colour_name']} ({facts['colour']})."
    )


def extract_image(data: bytes) -> Extracted:
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format not in ("PNG", "JPEG", "GIF", "WEBP"):
                raise ExtractError("Images must be PNG, JPEG, GIF or WebP.")
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise ExtractError(f"This image is {width}×{height} pixels; Tessera reads at most 60 megapixels.")
            image.load()
            rgb = dominant_colour(image)
            frames = getattr(image, "n_frames", 1)
            thumb = image.convert("RGBA") if image.mode in ("P", "LA", "RGBA", "PA") else image.convert("RGB")
            thumb.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
            out = io.BytesIO()
            thumb.save(out, "WEBP", quality=80)
            fmt = image.format
    except ExtractError:
        raise
    except Image.DecompressionBombError as exc:
        raise ExtractError("This image has far too many pixels; Tessera reads at most 60 megapixels.") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ExtractError(f"This image could not be read ({reason(exc)}).") from exc
    facts: dict[str, Any] = {
        "width": width,
        "height": height,
        "format": fmt,
        "colour": "#{:02x}{:02x}{:02x}".format(*rgb),
        "colour_name": colour_name(rgb),
        "thumbnail": True,
    }
    if frames > 1:
        facts["frames"] = frames
    return Extracted("image", describe_image(facts), [0], facts, out.getvalue())
