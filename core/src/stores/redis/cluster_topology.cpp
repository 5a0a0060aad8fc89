// Reading the Redis Cluster's slot map (ClusterStore's topology, apart from its calls): each node's view
// from CLUSTER SHARDS and CLUSTER SLOTS, views with holes completed from the other nodes, and what is said
// once when no view is whole or a reply is no slot map.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>

#include "stores/redis/cluster_store.hpp"
#include "stores/redis/resp.hpp"
#include "util/clock.hpp"

namespace floodwall {

// One node's view: CLUSTER SHARDS, completed from CLUSTER SLOTS when it leaves slots unowned or cannot be
// read (Redis 7.2-7.4 list a shard without its slots after a second failover, redis/redis#13414, while
// their CLUSTER SLOTS is right: what redis-py, ioredis and Jedis read); CLUSTER SLOTS alone where SHARDS is
// unknown (before Redis 7). Where both name a master for a slot, SHARDS' is kept (one node's state: they
// differ only by such a bug).
bool ClusterStore::read_map(const RedisEndpoint &at, ClusterMap &map, FailReason &why, std::string &what) {
  Connection c;
  auto deadline = [&] { return now_us() + policy_.redis.connect_timeout_ms * 1000; };
  if (!c.connect_blocking(at, tls_.get(), deadline())) {
    why = c.failure() == FailReason::config ? FailReason::config : FailReason::connection;
    what = c.error();
    return false;
  }
  auto ask = [&](std::initializer_list<std::string_view> args) {
    return c.roundtrip(resp_format(std::vector<std::string_view>(args)), deadline());
  };
  if (!url_.password.empty()) {
    redisReply *r = url_.user.empty() ? ask({"AUTH", url_.password}) : ask({"AUTH", url_.user, url_.password});
    if (!r) {
      why = FailReason::connection;
      what = "no reply to AUTH";
      return false;
    }
    bool refused = r->type == REDIS_REPLY_ERROR;
    if (refused) what = message_excerpt(std::string_view(r->str, r->len));
    freeReplyObject(r);
    if (refused) {
      why = FailReason::config;
      return false;
    }
  }
  std::optional<ClusterMap> got;
  for (bool shards : {true, false}) {
    const char *command = shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS";
    redisReply *r = shards ? ask({"CLUSTER", "SHARDS"}) : ask({"CLUSTER", "SLOTS"});
    if (!r) {
      if (got) break;  // SHARDS' map, as far as it goes
      why = FailReason::connection;
      what = "no reply to " + std::string(command);
      return false;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      std::string_view err(r->str, r->len);  // r's: read before r is freed
      bool disabled = err.find("cluster support disabled") != std::string_view::npos;
      bool unknown = err.find("nknown subcommand") != std::string_view::npos;
      bool config = resp_is_config_error(err);
      if (!got) {
        what = message_excerpt(err);
        why = disabled || config ? FailReason::config : FailReason::error;
      }
      freeReplyObject(r);
      if (shards && (unknown || (!disabled && !config))) continue;  // SLOTS may answer
      if (got) break;
      return false;
    }
    std::optional<ClusterMap> m = shards ? parse_cluster_shards(r, at.host, url_.tls) : parse_cluster_slots(r, at.host);
    if (!m) say_unreadable(at, command, r);
    freeReplyObject(r);
    if (m) got = got ? fill_unowned(std::move(*got), *m) : std::move(*m);
    if (got && got->owned_slots() == kClusterSlots) break;
  }
  if (!got) {
    if (what.empty()) what = "a slot map it could not read";
    why = why == FailReason::config ? why : FailReason::error;
    return false;
  }
  map = std::move(*got);
  return true;
}

void ClusterStore::say_unreadable(const RedisEndpoint &at, std::string_view command, const redisReply *r) {
  if (!unreadable_said_.insert(endpoint_name(at) + " " + std::string(command)).second) return;
  std::fprintf(stderr,
               "floodwall: Redis Cluster node %s sent a %s reply that is no slot map (malformed, or contradicting "
               "itself), left out of the map: %s\n",
               endpoint_name(at).c_str(), std::string(command).c_str(), message_excerpt(reply_head(r)).c_str());
}

bool ClusterStore::refresh() {
  // Asked in turn until every slot has a master: the masters known first (the seeds may be gone), the
  // seeds, the other nodes known, then the nodes the views read name (a view that leaves slots unowned is
  // completed from the next: no node's bug leaves a slot without a master another node knows).
  std::vector<RedisEndpoint> ask;
  auto add = [&ask](const RedisEndpoint &e) {
    if (std::none_of(ask.begin(), ask.end(), [&](const RedisEndpoint &a) { return a == e; })) ask.push_back(e);
  };
  for (const RedisStore *s : masters()) add(s->endpoint());
  for (const RedisEndpoint &seed : url_.nodes) add(seed);
  {
    std::shared_lock lock(nodes_mu_);
    for (const auto &n : nodes_) add(n->at);
  }
  ClusterMap map;
  bool got = false;
  FailReason why = FailReason::connection;
  std::string what, first_refusal, answered;
  // Completing a view with holes is worth two connection timeouts, not a tour of 16 unreachable nodes: the
  // calls handed off by a MOVED wait for this refresh, and during a real CLUSTERDOWN it repeats.
  const int64_t complete_by = now_us() + 2 * policy_.redis.connect_timeout_ms * 1000;
  for (size_t k = 0; k < ask.size() && k < kMostAsked && !(got && now_us() > complete_by); k++) {
    const RedisEndpoint at = ask[k];  // a copy: add() may grow `ask`
    FailReason w = FailReason::connection;
    std::string text;
    ClusterMap view;
    if (!read_map(at, view, w, text)) {
      if (w != FailReason::connection) {
        why = w;
        if (first_refusal.empty()) first_refusal = endpoint_name(at) + ": " + text;
      }
      if (what.empty()) what = endpoint_name(at) + ": " + text;
      continue;
    }
    answered += (answered.empty() ? "" : ", ") + endpoint_name(at);
    map = got ? fill_unowned(std::move(map), view) : std::move(view);
    got = true;
    if (map.owned_slots() == kClusterSlots) break;
    for (const ClusterNode &m : map.masters) {
      add(m.endpoint);
      for (const RedisEndpoint &r : m.replicas) add(r);
    }
  }
  if (!got) {
    map_failure_.store(why);
    if (!map_known_.load()) {
      if (why != FailReason::connection) {
        if (!refused_said_.exchange(true))
          std::fprintf(stderr,
                       "floodwall: no slot map from the Redis Cluster (%s); every decision is the fallback's until a "
                       "node gives one (check that the seeds are cluster nodes, the user and password, and "
                       "redis.tls)\n",
                       first_refusal.c_str());
      } else if (!unreachable_said_.exchange(true)) {
        std::string seeds;
        for (const RedisEndpoint &s : url_.nodes) seeds += (seeds.empty() ? "" : ", ") + endpoint_name(s);
        std::fprintf(stderr,
                     "floodwall: no node of the Redis Cluster answered (seeds %s; %s); every decision is the "
                     "fallback's until one does (retrying in the background)\n",
                     seeds.c_str(), what.c_str());
      }
    }
    return false;
  }
  size_t owned = map.owned_slots();
  if (owned == kClusterSlots) {
    uncovered_said_ = false;
  } else if (!uncovered_said_) {
    // A real CLUSTERDOWN (slots no node assigns), or every node asked is wrong the same way: those slots keep
    // the master they had (its CLUSTERDOWN, or a MOVED, says more), and a tenant of one that had none is the
    // fallback's, counted as reason cluster. Said once until every slot has a master again.
    uncovered_said_ = true;
    std::fprintf(stderr,
                 "floodwall: %zu of the 16384 slots of the Redis Cluster have no master in the view of any node asked "
                 "(%s); they keep the master they had, and a tenant of one that had none is decided by the fallback "
                 "(reason cluster) until a node names one\n",
                 kClusterSlots - owned, answered.c_str());
  }
  // A store for each master (made and connected first, all at once), then the table.
  std::vector<RedisStore *> by_master(map.masters.size(), nullptr);
  for (size_t i = 0; i < map.masters.size(); i++) by_master[i] = node_at(map.masters[i].endpoint, true);
  for (size_t slot = 0; slot < kClusterSlots; slot++) {
    uint16_t i = map.owner[slot];
    if (i == ClusterMap::kUnowned || !by_master[i]) continue;  // kept: the master it had, if any
    owner_[slot].store(by_master[i], std::memory_order_release);
  }
  map_known_.store(true);
  map_failure_.store(FailReason::none);
  return true;
}

}  // namespace floodwall
