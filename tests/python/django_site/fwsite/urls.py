import asyncio
import threading
import time

from django.http import JsonResponse, StreamingHttpResponse
from django.urls import path, re_path
from django.views import View

import floodwall.django

lock = threading.Lock()
seen = {"now": 0, "most": 0}


def hello(request):
    return JsonResponse({"hello": "world"})


async def ahello(request):
    return JsonResponse({"hello": "async"})


def order(request, id):
    return JsonResponse({"order": id})


def legacy(request, id):
    return JsonResponse({"legacy": id})


def boom(request):
    raise RuntimeError("the view failed")


def slow(request, n):
    with lock:
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
    try:
        time.sleep(0.5)
    finally:
        with lock:
            seen["now"] -= 1
    return JsonResponse({"n": n})


async def aslow(request, n):
    with lock:
        seen["now"] += 1
        seen["most"] = max(seen["most"], seen["now"])
    try:
        await asyncio.sleep(0.5)
    finally:
        with lock:
            seen["now"] -= 1
    return JsonResponse({"n": n})


def stream(request):
    def chunks():
        for i in range(200):
            yield b"x" * 65536
            time.sleep(0.01)

    return StreamingHttpResponse(chunks())


async def astream(request):
    async def chunks():
        for i in range(200):
            yield b"x" * 65536
            await asyncio.sleep(0.01)

    return StreamingHttpResponse(chunks())


@floodwall.django.limit(cost=5)
def report(request):
    return JsonResponse({"report": "ready"})


@floodwall.django.limit(skip=True)
def health(request):
    return JsonResponse({"ok": True})


@floodwall.django.limit(critical=True)
def critical(request):
    return JsonResponse({"critical": True})


@floodwall.django.limit(cost=3)
class Export(View):
    def get(self, request):
        return JsonResponse({"export": "ready"})


@floodwall.django.limit(skip=True)
def stats(request):
    fw = floodwall.django.client()
    return JsonResponse({"most": seen["most"], "now": seen["now"],
                         "in_flight": fw.admin.show("ip:127.0.0.1").get("concurrency", {}).get("in_flight"),
                         "routes": sorted(fw.metrics()["routes"])})


@floodwall.django.limit(skip=True)
def block(request):
    floodwall.django.client().admin.block("ip:127.0.0.1", seconds=60)
    return JsonResponse({"blocked": True})


urlpatterns = [
    path("hello", hello),
    path("ahello", ahello),
    path("orders/<int:id>/", order),
    re_path(r"^legacy/(?P<id>[0-9]+)$", legacy),
    path("boom", boom),
    path("slow/<int:n>/", slow),
    path("aslow/<int:n>/", aslow),
    path("stream", stream),
    path("astream", astream),
    path("report", report),
    path("export", Export.as_view()),
    path("health", health),
    path("critical", critical),
    path("_stats", stats),
    path("_block", block),
]
