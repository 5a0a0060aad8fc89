'use strict';
// One Node process of the polyglot acquire test: THREADS loops (concurrent promises), each acquiring EACH
// times from one limit on Redis, from START (epoch seconds) on; one line per acquire:
// "node <went_us> <allowed> <waited_s>".
const path = require('node:path');
const floodwall = require(process.env.FW_NODE_PACKAGE || path.resolve(__dirname, '../../..'));

const [policy, start, loops, each] = [JSON.parse(process.argv[2]), Number(process.argv[3]), Number(process.argv[4]),
  Number(process.argv[5])];
const fw = new floodwall.Floodwall(policy);
const lines = [];

async function caller() {
  for (let i = 0; i < each; i++) {
    const d = await fw.acquire({ tenant: 'partner-api', maxWait: 5000 });
    const went = Math.round((performance.timeOrigin + performance.now()) * 1000);
    lines.push(`node ${went} ${d.allowed ? 1 : 0} ${(d.waitedMs / 1000).toFixed(6)}`);
    fw.release(d);
  }
}

(async () => {
  while (Date.now() / 1000 < start) await new Promise((r) => setTimeout(r, 1));
  await Promise.all(Array.from({ length: loops }, caller));
  fw.close();
  process.stdout.write(lines.join('\n') + '\n');
})();
