"""An automation's inbound webhook: POST /automations/hooks/<key>/ with

    X-Tessera-Timestamp: <unix seconds>
    X-Tessera-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the webhook's secret>

Checked in this order, each refusal a clear 4xx and nothing run: unknown key (404), body too
large (413), rate limit per automation (429, core.ratelimit), missing headers (400), timestamp
outside the window (401), signature (401, compared in constant time), a signature already seen
within the window (409: a replay; the seen store is Redis, kept twice the window). A delivery
that passes starts a run (202) whose prompt carries the body as untrusted data."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import ratelimit
from core.redis_client import sync_client

from . import runs
from .models import Automation, AutomationRun

SEEN_PREFIX = "tessera:webhook-seen"


def new_credentials() -> tuple[str, str]:
    """A webhook's URL key and its secret (shown once; stored encrypted)."""
    return secrets.token_urlsafe(24), "whsec_" + secrets.token_urlsafe(32)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _refuse(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@csrf_exempt
@require_POST
def receive(request: HttpRequest, key: str) -> JsonResponse:
    automation = Automation.objects.filter(webhook_key=key, trigger=Automation.Trigger.WEBHOOK).first()
    if automation is None or not automation.webhook_secret:
        return _refuse(404, "No webhook here.")
    limit = settings.AUTOMATIONS_WEBHOOK_MAX_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit or len(request.body) > limit:
        return _refuse(413, f"The body is larger than {limit} bytes.")
    if not ratelimit.allow("webhook", automation.pk, settings.AUTOMATIONS_WEBHOOK_PER_MINUTE, window_s=60):
        return _refuse(429, "Too many deliveries to this webhook; try again in a minute.")
    stamp, signature = request.headers.get("X-Tessera-Timestamp", ""), request.headers.get("X-Tessera-Signature", "")
    if not stamp or not signature:
        return _refuse(400, "The X-Tessera-Timestamp and X-Tessera-Signature headers are required.")
    window = settings.AUTOMATIONS_WEBHOOK_WINDOW_S
    # ASCII digits only, and few of them: str.isdigit() admits "²" and 5,000 digits, which int() refuses.
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12) or abs(time.time() - int(stamp)) > window:
        return _refuse(401, f"The timestamp is not within {window} seconds of now.")
    expected = sign(automation.webhook_secret, stamp, request.body)
    if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
        return _refuse(401, "The signature does not match.")
    if not sync_client().set(f"{SEEN_PREFIX}:{automation.pk}:{expected}", "1", nx=True, ex=window * 2):
        return _refuse(409, "This delivery was received already.")
    if not automation.enabled:
        return _refuse(409, "This automation is turned off.")
    with transaction.atomic():
        run = AutomationRun.objects.create(
            automation=automation, origin=AutomationRun.Origin.WEBHOOK, payload=request.body.decode("utf-8", "replace")
        )
        runs.start(run)
    return JsonResponse({"run": run.pk, "status": run.status}, status=202)
