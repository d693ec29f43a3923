"""Emptying a server's prefix cache before a cold run, where the server allows it, and saying what was done.

Tried in order at the server's root: `POST /reset_prefix_cache` (vLLM with its dev endpoints, the sim),
`POST /flush_cache` (SGLang), then llama.cpp's slots: `GET /slots` and `POST /slots/{id}?action=erase` for each
(llama.cpp answers 501 unless it was started with `--slot-save-path`; the statuses are recorded). llama.cpp keeps
a host-memory prompt cache beside its slots (`--cache-ram`), which erasing a slot leaves alone: the run's own
`cache_n` figures show whether the cold run really started cold.
"""

from __future__ import annotations

from evalkit.addresses import server_root
from evalkit.client import auxiliary
from evalkit.load.summary_records import CacheResetJson, ResetTry


async def reset_prefix_cache(base_url: str, api_key: str | None = None) -> CacheResetJson:
    """`{"reset": bool, "method": ..., "tried": [...]}` after trying each way in turn."""
    root = server_root(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    tried: list[ResetTry] = []
    timeout = auxiliary.ClientTimeout(total=30)
    async with auxiliary.session(headers, timeout) as session:
        for path in ("/reset_prefix_cache", "/flush_cache"):
            status = await _post(session, root + path)
            tried.append({"url": root + path, "status": status})
            if status == 200:
                return {"reset": True, "method": path, "tried": tried}
        try:
            async with session.get(root + "/slots") as resp:
                slots = await auxiliary.read_json(resp) if resp.status == 200 else None
                tried.append({"url": root + "/slots", "status": resp.status})
        except (auxiliary.ClientError, TimeoutError, ValueError) as e:
            slots = None
            tried.append({"url": root + "/slots", "error": type(e).__name__})
        if isinstance(slots, list) and slots:
            ok = True
            for slot in slots:
                if not isinstance(slot, dict):
                    continue
                url = f"{root}/slots/{slot.get('id')}?action=erase"
                status = await _post(session, url)
                tried.append({"url": url, "status": status})
                ok = ok and status == 200
            return {"reset": ok, "method": "llama.cpp slots erase", "tried": tried}
    return {"reset": False, "method": None, "tried": tried}


async def _post(session: auxiliary.ClientSession, url: str) -> int | None:
    try:
        async with session.post(url) as resp:
            await auxiliary.read_body(resp)
            return resp.status
    except (auxiliary.ClientError, TimeoutError):
        return None
