import os, uvicorn
from fastapi import FastAPI
from floodwall import Floodwall
from floodwall.asgi import FloodwallMiddleware

app = FastAPI()
app.add_middleware(FloodwallMiddleware, client=Floodwall({"request_rate": {"rate": 5, "burst": 10}}))

@app.get("/hello")
async def hello():
    return {"hello": "world"}

if __name__ == "__main__":
    uvicorn.run(app, port=int(os.environ.get("PORT", "8000")))
