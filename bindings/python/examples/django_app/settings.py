# A whole Django project in three files: settings.py, urls.py (its views too), and wsgi/asgi below.
# gunicorn django_app.wsgi   |   uvicorn django_app.asgi:application
DEBUG = False
SECRET_KEY = "example-only-not-secret"
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "django_app.urls"
MIDDLEWARE = ["floodwall.django.FloodwallMiddleware"]

API_KEYS = {"k-demo-1", "k-demo-2"}  # your key store: a key you issued is its own tenant, others the address
FLOODWALL = {
    "policy": {"request_rate": {"rate": 5, "burst": 10, "limits": [
        {"name": "orders", "routes": ["/orders", "/orders/*"], "rate": 1, "burst": 2}]}},
    "verify": lambda key, request: key in API_KEYS,
}
