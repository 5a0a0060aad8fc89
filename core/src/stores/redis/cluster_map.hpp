// Redis Cluster's building blocks, on their own (redis+cluster:// puts them together): which slot a key
// hashes to, which master owns each slot (read from CLUSTER SLOTS or CLUSTER SHARDS), and what a MOVED,
// ASK, CLUSTERDOWN or TRYAGAIN error says, and one view of the map completed from another.
//
// The parsers take whatever a server (or anything pretending to be one) sent: a reply of the wrong shape,
// type or range is nullopt, never a crash, and no reply makes them work more than its size plus the 16384
// slots (fuzz/cluster_map_fuzz.cpp).
//
// A node's host, in either reply, is its preferred endpoint (cluster-preferred-endpoint-type), with two
// substitutes: an empty or nil one (a node that does not know its own address yet, or unknown-endpoint:
// behind a load balancer) is `from_host`, the host the reply came from; "?" (hostname preferred, none set)
// is the node's "ip" beside it (from_host when that is empty too). A node left with no host at all is
// unreachable: a master's slots are then unowned, a replica is left out.
#pragma once

#include <hiredis/hiredis.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stores/redis/url.hpp"

namespace floodwall {

inline constexpr uint16_t kClusterSlots = 16384;

// CRC16-CCITT as Redis Cluster computes it (XMODEM: polynomial 0x1021, initial value 0, no reflection):
// "123456789" is 0x31C3.
uint16_t crc16_xmodem(std::string_view data);

// HASH_SLOT(key): the CRC16 of the key's hash tag, or of the whole key when it has none, mod 16384. The hash
// tag is what lies between the first '{' and the first '}' after it, when that is not empty: "{user1}.a" and
// "x{user1}" share a slot; "foo{}{bar}" hashes whole, "foo{{bar}}zap" hashes "{bar", "foo{bar}{zap}" "bar".
uint16_t key_slot(std::string_view key);

struct ClusterNode {
  RedisEndpoint endpoint;
  std::string id;                       // the node's id; empty when the reply named none (Redis < 4)
  std::vector<RedisEndpoint> replicas;  // as the reply listed them with the master's first range (CLUSTER
                                        // SHARDS: the online ones)
};

struct ClusterMap {
  static constexpr uint16_t kUnowned = 0xFFFF;
  // Each slot's master as an index into `masters`, or kUnowned.
  std::array<uint16_t, kClusterSlots> owner;
  // The masters that own at least one slot, each once, in the order the reply first named them.
  std::vector<ClusterNode> masters;

  ClusterMap() { owner.fill(kUnowned); }
  // The master of `slot` (< 16384); nullptr when it has none.
  const ClusterNode *master_of(uint16_t slot) const {
    uint16_t i = owner[slot];
    return i == kUnowned ? nullptr : &masters[i];
  }
  // How many slots have a master (16384: the whole key space is served).
  size_t owned_slots() const;
};

// CLUSTER SLOTS: [[start, end, [host, port, id, {metadata}], [replica...]...], ...]. The id and the metadata
// (RESP2: an array of names and values, of which "ip" is read) may be missing. Nullopt when the reply is
// not that (an error, a wrong type, a slot out of range, a port out of 1..65535, ranges that overlap, one
// node id at two addresses).
std::optional<ClusterMap> parse_cluster_slots(const redisReply *reply, std::string_view from_host);

// CLUSTER SHARDS (Redis 7): [["slots", [start, end, ...], "nodes", [[name, value, ...], ...]], ...]. A
// shard's master is its node of role "master" with health "online" (none: its slots are unowned, as during
// a failover); its replicas are the nodes of role "replica" that are online. The port is "tls-port" when
// `tls`, else "port" (the other when a node names only one). Fields it does not read may be anything;
// nullopt for a reply of another shape, a field it reads of the wrong type or range, a shard with two
// online masters, ranges that overlap.
std::optional<ClusterMap> parse_cluster_shards(const redisReply *reply, std::string_view from_host, bool tls = false);

// The slots `map` leaves unowned, filled from `more`: another view of the same cluster (CLUSTER SLOTS beside
// a CLUSTER SHARDS that listed a shard without its slots, as Redis 7.2-7.4 do after a second failover,
// redis/redis#13414; or another node's view). A slot `map` owns keeps its master whatever `more` says: the
// first source asked is trusted, and a MOVED corrects it. A master of `more` that fills a slot is the one
// of `map` at the same endpoint when there is one (its id and replicas as `map` has them), else added after
// the others. Costs the 16384 slots plus the masters, whatever the maps hold.
ClusterMap fill_unowned(ClusterMap map, const ClusterMap &more);

// A reply as RESP (as a server would have sent it), cut to its first `limit` bytes: what a topology reply
// that could not be read said, for a message (pass it through message_excerpt()). Null is "<no reply>".
std::string reply_head(const redisReply *reply, size_t limit = 200);

// A MOVED or ASK error (its text as hiredis gives it, without the '-'): "MOVED 3999 127.0.0.1:6381",
// "ASK 3999 127.0.0.1:6381". The endpoint's port follows its last colon ("MOVED 3999 ::1:6381" is ::1; a
// bracketed "[::1]:6381" too); the host may be a name. An empty host (":6381", unknown-endpoint) is kept
// empty: the host of the connection that got the error. Nullopt for anything else, "?:6381" (a node with
// no endpoint to give) included.
struct Redirect {
  bool ask = false;  // ASK: this one command (after ASKING) goes there; MOVED: the slot lives there now
  uint16_t slot = 0;
  RedisEndpoint to;
};
std::optional<Redirect> parse_redirect(std::string_view error);

// "CLUSTERDOWN ...": the cluster cannot serve (slots unowned, no quorum); retry later.
bool is_cluster_down(std::string_view error);
// "TRYAGAIN ...": a multi-key command's keys are mid-migration; retry shortly.
bool is_try_again(std::string_view error);

}  // namespace floodwall
