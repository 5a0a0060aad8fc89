"""The Django project tests/python/test_django.py serves under gunicorn and uvicorn: its policy comes from
the FLOODWALL_POLICY environment variable (JSON); FLOODWALL_EXTRA (JSON) adds options or, with
{"broken": ...}, replaces the whole setting (the ImproperlyConfigured tests)."""

import json
import os

DEBUG = False
SECRET_KEY = "test-only"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "fwsite.urls"
USE_TZ = True
MIDDLEWARE = ["floodwall.django.FloodwallMiddleware"]
LOGGING = {"version": 1, "disable_existing_loggers": False}

extra = json.loads(os.environ.get("FLOODWALL_EXTRA", "{}"))
if "broken" in extra:
    if extra["broken"] is not None:
        FLOODWALL = extra["broken"]
else:
    FLOODWALL = {"policy": json.loads(os.environ["FLOODWALL_POLICY"]), **extra,
                 "verify": lambda key, request: key == "k-known"}
