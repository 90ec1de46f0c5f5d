"""The shape of a bounded listing, the same for every command, the Python API and the
server: `{<items>: [...], total, truncated, hint?}`, and `--fields` applied to its items."""

from __future__ import annotations

from typing import Any

DEFAULT_NODES = 100  # nodes `barca list` and `barca status` show without --limit


def pick_fields(items: list[dict[str, Any]], fields: list[str] | None) -> list[dict[str, Any]]:
    """Keep only the chosen keys of each item (valid keys absent from an item are omitted)."""
    if fields is None:
        return items
    return [{k: item[k] for k in fields if k in item} for item in items]


def listing(body: dict[str, Any], items_key: str, items: list, total: int, noun: str
            ) -> dict[str, Any]:
    """The bounded JSON envelope `{<items_key>: [...], total, truncated, hint?}` (plus body)."""
    out = {**body, items_key: items, "total": total, "truncated": len(items) < total}
    hint = page_hint(len(items), total, noun)
    if hint:
        out["hint"] = hint
    return out


def page_hint(shown: int, total: int, noun: str) -> str | None:
    """The hint for a listing cut at `shown` of `total`, None when nothing was cut."""
    if shown >= total:
        return None
    return f"pass --limit N for more, or --all for all {total} {noun}"
