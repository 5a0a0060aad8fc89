#include "stores/redis/cluster_map.hpp"

#include <algorithm>
#include <bitset>
#include <charconv>
#include <unordered_map>
#include <utility>

namespace floodwall {

namespace {

constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; i++) {
    unsigned c = i << 8;
    for (int b = 0; b < 8; b++) c = (c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1;
    t[i] = static_cast<uint16_t>(c);
  }
  return t;
}

constexpr std::array<uint16_t, 256> kCrc16 = make_crc16_table();
static_assert(kCrc16[1] == 0x1021 && kCrc16[255] == 0x1EF0, "the CRC16-CCITT (XMODEM) table");

using Range = std::pair<uint16_t, uint16_t>;

std::string_view text(const redisReply *r) {
  return std::string_view(r->str ? r->str : "", r->str ? r->len : 0);
}
bool is_string(const redisReply *r) {
  return r && r->type == REDIS_REPLY_STRING;
}
bool is_array(const redisReply *r) {
  return r && r->type == REDIS_REPLY_ARRAY && (r->elements == 0 || r->element);
}
bool is_integer(const redisReply *r) {
  return r && r->type == REDIS_REPLY_INTEGER;
}

// A host as a connection would take it: printable ASCII with no space, at most a DNS name's length.
bool valid_host(std::string_view h) {
  if (h.size() > 255) return false;
  for (char c : h)
    if (c <= ' ' || c > '~') return false;
  return true;
}

enum class Host { ok, unreachable, malformed };

// The host a node is reached at (see the header): `endpoint` nullopt when nil, `ip` nullopt when not given.
Host resolve_host(std::optional<std::string_view> endpoint, std::optional<std::string_view> ip,
                  std::string_view from_host, std::string &out) {
  std::string_view h = endpoint.value_or(std::string_view());
  if (h == "?") {
    if (!ip) return Host::unreachable;
    h = *ip;
  }
  if (h.empty()) h = from_host;
  if (!valid_host(h)) return Host::malformed;
  if (h.empty() || h == "?") return Host::unreachable;
  out.assign(h);
  return Host::ok;
}

// A port as a reply gives it: 0 is none (unreachable), outside 0..65535 malformed.
bool valid_port(long long p) {
  return p >= 0 && p <= 65535;
}

// The map as it is assembled: slots claimed by a range (owned or not: no two ranges may overlap), the
// masters by id (or, with none, by endpoint).
class MapBuilder {
 public:
  // Claims `ranges` for `master` (nullptr: a master that cannot be reached, or none); false when one of the
  // slots was claimed before or the master's id was named at another endpoint.
  bool add(const std::vector<Range> &ranges, ClusterNode *master) {
    for (const Range &r : ranges) {
      for (unsigned s = r.first; s <= r.second; s++) {
        if (claimed_[s]) return false;
        claimed_[s] = true;
      }
    }
    if (!master || ranges.empty()) return true;
    std::string key = master->id.empty() ? "e" + master->endpoint.host + ":" + std::to_string(master->endpoint.port)
                                         : "i" + master->id;
    auto [it, fresh] = index_.try_emplace(std::move(key), static_cast<uint16_t>(map_.masters.size()));
    if (fresh) {
      map_.masters.push_back(std::move(*master));
    } else {
      const RedisEndpoint &known = map_.masters[it->second].endpoint;
      if (known.host != master->endpoint.host || known.port != master->endpoint.port) return false;
    }
    for (const Range &r : ranges)
      for (unsigned s = r.first; s <= r.second; s++) map_.owner[s] = it->second;
    return true;
  }
  ClusterMap take() { return std::move(map_); }

 private:
  ClusterMap map_;
  std::bitset<kClusterSlots> claimed_;
  std::unordered_map<std::string, uint16_t> index_;
};

bool slot_range(const redisReply *start, const redisReply *end, Range &out) {
  if (!is_integer(start) || !is_integer(end)) return false;
  if (start->integer < 0 || start->integer > end->integer || end->integer >= kClusterSlots) return false;
  out = {static_cast<uint16_t>(start->integer), static_cast<uint16_t>(end->integer)};
  return true;
}

// One node of CLUSTER SLOTS: [host, port, id?, metadata?, ...].
Host slots_node(const redisReply *r, std::string_view from_host, ClusterNode &out) {
  if (!is_array(r) || r->elements < 2) return Host::malformed;
  const redisReply *host = r->element[0], *port = r->element[1];
  std::optional<std::string_view> endpoint;
  if (is_string(host)) {
    endpoint = text(host);
  } else if (!host || host->type != REDIS_REPLY_NIL) {
    return Host::malformed;
  }
  if (!is_integer(port) || !valid_port(port->integer)) return Host::malformed;
  if (r->elements > 2) {
    if (!is_string(r->element[2])) return Host::malformed;
    out.id.assign(text(r->element[2]));
  }
  std::optional<std::string_view> ip;
  if (r->elements > 3) {
    const redisReply *meta = r->element[3];
    if (!is_array(meta) || meta->elements % 2) return Host::malformed;
    for (size_t i = 0; i < meta->elements; i += 2) {
      if (!is_string(meta->element[i])) return Host::malformed;
      if (text(meta->element[i]) != "ip") continue;
      if (!is_string(meta->element[i + 1])) return Host::malformed;
      ip = text(meta->element[i + 1]);
    }
  }
  Host h = resolve_host(endpoint, ip, from_host, out.endpoint.host);
  if (h != Host::ok) return h;
  if (port->integer == 0) return Host::unreachable;
  out.endpoint.port = static_cast<int>(port->integer);
  return Host::ok;
}

// One node of CLUSTER SHARDS: [name, value, ...], and what it is.
struct ShardsNode {
  ClusterNode node;
  bool master = false, online = false;
};

Host shards_node(const redisReply *r, std::string_view from_host, bool tls, ShardsNode &out) {
  if (!is_array(r) || r->elements % 2) return Host::malformed;
  std::optional<std::string_view> endpoint, ip, role, health;
  long long port = -1, tls_port = -1;
  bool endpoint_given = false;
  for (size_t i = 0; i < r->elements; i += 2) {
    const redisReply *k = r->element[i], *v = r->element[i + 1];
    if (!is_string(k) || !v) return Host::malformed;
    std::string_view key = text(k);
    if (key == "port" || key == "tls-port") {
      if (!is_integer(v) || !valid_port(v->integer)) return Host::malformed;
      (key == "port" ? port : tls_port) = v->integer;
      continue;
    }
    if (key == "endpoint" && v->type == REDIS_REPLY_NIL) {
      endpoint_given = true;
      endpoint = std::nullopt;  // as CLUSTER SLOTS says unknown-endpoint
      continue;
    }
    std::optional<std::string_view> *field = key == "endpoint" ? &endpoint
                                             : key == "ip"     ? &ip
                                             : key == "role"   ? &role
                                             : key == "health" ? &health
                                                               : nullptr;
    if (key != "id" && !field) continue;  // a field it does not read: anything
    if (!is_string(v)) return Host::malformed;
    if (field) {
      *field = text(v);
    } else {
      out.node.id.assign(text(v));
    }
    endpoint_given |= key == "endpoint";
  }
  if (!role || !health) return Host::malformed;
  out.master = *role == "master";
  out.online = *health == "online";
  // No "endpoint" field at all: the node's ip, as "?" would say.
  if (!endpoint_given) endpoint = "?";
  Host h = resolve_host(endpoint, ip, from_host, out.node.endpoint.host);
  if (h != Host::ok) return h;
  long long wanted = tls ? tls_port : port, other = tls ? port : tls_port;
  long long p = wanted > 0 ? wanted : other;
  if (p <= 0) return Host::unreachable;
  out.node.endpoint.port = static_cast<int>(p);
  return Host::ok;
}

}  // namespace

uint16_t crc16_xmodem(std::string_view data) {
  unsigned crc = 0;
  for (unsigned char c : data) crc = ((crc << 8) ^ kCrc16[((crc >> 8) ^ c) & 0xFF]) & 0xFFFF;
  return static_cast<uint16_t>(crc);
}

uint16_t key_slot(std::string_view key) {
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<uint16_t>(crc16_xmodem(key) & (kClusterSlots - 1));
}

size_t ClusterMap::owned_slots() const {
  size_t n = 0;
  for (uint16_t o : owner) n += o != kUnowned;
  return n;
}

std::optional<ClusterMap> parse_cluster_slots(const redisReply *reply, std::string_view from_host) {
  if (!is_array(reply)) return std::nullopt;
  MapBuilder map;
  std::vector<Range> ranges(1);
  for (size_t i = 0; i < reply->elements; i++) {
    const redisReply *e = reply->element[i];
    if (!is_array(e) || e->elements < 3 || !slot_range(e->element[0], e->element[1], ranges[0])) return std::nullopt;
    ClusterNode master;
    Host h = slots_node(e->element[2], from_host, master);
    if (h == Host::malformed) return std::nullopt;
    for (size_t j = 3; j < e->elements; j++) {
      ClusterNode replica;
      Host rh = slots_node(e->element[j], from_host, replica);
      if (rh == Host::malformed) return std::nullopt;
      if (rh == Host::ok) master.replicas.push_back(std::move(replica.endpoint));
    }
    if (!map.add(ranges, h == Host::ok ? &master : nullptr)) return std::nullopt;
  }
  return map.take();
}

std::optional<ClusterMap> parse_cluster_shards(const redisReply *reply, std::string_view from_host, bool tls) {
  if (!is_array(reply)) return std::nullopt;
  MapBuilder map;
  std::vector<Range> ranges;
  for (size_t i = 0; i < reply->elements; i++) {
    const redisReply *shard = reply->element[i];
    if (!is_array(shard) || shard->elements % 2) return std::nullopt;
    const redisReply *slots = nullptr, *nodes = nullptr;
    for (size_t k = 0; k < shard->elements; k += 2) {
      const redisReply *name = shard->element[k];
      if (!is_string(name)) return std::nullopt;
      if (text(name) == "slots") slots = shard->element[k + 1];
      if (text(name) == "nodes") nodes = shard->element[k + 1];
    }
    if (!is_array(slots) || slots->elements % 2 || !is_array(nodes)) return std::nullopt;
    ranges.resize(slots->elements / 2);
    for (size_t k = 0; k < ranges.size(); k++)
      if (!slot_range(slots->element[2 * k], slots->element[2 * k + 1], ranges[k])) return std::nullopt;
    bool has_master = false;  // an online one, reachable or not
    std::optional<ClusterNode> master;
    std::vector<RedisEndpoint> replicas;
    for (size_t k = 0; k < nodes->elements; k++) {
      ShardsNode n;
      Host h = shards_node(nodes->element[k], from_host, tls, n);
      if (h == Host::malformed) return std::nullopt;
      if (!n.online) continue;
      if (n.master) {
        if (has_master) return std::nullopt;  // two online masters: whose are the slots?
        has_master = true;
        if (h == Host::ok) master = std::move(n.node);
      } else if (h == Host::ok) {
        replicas.push_back(std::move(n.node.endpoint));
      }
    }
    if (master) master->replicas = std::move(replicas);
    ClusterNode *owner = master ? &*master : nullptr;
    if (!map.add(ranges, owner)) return std::nullopt;
  }
  return map.take();
}

ClusterMap fill_unowned(ClusterMap map, const ClusterMap &more) {
  std::unordered_map<std::string, uint16_t> at;  // map's masters by endpoint
  auto key = [](const RedisEndpoint &e) { return e.host + ":" + std::to_string(e.port); };
  for (size_t i = 0; i < map.masters.size(); i++)
    at.try_emplace(key(map.masters[i].endpoint), static_cast<uint16_t>(i));
  std::vector<uint16_t> as(more.masters.size(), ClusterMap::kUnowned);  // more's master i as map's index
  for (size_t s = 0; s < kClusterSlots; s++) {
    uint16_t o = more.owner[s];
    if (map.owner[s] != ClusterMap::kUnowned || o == ClusterMap::kUnowned || o >= more.masters.size()) continue;
    if (as[o] == ClusterMap::kUnowned) {
      auto [it, fresh] = at.try_emplace(key(more.masters[o].endpoint), static_cast<uint16_t>(map.masters.size()));
      if (fresh) map.masters.push_back(more.masters[o]);
      as[o] = it->second;
    }
    map.owner[s] = as[o];
  }
  return map;
}

namespace {

// RESP of `r` appended to `out` until it holds `limit` bytes (a little more: the caller cuts).
void append_resp(const redisReply *r, size_t limit, std::string &out) {
  if (out.size() >= limit) return;
  if (!r) {
    out += "?";
    return;
  }
  auto line = [&](char kind, std::string_view body) {
    out += kind;
    out.append(body);
    out += "\r\n";
  };
  switch (r->type) {
    case REDIS_REPLY_STRING:
      line('$', std::to_string(r->len));
      out.append(text(r).substr(0, limit - std::min(limit, out.size())));
      out += "\r\n";
      return;
    case REDIS_REPLY_STATUS: return line('+', text(r).substr(0, limit));
    case REDIS_REPLY_ERROR: return line('-', text(r).substr(0, limit));
    case REDIS_REPLY_INTEGER: return line(':', std::to_string(r->integer));
    case REDIS_REPLY_NIL: return line('$', "-1");
    case REDIS_REPLY_ARRAY:
      line('*', std::to_string(r->elements));
      for (size_t i = 0; i < r->elements && r->element && out.size() < limit; i++)
        append_resp(r->element[i], limit, out);
      return;
    default:  // RESP3's types: their text, when they have one
      line('?', text(r).substr(0, limit));
      return;
  }
}

}  // namespace

std::string reply_head(const redisReply *reply, size_t limit) {
  if (!reply) return "<no reply>";
  std::string out;
  append_resp(reply, limit, out);
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::optional<Redirect> parse_redirect(std::string_view e) {
  Redirect r;
  if (e.starts_with("MOVED ")) {
    e.remove_prefix(6);
  } else if (e.starts_with("ASK ")) {
    r.ask = true;
    e.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  size_t sp = e.find(' ');
  if (sp == std::string_view::npos || sp == 0) return std::nullopt;
  unsigned slot = 0;
  auto [sp_end, sp_err] = std::from_chars(e.data(), e.data() + sp, slot);
  if (sp_err != std::errc() || sp_end != e.data() + sp || slot >= kClusterSlots) return std::nullopt;
  r.slot = static_cast<uint16_t>(slot);
  std::string_view ep = e.substr(sp + 1);
  size_t colon = ep.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == ep.size()) return std::nullopt;
  std::string_view host = ep.substr(0, colon), port_text = ep.substr(colon + 1);
  unsigned port = 0;
  auto [p_end, p_err] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (p_err != std::errc() || p_end != port_text.data() + port_text.size() || port == 0 || port > 65535)
    return std::nullopt;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.empty()) return std::nullopt;
  }
  if (host == "?" || !valid_host(host)) return std::nullopt;
  r.to.host.assign(host);
  r.to.port = static_cast<int>(port);
  return r;
}

namespace {
bool has_code(std::string_view e, std::string_view code) {
  return e.starts_with(code) && (e.size() == code.size() || e[code.size()] == ' ');
}
}  // namespace

bool is_cluster_down(std::string_view error) {
  return has_code(error, "CLUSTERDOWN");
}
bool is_try_again(std::string_view error) {
  return has_code(error, "TRYAGAIN");
}

}  // namespace floodwall
