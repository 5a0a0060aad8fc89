// The admin API's Redis calls (redis_admin.cpp), shared by the Redis store and the cluster store: each takes the
// runner of the node that holds the tenant's slot (and of the one holding the index of control records).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stores/store.hpp"

struct redisReply;
extern "C" void freeReplyObject(void *reply);

namespace floodwall {

struct ReplyFree {
  void operator()(redisReply *r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;
// Runs commands (argv form) on one node, in order; throws StoreError when it cannot.
using AdminRunner = std::function<std::vector<ReplyPtr>(const std::vector<std::vector<std::string>> &)>;

std::string control_index_key(const std::string &prefix);
void admin_control(const AdminRunner &tenant_node, const AdminRunner &index_node, const AdminRunner &flags_node,
                   const std::string &prefix, const TenantKey &tenant, const ControlChange &change);
TenantState admin_inspect(const AdminRunner &tenant_node, const std::string &prefix, const AdmitOp &op);
void admin_reset(const AdminRunner &tenant_node, const std::string &prefix, const AdmitOp &op);
// The fleet-wide modes (flags), the fleet's usage (its set and the clients' reports) and the control records'
// count, each read on the node that holds it; the round trip and the server's version from the flags' node.
StoreStatus admin_status(const AdminRunner &flags_node, const AdminRunner &fleet_node, const AdminRunner &index_node,
                         const std::string &prefix, const std::string &fleet_key, const std::string &reports_key,
                         int64_t fleet_ttl_us);
std::vector<std::pair<std::string, TenantControl>> admin_controlled(
    const AdminRunner &index_node, const std::function<AdminRunner(const TenantKey &)> &node_of,
    const std::string &prefix, size_t limit);

}  // namespace floodwall
