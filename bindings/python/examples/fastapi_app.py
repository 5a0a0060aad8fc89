import os, uvicorn
from fastapi import FastAPI
from floodwall import Floodwall
from floodwall.asgi import FloodwallMiddleware

API_KEYS = {"k-demo-1", "k-demo-2"}  # your key store: a key you issued is its own tenant, others the address
app = FastAPI()
app.add_middleware(FloodwallMiddleware, client=Floodwall({"request_rate": {"rate": 5, "burst": 10}}),
                   verify=lambda key, scope: key in API_KEYS)

@app.get("/hello")
async def hello():
    return {"hello": "world"}

if __name__ == "__main__":
    uvicorn.run(app, port=int(os.environ.get("PORT", "8000")))
