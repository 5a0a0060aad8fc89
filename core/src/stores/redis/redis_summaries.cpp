// The fleet view on Redis (Store::put_summary, engine/fleet_summary.hpp). Each client's summary is a
// string key with a TTL, <prefix>:{~fleetview}:client:<id> (SET ... PX: a client that dies disappears when
// it expires, on Redis' clock), and the sorted set <prefix>:{~fleetview}:clients indexes them by id,
// scored by the writer's expiry in ms (entries more than ten minutes past it are trimmed by each write; a
// reader skips an id whose key has expired). One hash tag for both: on a Cluster they live on the master
// of one slot, so a reader asks one node (no SCAN of every master, which would miss keys during a
// migration and costs a round trip per master), and a write is three commands to one node. "fleetview"
// is no base64url (9 characters), so no tenant's keys share the tag. The commands are those the
// documented ACL allows (SET, ZADD, ZREMRANGEBYSCORE, DEL, ZREM, ZRANGEBYSCORE, GET).
#include <hiredis/hiredis.h>

#include <chrono>

#include "stores/redis/cluster_store.hpp"
#include "stores/redis/redis_admin.hpp"
#include "stores/redis/redis_store.hpp"
#include "stores/redis/resp.hpp"
#include "util/errors.hpp"

namespace floodwall {

namespace {

constexpr int64_t kIndexSlackMs = 600'000;  // how long past its expiry an id stays in the index
constexpr size_t kMaxClients = 10'000;      // a reader reads at most this many

std::string index_key(const std::string &prefix) {
  return prefix + ":{~fleetview}:clients";
}

std::string client_key(const std::string &prefix, const std::string &id) {
  return prefix + ":{~fleetview}:client:" + id;
}

void check(const std::vector<ReplyPtr> &replies, const char *what) {
  for (const ReplyPtr &r : replies)
    if (r && r->type == REDIS_REPLY_ERROR)
      throw StoreError(std::string("store: Redis refused ") + what + ": " +
                       message_excerpt(std::string_view(r->str, r->len)));
}

void put(const AdminRunner &node, const std::string &prefix, const std::string &id, const std::string &text,
         int64_t ttl_ms) {
  std::string key = client_key(prefix, id), index = index_key(prefix);
  if (text.empty()) {
    check(node({{"DEL", key}, {"ZREM", index, id}}), "the removal of a client's summary");
    return;
  }
  int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::string trim_below = "(";  // appended, not "(" + ...: GCC 12's -O3 -Wrestrict misreads that
  trim_below += std::to_string(now_ms - kIndexSlackMs);
  check(node({{"SET", key, text, "PX", std::to_string(ttl_ms)},
              {"ZADD", index, std::to_string(now_ms + ttl_ms), id},
              {"ZREMRANGEBYSCORE", index, "-inf", trim_below}}),
        "a client's summary");
}

std::vector<std::string> read_all(const AdminRunner &node, const std::string &prefix) {
  auto ids = node({{"ZRANGEBYSCORE", index_key(prefix), "-inf", "+inf", "LIMIT", "0", std::to_string(kMaxClients)}});
  check(ids, "a read of the clients' index");
  std::vector<std::vector<std::string>> gets;
  const redisReply *r = ids.front().get();
  for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
    const redisReply *e = r->element[i];
    if (e && e->type == REDIS_REPLY_STRING) gets.push_back({"GET", client_key(prefix, std::string(e->str, e->len))});
  }
  std::vector<std::string> out;
  if (gets.empty()) return out;
  auto texts = node(gets);
  check(texts, "a read of the clients' summaries");
  for (const ReplyPtr &t : texts)
    if (t && t->type == REDIS_REPLY_STRING) out.emplace_back(t->str, t->len);  // nil: expired
  return out;
}

// <prefix> from <prefix>:flags, the one key name the store shows that holds it alone.
std::string prefix_of(const std::string &flags_key) {
  return flags_key.substr(0, flags_key.size() - std::string_view(":flags").size());
}

}  // namespace

void RedisStore::put_summary(const std::string &id, const std::string &text, int64_t ttl_ms) {
  put([this](const auto &cmds) { return admin_run(cmds); }, prefix_of(flags_key()), id, text, ttl_ms);
}

std::vector<std::string> RedisStore::summaries() {
  return read_all([this](const auto &cmds) { return admin_run(cmds); }, prefix_of(flags_key()));
}

void ClusterStore::put_summary(const std::string &id, const std::string &text, int64_t ttl_ms) {
  put(runner_of_key(index_key(policy_.prefix)), policy_.prefix, id, text, ttl_ms);
}

std::vector<std::string> ClusterStore::summaries() {
  return read_all(runner_of_key(index_key(policy_.prefix)), policy_.prefix);
}

}  // namespace floodwall
