// The fleet's usage seen from this client: its non-critical requests decided in process hold no slot in
// the fleet set; every kReportUs the maintenance thread reports their count (lua/fleet_report.lua), and
// the reply is the rest of the fleet (the set's live slots plus the other clients' reports) that
// fleet_verdict() adds to this client's count now.
#include "engine/hot_tenants_parts.hpp"

namespace floodwall {

void HotTenants::FleetReport::complete(FleetReportResult &&r) {
  if (r.decided) {
    owner_.fleet_others_.store(r.others + r.set_live, std::memory_order_relaxed);
    owner_.fleet_view_at_.store(owner_.clock_.now_us(), std::memory_order_relaxed);
  }
  in_flight.store(false, std::memory_order_release);
}

// Every kReportUs, while a tenant is hot here or there is a count to tell (or the last one told to undo).
void HotTenants::report(int64_t now, bool hot) {
  if (!fleet_ || now < next_report_us_ || report_->in_flight.load(std::memory_order_acquire)) return;
  next_report_us_ = now + kReportUs;
  int64_t mine = fleet_local_.load(std::memory_order_relaxed);
  if (!hot && mine == 0 && last_reported_ == 0) return;
  last_reported_ = mine;
  FleetReportOp op;
  op.client = client_id_;
  op.in_flight = mine;
  op.expires_us = kReportTtlUs;
  op.fleet_ttl_us = static_cast<int64_t>(policy_.fleet->ttl_s * 1e6);
  report_->in_flight.store(true, std::memory_order_release);
  metrics_.lease(LeaseCounter::fleet_reports);
  store_.fleet_report_async(op, report_.get());
}

// This client's report counts no longer (it would until it expired).
void HotTenants::withdraw_report() {
  if (fleet_ && last_reported_ > 0 && !report_->in_flight.load(std::memory_order_acquire)) {
    FleetReportOp op;
    op.client = client_id_;
    op.expires_us = 0;  // withdrawn
    op.fleet_ttl_us = static_cast<int64_t>(policy_.fleet->ttl_s * 1e6);
    report_->in_flight.store(true, std::memory_order_release);
    store_.fleet_report_async(op, report_.get());
  }
}

}  // namespace floodwall
