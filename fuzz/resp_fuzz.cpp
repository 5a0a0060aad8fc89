// The RESP side of the Redis store. The store reads every reply with hiredis' redisReader (the same
// reader its connections use, fed here in chunks the input chooses, as a socket would split them), then
// gives every reply to the store's own parsers of admit replies (each way the store can ask: with or
// without a slot, an enforced bucket or not) and of lease replies. The same bytes also go to
// parse_redis_url, which reads the URL of the policy's "store" in each of its forms.
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "check.hpp"
#include "stores/redis/redis_store.hpp"
#include "stores/store_factory.hpp"

namespace {

// What the store relies on when it reads a reply: lengths that match, elements that exist, bounded depth.
size_t walk(const redisReply *r, int depth) {
  FW_FUZZ_CHECK(r != nullptr && depth <= 8);
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR: FW_FUZZ_CHECK(r->str != nullptr && r->str[r->len] == '\0'); return r->len;
    case REDIS_REPLY_ARRAY: {
      FW_FUZZ_CHECK(r->elements == 0 || r->element != nullptr);
      size_t n = 0;
      for (size_t i = 0; i < r->elements; i++) n += walk(r->element[i], depth + 1);
      // The shape of an admit with a slot: six elements, each read as an integer when it is one.
      if (r->elements == 6) {
        long long v = 0;
        for (size_t i = 0; i < 6; i++) v += r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : 0;
        (void)v;
      }
      return n;
    }
    case REDIS_REPLY_INTEGER:
    case REDIS_REPLY_NIL: return 0;
    default: FW_FUZZ_CHECK(!"a reply type the RESP2 reader does not make");
  }
  return 0;
}

void read_replies(const uint8_t *data, size_t size) {
  if (declares_huge_array(data, size)) return;
  redisReader *reader = redisReaderCreate();
  FW_FUZZ_CHECK(reader != nullptr);
  // The first byte sets the chunk size: 1 feeds byte by byte, the worst split a socket could make.
  size_t chunk = size ? (data[0] % 64) + 1 : 1;
  size_t off = size ? 1 : 0;
  bool failed = false;
  while (off < size && !failed) {
    size_t n = std::min(chunk, size - off);
    if (redisReaderFeed(reader, reinterpret_cast<const char *>(data) + off, n) != REDIS_OK) break;
    off += n;
    while (true) {
      void *reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK) {
        failed = true;  // a protocol error: the store drops the connection
        break;
      }
      if (!reply) break;  // needs more bytes
      auto *r = static_cast<redisReply *>(reply);
      walk(r, 0);
      for (size_t rules : {size_t{0}, size_t{1}, size_t{3}}) {
        for (bool slot : {false, true}) {
          for (bool enforce : {false, true}) {
            floodwall::AdmitResult res;
            if (!floodwall::parse_admit_reply(r, slot, rules, enforce, res)) continue;
            FW_FUZZ_CHECK(res.decided);
            // The control record's answers consume nothing; any other names every rule asked.
            if (res.blocked || res.other_tier)
              FW_FUZZ_CHECK(!res.committed && !(res.blocked && res.other_tier));
            else
              FW_FUZZ_CHECK(res.rules.n == rules);
            // A request-rate-only admit that an enforced bucket refused did not commit; a dark one did.
            if (r->type == REDIS_REPLY_INTEGER)
              FW_FUZZ_CHECK(res.committed == (res.rate_ok || !enforce) && res.tokens_m >= 0);
          }
        }
      }
      floodwall::LeaseResult lease;
      if (floodwall::parse_lease_reply(r, lease)) FW_FUZZ_CHECK(lease.decided);
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_replies(data, size);
  std::string url(reinterpret_cast<const char *>(data), size);
  for (const std::string &u : {url, "redis://" + url, "rediss+sentinel://" + url, "redis+cluster://" + url}) {
    try {
      floodwall::RedisUrl r = floodwall::parse_redis_url(u);
      FW_FUZZ_CHECK(!r.nodes.empty() && r.db >= 0 && r.db <= (1 << 20));
      for (const floodwall::RedisEndpoint &e : r.nodes) FW_FUZZ_CHECK(e.port >= 1 && e.port <= 65535);
      FW_FUZZ_CHECK(r.kind != floodwall::RedisUrl::Kind::sentinel || !r.master.empty());
    } catch (const floodwall::StoreError &) {
      // the expected answer to a URL it cannot use
    }
    (void)floodwall::redact_url(u);
  }
  return 0;
}
