// Redis Cluster's parts (stores/redis/cluster_map.hpp). The bytes after the first are read as RESP by
// hiredis' redisReader (as a connection reads a node's reply), and every reply goes to both slot-map parsers
// (CLUSTER SLOTS, CLUSTER SHARDS) and, when it is an error, to the redirect and retry parsers; the same bytes
// as text go to parse_redirect too, and as a key to key_slot. The views read are completed from each other
// (fill_unowned, both orders, and from the previous reply's), and every reply's head is at most 200 bytes. The first
// byte chooses the host the reply came from (one, or none) and whether CLUSTER SHARDS is read for TLS ports. A map must
// hold together whatever the reply: every owned slot's master exists, every master owns a slot and has a host and a
// port.
#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "check.hpp"
#include "stores/redis/cluster_map.hpp"

namespace {

void check_endpoint(const floodwall::RedisEndpoint &e) {
  FW_FUZZ_CHECK(!e.host.empty() && e.host.size() <= 255 && e.host != "?");
  for (char c : e.host) FW_FUZZ_CHECK(c > ' ' && c <= '~');  // what a connection can take: no space, no NUL
  FW_FUZZ_CHECK(e.port >= 1 && e.port <= 65535);
}

void check_map(const std::optional<floodwall::ClusterMap> &m) {
  if (!m) return;
  FW_FUZZ_CHECK(m->masters.size() <= floodwall::kClusterSlots);
  std::vector<bool> owns(m->masters.size());
  size_t owned = 0;
  for (uint16_t o : m->owner) {
    if (o == floodwall::ClusterMap::kUnowned) continue;
    FW_FUZZ_CHECK(o < m->masters.size());
    owns[o] = true;
    owned++;
  }
  FW_FUZZ_CHECK(owned == m->owned_slots());
  for (size_t i = 0; i < m->masters.size(); i++) {
    FW_FUZZ_CHECK(owns[i]);
    check_endpoint(m->masters[i].endpoint);
    for (const floodwall::RedisEndpoint &r : m->masters[i].replicas) check_endpoint(r);
  }
}

// `a` completed from `b`: a map that holds together, every slot `a` owns with the master it had there, every
// other slot `b` owns with the master it has there (by endpoint), nothing else owned.
void check_filled(const floodwall::ClusterMap &a, const floodwall::ClusterMap &b) {
  floodwall::ClusterMap m = floodwall::fill_unowned(a, b);
  check_map(m);
  FW_FUZZ_CHECK(m.masters.size() <= a.masters.size() + b.masters.size());
  for (size_t i = 0; i < a.masters.size(); i++) FW_FUZZ_CHECK(m.masters[i].id == a.masters[i].id);
  for (uint16_t s = 0; s < floodwall::kClusterSlots; s++) {
    const floodwall::ClusterNode *from = a.master_of(s) ? a.master_of(s) : b.master_of(s);
    const floodwall::ClusterNode *got = m.master_of(s);
    FW_FUZZ_CHECK((from == nullptr) == (got == nullptr));
    if (from) FW_FUZZ_CHECK(got->endpoint.host == from->endpoint.host && got->endpoint.port == from->endpoint.port);
  }
}

void check_redirect(std::string_view e) {
  std::optional<floodwall::Redirect> r = floodwall::parse_redirect(e);
  if (r) {
    FW_FUZZ_CHECK(r->slot < floodwall::kClusterSlots);
    FW_FUZZ_CHECK(r->to.port >= 1 && r->to.port <= 65535 && r->to.host != "?");
    FW_FUZZ_CHECK(e.starts_with(r->ask ? "ASK " : "MOVED "));
  }
  (void)floodwall::is_cluster_down(e);
  (void)floodwall::is_try_again(e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const std::string_view from = (data[0] & 1) ? "" : "10.0.0.7";
  const bool tls = data[0] & 2;
  data++;
  size--;
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  check_redirect(bytes);
  FW_FUZZ_CHECK(floodwall::key_slot(bytes) < floodwall::kClusterSlots);
  if (declares_huge_array(data, size)) return 0;

  std::optional<floodwall::ClusterMap> previous;  // the last reply's view, for the next to complete
  redisReader *reader = redisReaderCreate();
  FW_FUZZ_CHECK(reader != nullptr);
  if (redisReaderFeed(reader, bytes.data(), bytes.size()) == REDIS_OK) {
    while (true) {
      void *reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK || !reply) break;
      auto *r = static_cast<redisReply *>(reply);
      std::optional<floodwall::ClusterMap> slots = floodwall::parse_cluster_slots(r, from);
      std::optional<floodwall::ClusterMap> shards = floodwall::parse_cluster_shards(r, from, tls);
      check_map(slots);
      check_map(shards);
      // Both views of one reply completed from each other, in both orders, and from the one before.
      if (slots && shards) {
        check_filled(*shards, *slots);
        check_filled(*slots, *shards);
      }
      if (previous && (slots || shards)) check_filled(*previous, slots ? *slots : *shards);
      if (slots || shards) previous = slots ? std::move(slots) : std::move(shards);
      FW_FUZZ_CHECK(floodwall::reply_head(r).size() <= 200);
      if (r->type == REDIS_REPLY_ERROR) check_redirect(std::string_view(r->str, r->len));
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
  return 0;
}
