// RedisStore, the interface (redis_store.hpp): each call passed to the store's machinery, RedisIo
// (redis_store_internal.hpp), which the other files of this folder implement.
#include "stores/redis/redis_store_internal.hpp"

namespace floodwall {

RedisStore::RedisStore(const Policy &p, RedisUrl url, ClusterHooks *cluster)
    : io_(std::make_unique<RedisIo>(*this, p, std::move(url), cluster)) {}
RedisStore::~RedisStore() = default;

AdmitResult RedisStore::admit(const AdmitOp &op) {
  return io_->admit(op);
}
void RedisStore::admit_async(const AdmitOp &op, AdmitCompletion *done) {
  io_->admit_async(op, done);
}
void RedisStore::control(const TenantKey &tenant, const ControlChange &change) {
  io_->control(tenant, change);
}
TenantState RedisStore::inspect(const AdmitOp &op) {
  return io_->inspect(op);
}
void RedisStore::reset(const AdmitOp &op) {
  io_->reset(op);
}
std::vector<std::pair<std::string, TenantControl>> RedisStore::controlled(size_t limit) {
  return io_->controlled(limit);
}
StoreStatus RedisStore::status(int64_t fleet_ttl_us) {
  return io_->status(fleet_ttl_us);
}
void RedisStore::set_fleet_mode(Limiter l, int8_t mode) {
  io_->set_fleet_mode(l, mode);
}
std::vector<ReplyPtr> RedisStore::admin_run(const std::vector<std::vector<std::string>> &cmds) {
  return io_->admin_run(cmds);
}
std::vector<std::string> RedisStore::setup_commands() const {
  return io_->setup_commands();
}
void RedisStore::release(const ReleaseOp &op) {
  io_->release(op);
}
StoreStats RedisStore::stats() const {
  return io_->stats();
}
void RedisStore::hold_writes() {
  io_->hold_writes();
}
void RedisStore::flush_writes() {
  io_->flush_writes();
}
void RedisStore::lease_async(const LeaseOp &op, LeaseCompletion *done) {
  io_->lease_async(op, done);
}
void RedisStore::end_lease(const LeaseOp &op) {
  io_->end_lease(op);
}
void RedisStore::fleet_report_async(const FleetReportOp &op, FleetReportCompletion *done) {
  io_->fleet_report_async(op, done);
}
void RedisStore::abandon_after_fork() {
  io_->abandon_after_fork();
}
void RedisStore::flush_for_exit() {
  io_->flush_for_exit();
}
std::string RedisStore::fleet_key() const {
  return io_->fleet_key();
}
std::string RedisStore::fleet_reports_key() const {
  return io_->fleet_reports_key();
}
std::string RedisStore::flags_key() const {
  return io_->flags_key();
}
void RedisStore::poll_flags() {
  io_->poll_flags();
}
bool RedisStore::wait_connected(int64_t ms) {
  return io_->wait_connected(ms);
}
bool RedisStore::ever_connected() const {
  return io_->ever_connected();
}
const RedisEndpoint &RedisStore::endpoint() const {
  return io_->endpoint();
}
void RedisStore::adopt(Call *c, bool ask) {
  io_->adopt(c, ask);
}

void RedisStore::drop(Call *c, FailReason why) {
  using Kind = Call::Kind;
  if (c->kind == Kind::admit && c->done) {
    AdmitResult r;
    r.reason = why;
    std::exchange(c->done, nullptr)->complete(std::move(r));
  } else if (c->kind == Kind::lease && c->lease_done) {
    LeaseResult r;
    r.reason = why;
    std::exchange(c->lease_done, nullptr)->complete(std::move(r));
  } else if (c->kind == Kind::report && c->report_done) {
    std::exchange(c->report_done, nullptr)->complete(FleetReportResult{});
  }
  delete c;
}

}  // namespace floodwall
