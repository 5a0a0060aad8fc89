// The whole JSON and Prometheus text for a state with every section (store stats, a Redis store's
// connections, leases and hot tenants, fallback sources, each limiter, routes, tenants), and for a fresh
// state with none of the optional ones: the exact bytes the bindings and the dashboards read.
#include "metrics/metrics.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using floodwall::FailReason;
using floodwall::Gauges;
using floodwall::LeaseCounter;
using floodwall::Limiter;
using floodwall::Metrics;
using floodwall::Mode;
using floodwall::Outcome;
using floodwall::Source;
using floodwall::StoreStats;
using floodwall::TenantKey;

// Every counter a number of its own, so a value shown in the wrong place shows.
void count_everything(Metrics &m) {
  int routes[] = {m.route_index(""), m.route_index("/v1/items"), m.route_index("/v1/\"q\"\\p\n\x01\x7f")};
  for (int r = 0; r < 3; r++)
    for (int l = 1; l <= 4; l++)
      for (int o = 0; o < 4; o++)
        for (int i = 0; i < 1 + r * 16 + (l - 1) * 4 + o; i++)
          m.count(routes[r], static_cast<Limiter>(l), static_cast<Outcome>(o));
  for (int s = 0; s < 4; s++)
    for (int i = 0; i <= s; i++) m.source(static_cast<Source>(s));
  for (int k = 0; k < 11; k++) m.lease(static_cast<LeaseCounter>(k), 100 + static_cast<uint64_t>(k));
  for (int l = 1; l <= 4; l++)
    for (int r = 1; r < floodwall::kFailReasonCount; r++)
      for (int i = 0; i < l * 10 + r; i++) m.failed(static_cast<Limiter>(l), static_cast<FailReason>(r));
  // acme: 2 of 3 rejected; globex: 1 of 1; a hostile id: 1 of 2; initech: never rejected, never shown.
  TenantKey acme("acme"), globex("globex"), hostile(std::string("evil\"\n\x01", 7)), initech("initech");
  m.tenant_seen(acme, true);
  m.tenant_seen(acme, false);
  m.tenant_seen(acme, true);
  m.tenant_seen(globex, true);
  m.tenant_seen(hostile, true);
  m.tenant_seen(hostile, false);
  m.tenant_seen(initech, false);
}

StoreStats redis_stats() {
  StoreStats st;
  st.evictions = 7;
  st.tenants = 42;
  st.release_errors = 3;
  st.repairs = 2;
  st.reconnects = 5;
  st.noscript_reloads = 1;
  st.connections_in_use = 4;
  st.waiting = 6;
  st.waiting_cap = 128;
  st.failures[static_cast<size_t>(FailReason::config)] = 9;
  st.failures[static_cast<size_t>(FailReason::timeout)] = 11;
  st.breaker = floodwall::BreakerState::half_open;
  return st;
}

Gauges leasing_gauges() {
  Gauges g;
  g.shedding_amount = 0.25;
  g.utilization = 1.0 / 3;
  g.adaptive = {{"*", 11.25, 7}};
  g.in_flight = 17;
  g.modes[static_cast<size_t>(Limiter::request_rate)] = Mode::enforce;
  g.modes[static_cast<size_t>(Limiter::concurrency)] = Mode::dark;
  g.modes[static_cast<size_t>(Limiter::fleet)] = Mode::off;
  g.configured[static_cast<size_t>(Limiter::request_rate)] = true;
  g.configured[static_cast<size_t>(Limiter::concurrency)] = true;
  g.configured[static_cast<size_t>(Limiter::fleet)] = true;  // utilization: unconfigured
  g.leases = true;
  g.hot_tenants = 2;
  g.tokens_in_hand = 30;
  g.slots_in_hand = 5;
  return g;
}

}  // namespace

TEST(MetricsOutput, JsonWithEverySection) {
  Metrics m;
  count_everything(m);
  EXPECT_EQ(m.json(redis_stats(), leasing_gauges()),
            R"({"decisions":{"request_rate":{"allowed":51,"rejected":54,"dark_rejected":57,"failed_open":60},"concu)"
            R"(rrency":{"allowed":63,"rejected":66,"dark_rejected":69,"failed_open":72},"fleet":{"allowed":75,"reje)"
            R"(cted":78,"dark_rejected":81,"failed_open":84},"utilization":{"allowed":87,"rejected":90,"dark_reject)"
            R"(ed":93,"failed_open":96},"adaptive":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0}},"r)"
            R"(outes":{"default":{"request_rate":{"allowed":1,"rejected":2,"dark_rejected":3,"failed_open":4},"conc)"
            R"(urrency":{"allowed":5,"rejected":6,"dark_rejected":7,"failed_open":8},"fleet":{"allowed":9,"rejected)"
            R"(":10,"dark_rejected":11,"failed_open":12},"utilization":{"allowed":13,"rejected":14,"dark_rejected":)"
            R"(15,"failed_open":16},"adaptive":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0}},"/v1/i)"
            R"(tems":{"request_rate":{"allowed":17,"rejected":18,"dark_rejected":19,"failed_open":20},"concurrency")"
            R"(:{"allowed":21,"rejected":22,"dark_rejected":23,"failed_open":24},"fleet":{"allowed":25,"rejected":2)"
            R"(6,"dark_rejected":27,"failed_open":28},"utilization":{"allowed":29,"rejected":30,"dark_rejected":31,)"
            R"("failed_open":32},"adaptive":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0}},"/v1/\"q\)"
            R"("\\p\n\u0001\u007f":{"request_rate":{"allowed":33,"rejected":34,"dark_rejected":35,"failed_open":36})"
            R"(,"concurrency":{"allowed":37,"rejected":38,"dark_rejected":39,"failed_open":40},"fleet":{"allowed":4)"
            R"(1,"rejected":42,"dark_rejected":43,"failed_open":44},"utilization":{"allowed":45,"rejected":46,"dark)"
            R"(_rejected":47,"failed_open":48},"adaptive":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open")"
            R"(:0}}},"sources":{"store":1,"fallback":2,"failed_open":3,"refused":4},"store_failures":{"request_rate)"
            R"(":{"timeout":11,"connection":12,"breaker":13,"config":14,"error":15,"overload":16,"cluster":17},"con)"
            R"(currency":{"timeout":21,"connection":22,"breaker":23,"config":24,"error":25,"overload":26,"cluster":)"
            R"(27},"fleet":{"timeout":31,"connection":32,"breaker":33,"config":34,"error":35,"overload":36,"cluster)"
            R"(":37},"utilization":{"timeout":41,"connection":42,"breaker":43,"config":44,"error":45,"overload":46,)"
            R"("cluster":47},"adaptive":{"timeout":0,"connection":0,"breaker":0,"config":0,"error":0,"overload":0,")"
            R"(cluster":0}},"config_errors":9,"blocked":0,"modes":{"request_rate":"enforce","concurrency":"dark","f)"
            R"(leet":"off","utilization":"unconfigured","adaptive":"unconfigured"},"top_tenants":[{"tenant":"globex)"
            R"(","requests":1,"rejections":1,"rejection_rate":1},{"tenant":"acme","requests":3,"rejections":2,"reje)"
            R"(ction_rate":0.6666666666666666},{"tenant":"evil\\x22\\x0a\\x01","requests":2,"rejections":1,"rejecti)"
            R"(on_rate":0.5}],"breaker":"half_open","store":{"tenants":42,"evictions":7,"release_errors":3,"repairs)"
            R"(":2,"reconnects":5,"noscript_reloads":1,"connections_in_use":4,"waiting":6,"waiting_cap":128},"lease)"
            R"(s":{"hot_tenants":2,"tokens_in_hand":30,"slots_in_hand":5,"decisions_in_process":100,"decisions_afte)"
            R"(r_lease_call":101,"exact_admits":102,"lease_calls":103,"give_backs":104,"fleet_reports":105,"release)"
            R"(s_in_process":106,"tokens_leased":107,"tokens_given_back":108,"slots_leased":109,"slots_given_back":)"
            R"(110,"redis_commands_saved":-5},"shedding_amount":0.25,"utilization":0.3333333333333333,"in_flight":1)"
            R"(7,"adaptive":{"*":{"limit":11.25,"in_flight":7}}})");
}

TEST(MetricsOutput, PrometheusWithEverySection) {
  Metrics m;
  count_everything(m);
  EXPECT_EQ(m.prometheus(redis_stats(), leasing_gauges()),
            R"(# HELP floodwall_decisions_total Limiter verdicts by limiter, outcome and route family.
# TYPE floodwall_decisions_total counter
floodwall_decisions_total{limiter="request_rate",outcome="allowed",route="default"} 1
floodwall_decisions_total{limiter="request_rate",outcome="rejected",route="default"} 2
floodwall_decisions_total{limiter="request_rate",outcome="dark_rejected",route="default"} 3
floodwall_decisions_total{limiter="request_rate",outcome="failed_open",route="default"} 4
floodwall_decisions_total{limiter="concurrency",outcome="allowed",route="default"} 5
floodwall_decisions_total{limiter="concurrency",outcome="rejected",route="default"} 6
floodwall_decisions_total{limiter="concurrency",outcome="dark_rejected",route="default"} 7
floodwall_decisions_total{limiter="concurrency",outcome="failed_open",route="default"} 8
floodwall_decisions_total{limiter="fleet",outcome="allowed",route="default"} 9
floodwall_decisions_total{limiter="fleet",outcome="rejected",route="default"} 10
floodwall_decisions_total{limiter="fleet",outcome="dark_rejected",route="default"} 11
floodwall_decisions_total{limiter="fleet",outcome="failed_open",route="default"} 12
floodwall_decisions_total{limiter="utilization",outcome="allowed",route="default"} 13
floodwall_decisions_total{limiter="utilization",outcome="rejected",route="default"} 14
floodwall_decisions_total{limiter="utilization",outcome="dark_rejected",route="default"} 15
floodwall_decisions_total{limiter="utilization",outcome="failed_open",route="default"} 16
floodwall_decisions_total{limiter="adaptive",outcome="allowed",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="rejected",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="dark_rejected",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="failed_open",route="default"} 0
floodwall_decisions_total{limiter="request_rate",outcome="allowed",route="/v1/items"} 17
floodwall_decisions_total{limiter="request_rate",outcome="rejected",route="/v1/items"} 18
floodwall_decisions_total{limiter="request_rate",outcome="dark_rejected",route="/v1/items"} 19
floodwall_decisions_total{limiter="request_rate",outcome="failed_open",route="/v1/items"} 20
floodwall_decisions_total{limiter="concurrency",outcome="allowed",route="/v1/items"} 21
floodwall_decisions_total{limiter="concurrency",outcome="rejected",route="/v1/items"} 22
floodwall_decisions_total{limiter="concurrency",outcome="dark_rejected",route="/v1/items"} 23
floodwall_decisions_total{limiter="concurrency",outcome="failed_open",route="/v1/items"} 24
floodwall_decisions_total{limiter="fleet",outcome="allowed",route="/v1/items"} 25
floodwall_decisions_total{limiter="fleet",outcome="rejected",route="/v1/items"} 26
floodwall_decisions_total{limiter="fleet",outcome="dark_rejected",route="/v1/items"} 27
floodwall_decisions_total{limiter="fleet",outcome="failed_open",route="/v1/items"} 28
floodwall_decisions_total{limiter="utilization",outcome="allowed",route="/v1/items"} 29
floodwall_decisions_total{limiter="utilization",outcome="rejected",route="/v1/items"} 30
floodwall_decisions_total{limiter="utilization",outcome="dark_rejected",route="/v1/items"} 31
floodwall_decisions_total{limiter="utilization",outcome="failed_open",route="/v1/items"} 32
floodwall_decisions_total{limiter="adaptive",outcome="allowed",route="/v1/items"} 0
floodwall_decisions_total{limiter="adaptive",outcome="rejected",route="/v1/items"} 0
floodwall_decisions_total{limiter="adaptive",outcome="dark_rejected",route="/v1/items"} 0
floodwall_decisions_total{limiter="adaptive",outcome="failed_open",route="/v1/items"} 0
floodwall_decisions_total{limiter="request_rate",outcome="allowed",route="/v1/\"q\"\\p\n??"} 33
floodwall_decisions_total{limiter="request_rate",outcome="rejected",route="/v1/\"q\"\\p\n??"} 34
floodwall_decisions_total{limiter="request_rate",outcome="dark_rejected",route="/v1/\"q\"\\p\n??"} 35
floodwall_decisions_total{limiter="request_rate",outcome="failed_open",route="/v1/\"q\"\\p\n??"} 36
floodwall_decisions_total{limiter="concurrency",outcome="allowed",route="/v1/\"q\"\\p\n??"} 37
floodwall_decisions_total{limiter="concurrency",outcome="rejected",route="/v1/\"q\"\\p\n??"} 38
floodwall_decisions_total{limiter="concurrency",outcome="dark_rejected",route="/v1/\"q\"\\p\n??"} 39
floodwall_decisions_total{limiter="concurrency",outcome="failed_open",route="/v1/\"q\"\\p\n??"} 40
floodwall_decisions_total{limiter="fleet",outcome="allowed",route="/v1/\"q\"\\p\n??"} 41
floodwall_decisions_total{limiter="fleet",outcome="rejected",route="/v1/\"q\"\\p\n??"} 42
floodwall_decisions_total{limiter="fleet",outcome="dark_rejected",route="/v1/\"q\"\\p\n??"} 43
floodwall_decisions_total{limiter="fleet",outcome="failed_open",route="/v1/\"q\"\\p\n??"} 44
floodwall_decisions_total{limiter="utilization",outcome="allowed",route="/v1/\"q\"\\p\n??"} 45
floodwall_decisions_total{limiter="utilization",outcome="rejected",route="/v1/\"q\"\\p\n??"} 46
floodwall_decisions_total{limiter="utilization",outcome="dark_rejected",route="/v1/\"q\"\\p\n??"} 47
floodwall_decisions_total{limiter="utilization",outcome="failed_open",route="/v1/\"q\"\\p\n??"} 48
floodwall_decisions_total{limiter="adaptive",outcome="allowed",route="/v1/\"q\"\\p\n??"} 0
floodwall_decisions_total{limiter="adaptive",outcome="rejected",route="/v1/\"q\"\\p\n??"} 0
floodwall_decisions_total{limiter="adaptive",outcome="dark_rejected",route="/v1/\"q\"\\p\n??"} 0
floodwall_decisions_total{limiter="adaptive",outcome="failed_open",route="/v1/\"q\"\\p\n??"} 0
# HELP floodwall_decisions_by_source_total Who decided the requests that reached the store: the store, the local fallback, nobody (failed open) or nobody and refused (fallback closed).
# TYPE floodwall_decisions_by_source_total counter
floodwall_decisions_by_source_total{source="store"} 1
floodwall_decisions_by_source_total{source="fallback"} 2
floodwall_decisions_by_source_total{source="failed_open"} 3
floodwall_decisions_by_source_total{source="refused"} 4
# HELP floodwall_store_failures_total Decisions the store could not make in time, by limiter and reason (redis.fallback decided them).
# TYPE floodwall_store_failures_total counter
floodwall_store_failures_total{limiter="request_rate",reason="timeout"} 11
floodwall_store_failures_total{limiter="request_rate",reason="connection"} 12
floodwall_store_failures_total{limiter="request_rate",reason="breaker"} 13
floodwall_store_failures_total{limiter="request_rate",reason="config"} 14
floodwall_store_failures_total{limiter="request_rate",reason="error"} 15
floodwall_store_failures_total{limiter="request_rate",reason="overload"} 16
floodwall_store_failures_total{limiter="request_rate",reason="cluster"} 17
floodwall_store_failures_total{limiter="concurrency",reason="timeout"} 21
floodwall_store_failures_total{limiter="concurrency",reason="connection"} 22
floodwall_store_failures_total{limiter="concurrency",reason="breaker"} 23
floodwall_store_failures_total{limiter="concurrency",reason="config"} 24
floodwall_store_failures_total{limiter="concurrency",reason="error"} 25
floodwall_store_failures_total{limiter="concurrency",reason="overload"} 26
floodwall_store_failures_total{limiter="concurrency",reason="cluster"} 27
floodwall_store_failures_total{limiter="fleet",reason="timeout"} 31
floodwall_store_failures_total{limiter="fleet",reason="connection"} 32
floodwall_store_failures_total{limiter="fleet",reason="breaker"} 33
floodwall_store_failures_total{limiter="fleet",reason="config"} 34
floodwall_store_failures_total{limiter="fleet",reason="error"} 35
floodwall_store_failures_total{limiter="fleet",reason="overload"} 36
floodwall_store_failures_total{limiter="fleet",reason="cluster"} 37
floodwall_store_failures_total{limiter="utilization",reason="timeout"} 41
floodwall_store_failures_total{limiter="utilization",reason="connection"} 42
floodwall_store_failures_total{limiter="utilization",reason="breaker"} 43
floodwall_store_failures_total{limiter="utilization",reason="config"} 44
floodwall_store_failures_total{limiter="utilization",reason="error"} 45
floodwall_store_failures_total{limiter="utilization",reason="overload"} 46
floodwall_store_failures_total{limiter="utilization",reason="cluster"} 47
floodwall_store_failures_total{limiter="adaptive",reason="timeout"} 0
floodwall_store_failures_total{limiter="adaptive",reason="connection"} 0
floodwall_store_failures_total{limiter="adaptive",reason="breaker"} 0
floodwall_store_failures_total{limiter="adaptive",reason="config"} 0
floodwall_store_failures_total{limiter="adaptive",reason="error"} 0
floodwall_store_failures_total{limiter="adaptive",reason="overload"} 0
floodwall_store_failures_total{limiter="adaptive",reason="cluster"} 0
# HELP floodwall_config_errors_total Store operations refused as misconfigured (wrong key type, CROSSSLOT).
# TYPE floodwall_config_errors_total counter
floodwall_config_errors_total 9
# HELP floodwall_breaker_state The store circuit breaker (1 for the state in force).
# TYPE floodwall_breaker_state gauge
floodwall_breaker_state{state="closed"} 0
floodwall_breaker_state{state="open"} 0
floodwall_breaker_state{state="half_open"} 1
# HELP floodwall_mode The mode in force per limiter (1 for the mode in force).
# TYPE floodwall_mode gauge
floodwall_mode{limiter="request_rate",mode="enforce"} 1
floodwall_mode{limiter="request_rate",mode="dark"} 0
floodwall_mode{limiter="request_rate",mode="off"} 0
floodwall_mode{limiter="concurrency",mode="enforce"} 0
floodwall_mode{limiter="concurrency",mode="dark"} 1
floodwall_mode{limiter="concurrency",mode="off"} 0
floodwall_mode{limiter="fleet",mode="enforce"} 0
floodwall_mode{limiter="fleet",mode="dark"} 0
floodwall_mode{limiter="fleet",mode="off"} 1
# HELP floodwall_shedding_amount The utilization shedder's shedding amount.
# TYPE floodwall_shedding_amount gauge
floodwall_shedding_amount 0.25
# HELP floodwall_utilization The last sampled worker utilization.
# TYPE floodwall_utilization gauge
floodwall_utilization 0.3333333333333333
# HELP floodwall_in_flight Requests admitted and not yet released.
# TYPE floodwall_in_flight gauge
floodwall_in_flight 17
# HELP floodwall_adaptive_limit The adaptive concurrency limit now, per route family it limits ("*": every request).
# TYPE floodwall_adaptive_limit gauge
floodwall_adaptive_limit{route="*"} 11.25
# HELP floodwall_adaptive_in_flight Requests holding a slot of the adaptive concurrency limit, per route family it limits.
# TYPE floodwall_adaptive_in_flight gauge
floodwall_adaptive_in_flight{route="*"} 7
# HELP floodwall_store_evictions_total Tenants evicted from the memory store beyond max_tenants.
# TYPE floodwall_store_evictions_total counter
floodwall_store_evictions_total 7
# HELP floodwall_store_tenants Tenants held by the memory store.
# TYPE floodwall_store_tenants gauge
floodwall_store_tenants 42
# HELP floodwall_store_connections_in_use Redis connections the store spreads calls over now.
# TYPE floodwall_store_connections_in_use gauge
floodwall_store_connections_in_use 4
# HELP floodwall_store_waiting Admits waiting on a Redis reply now.
# TYPE floodwall_store_waiting gauge
floodwall_store_waiting 6
# HELP floodwall_store_waiting_cap Admits beyond this many are decided at once by the fallback (0: no cap, Redis answers well within the deadline).
# TYPE floodwall_store_waiting_cap gauge
floodwall_store_waiting_cap 128
# HELP floodwall_lease_decisions_total Hot tenants' decisions made from a lease or what Redis last said (store decisions): in process (no round trip of their own) or after a lease call they made.
# TYPE floodwall_lease_decisions_total counter
floodwall_lease_decisions_total{how="in_process"} 100
floodwall_lease_decisions_total{how="after_lease_call"} 101
# HELP floodwall_lease_exact_admits_total Hot tenants' admits that took one exact round trip.
# TYPE floodwall_lease_exact_admits_total counter
floodwall_lease_exact_admits_total 102
# HELP floodwall_lease_commands_total Redis commands the leases made: lease calls, give-backs, fleet reports.
# TYPE floodwall_lease_commands_total counter
floodwall_lease_commands_total{call="lease"} 103
floodwall_lease_commands_total{call="give_back"} 104
floodwall_lease_commands_total{call="fleet_report"} 105
# HELP floodwall_lease_releases_in_process_total Leased slots given back to their lease (no release call).
# TYPE floodwall_lease_releases_in_process_total counter
floodwall_lease_releases_in_process_total 106
# HELP floodwall_lease_tokens_total Tokens leased from Redis and given back to it.
# TYPE floodwall_lease_tokens_total counter
floodwall_lease_tokens_total{op="leased"} 107
floodwall_lease_tokens_total{op="given_back"} 108
# HELP floodwall_lease_slots_total Concurrency slots leased from Redis and given back to it.
# TYPE floodwall_lease_slots_total counter
floodwall_lease_slots_total{op="leased"} 109
floodwall_lease_slots_total{op="given_back"} 110
# HELP floodwall_redis_commands_saved Decisions and releases made in process, less the lease calls, give-backs and reports made instead.
# TYPE floodwall_redis_commands_saved gauge
floodwall_redis_commands_saved -5
# HELP floodwall_hot_tenants Tenants this process decides in process now.
# TYPE floodwall_hot_tenants gauge
floodwall_hot_tenants 2
# HELP floodwall_lease_tokens_in_hand Leased tokens this process holds now (debited in Redis).
# TYPE floodwall_lease_tokens_in_hand gauge
floodwall_lease_tokens_in_hand 30
# HELP floodwall_lease_slots_in_hand Leased slots this process holds now, in use or idle.
# TYPE floodwall_lease_slots_in_hand gauge
floodwall_lease_slots_in_hand 5
# HELP floodwall_release_errors_total Releases the store could not apply (the slot heals after ttl_s).
# TYPE floodwall_release_errors_total counter
floodwall_release_errors_total 3
# HELP floodwall_tenant_rejection_ratio Rejected share of the requests of the most rejected tenants.
# TYPE floodwall_tenant_rejection_ratio gauge
floodwall_tenant_rejection_ratio{tenant="globex"} 1
floodwall_tenant_rejection_ratio{tenant="acme"} 0.6666666666666666
floodwall_tenant_rejection_ratio{tenant="evil\\x22\\x0a\\x01"} 0.5
# HELP floodwall_blocked_total Requests refused because their tenant is blocked (the admin API).
# TYPE floodwall_blocked_total counter
floodwall_blocked_total 0
)");
}

TEST(MetricsOutput, JsonOfAFreshMemoryStore) {
  Metrics m;
  EXPECT_EQ(m.json(StoreStats{}, Gauges{}),
            R"({"decisions":{"request_rate":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0},"concurren)"
            R"(cy":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0},"fleet":{"allowed":0,"rejected":0,")"
            R"(dark_rejected":0,"failed_open":0},"utilization":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_)"
            R"(open":0},"adaptive":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0}},"routes":{"default)"
            R"(":{"request_rate":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0},"concurrency":{"allow)"
            R"(ed":0,"rejected":0,"dark_rejected":0,"failed_open":0},"fleet":{"allowed":0,"rejected":0,"dark_reject)"
            R"(ed":0,"failed_open":0},"utilization":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0},"a)"
            R"(daptive":{"allowed":0,"rejected":0,"dark_rejected":0,"failed_open":0}}},"sources":{"store":0,"fallba)"
            R"(ck":0,"failed_open":0,"refused":0},"store_failures":{"request_rate":{"timeout":0,"connection":0,"bre)"
            R"(aker":0,"config":0,"error":0,"overload":0,"cluster":0},"concurrency":{"timeout":0,"connection":0,"br)"
            R"(eaker":0,"config":0,"error":0,"overload":0,"cluster":0},"fleet":{"timeout":0,"connection":0,"breaker)"
            R"(":0,"config":0,"error":0,"overload":0,"cluster":0},"utilization":{"timeout":0,"connection":0,"breake)"
            R"(r":0,"config":0,"error":0,"overload":0,"cluster":0},"adaptive":{"timeout":0,"connection":0,"breaker")"
            R"(:0,"config":0,"error":0,"overload":0,"cluster":0}},"config_errors":0,"blocked":0,"modes":{"request_r)"
            R"(ate":"unconfigured","concurrency":"unconfigured","fleet":"unconfigured","utilization":"unconfigured")"
            R"(,"adaptive":"unconfigured"},"top_tenants":[],"breaker":"closed","store":{"tenants":0,"evictions":0,")"
            R"(release_errors":0,"repairs":0,"reconnects":0,"noscript_reloads":0,"connections_in_use":0,"waiting":0)"
            R"(,"waiting_cap":0},"shedding_amount":0,"utilization":0,"in_flight":0})");
}

TEST(MetricsOutput, PrometheusOfAFreshMemoryStore) {
  Metrics m;
  EXPECT_EQ(m.prometheus(StoreStats{}, Gauges{}),
            R"(# HELP floodwall_decisions_total Limiter verdicts by limiter, outcome and route family.
# TYPE floodwall_decisions_total counter
floodwall_decisions_total{limiter="request_rate",outcome="allowed",route="default"} 0
floodwall_decisions_total{limiter="request_rate",outcome="rejected",route="default"} 0
floodwall_decisions_total{limiter="request_rate",outcome="dark_rejected",route="default"} 0
floodwall_decisions_total{limiter="request_rate",outcome="failed_open",route="default"} 0
floodwall_decisions_total{limiter="concurrency",outcome="allowed",route="default"} 0
floodwall_decisions_total{limiter="concurrency",outcome="rejected",route="default"} 0
floodwall_decisions_total{limiter="concurrency",outcome="dark_rejected",route="default"} 0
floodwall_decisions_total{limiter="concurrency",outcome="failed_open",route="default"} 0
floodwall_decisions_total{limiter="fleet",outcome="allowed",route="default"} 0
floodwall_decisions_total{limiter="fleet",outcome="rejected",route="default"} 0
floodwall_decisions_total{limiter="fleet",outcome="dark_rejected",route="default"} 0
floodwall_decisions_total{limiter="fleet",outcome="failed_open",route="default"} 0
floodwall_decisions_total{limiter="utilization",outcome="allowed",route="default"} 0
floodwall_decisions_total{limiter="utilization",outcome="rejected",route="default"} 0
floodwall_decisions_total{limiter="utilization",outcome="dark_rejected",route="default"} 0
floodwall_decisions_total{limiter="utilization",outcome="failed_open",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="allowed",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="rejected",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="dark_rejected",route="default"} 0
floodwall_decisions_total{limiter="adaptive",outcome="failed_open",route="default"} 0
# HELP floodwall_decisions_by_source_total Who decided the requests that reached the store: the store, the local fallback, nobody (failed open) or nobody and refused (fallback closed).
# TYPE floodwall_decisions_by_source_total counter
floodwall_decisions_by_source_total{source="store"} 0
floodwall_decisions_by_source_total{source="fallback"} 0
floodwall_decisions_by_source_total{source="failed_open"} 0
floodwall_decisions_by_source_total{source="refused"} 0
# HELP floodwall_store_failures_total Decisions the store could not make in time, by limiter and reason (redis.fallback decided them).
# TYPE floodwall_store_failures_total counter
floodwall_store_failures_total{limiter="request_rate",reason="timeout"} 0
floodwall_store_failures_total{limiter="request_rate",reason="connection"} 0
floodwall_store_failures_total{limiter="request_rate",reason="breaker"} 0
floodwall_store_failures_total{limiter="request_rate",reason="config"} 0
floodwall_store_failures_total{limiter="request_rate",reason="error"} 0
floodwall_store_failures_total{limiter="request_rate",reason="overload"} 0
floodwall_store_failures_total{limiter="request_rate",reason="cluster"} 0
floodwall_store_failures_total{limiter="concurrency",reason="timeout"} 0
floodwall_store_failures_total{limiter="concurrency",reason="connection"} 0
floodwall_store_failures_total{limiter="concurrency",reason="breaker"} 0
floodwall_store_failures_total{limiter="concurrency",reason="config"} 0
floodwall_store_failures_total{limiter="concurrency",reason="error"} 0
floodwall_store_failures_total{limiter="concurrency",reason="overload"} 0
floodwall_store_failures_total{limiter="concurrency",reason="cluster"} 0
floodwall_store_failures_total{limiter="fleet",reason="timeout"} 0
floodwall_store_failures_total{limiter="fleet",reason="connection"} 0
floodwall_store_failures_total{limiter="fleet",reason="breaker"} 0
floodwall_store_failures_total{limiter="fleet",reason="config"} 0
floodwall_store_failures_total{limiter="fleet",reason="error"} 0
floodwall_store_failures_total{limiter="fleet",reason="overload"} 0
floodwall_store_failures_total{limiter="fleet",reason="cluster"} 0
floodwall_store_failures_total{limiter="utilization",reason="timeout"} 0
floodwall_store_failures_total{limiter="utilization",reason="connection"} 0
floodwall_store_failures_total{limiter="utilization",reason="breaker"} 0
floodwall_store_failures_total{limiter="utilization",reason="config"} 0
floodwall_store_failures_total{limiter="utilization",reason="error"} 0
floodwall_store_failures_total{limiter="utilization",reason="overload"} 0
floodwall_store_failures_total{limiter="utilization",reason="cluster"} 0
floodwall_store_failures_total{limiter="adaptive",reason="timeout"} 0
floodwall_store_failures_total{limiter="adaptive",reason="connection"} 0
floodwall_store_failures_total{limiter="adaptive",reason="breaker"} 0
floodwall_store_failures_total{limiter="adaptive",reason="config"} 0
floodwall_store_failures_total{limiter="adaptive",reason="error"} 0
floodwall_store_failures_total{limiter="adaptive",reason="overload"} 0
floodwall_store_failures_total{limiter="adaptive",reason="cluster"} 0
# HELP floodwall_config_errors_total Store operations refused as misconfigured (wrong key type, CROSSSLOT).
# TYPE floodwall_config_errors_total counter
floodwall_config_errors_total 0
# HELP floodwall_breaker_state The store circuit breaker (1 for the state in force).
# TYPE floodwall_breaker_state gauge
floodwall_breaker_state{state="closed"} 1
floodwall_breaker_state{state="open"} 0
floodwall_breaker_state{state="half_open"} 0
# HELP floodwall_mode The mode in force per limiter (1 for the mode in force).
# TYPE floodwall_mode gauge
# HELP floodwall_shedding_amount The utilization shedder's shedding amount.
# TYPE floodwall_shedding_amount gauge
floodwall_shedding_amount 0
# HELP floodwall_utilization The last sampled worker utilization.
# TYPE floodwall_utilization gauge
floodwall_utilization 0
# HELP floodwall_in_flight Requests admitted and not yet released.
# TYPE floodwall_in_flight gauge
floodwall_in_flight 0
# HELP floodwall_store_evictions_total Tenants evicted from the memory store beyond max_tenants.
# TYPE floodwall_store_evictions_total counter
floodwall_store_evictions_total 0
# HELP floodwall_store_tenants Tenants held by the memory store.
# TYPE floodwall_store_tenants gauge
floodwall_store_tenants 0
# HELP floodwall_release_errors_total Releases the store could not apply (the slot heals after ttl_s).
# TYPE floodwall_release_errors_total counter
floodwall_release_errors_total 0
# HELP floodwall_tenant_rejection_ratio Rejected share of the requests of the most rejected tenants.
# TYPE floodwall_tenant_rejection_ratio gauge
# HELP floodwall_blocked_total Requests refused because their tenant is blocked (the admin API).
# TYPE floodwall_blocked_total counter
floodwall_blocked_total 0
)");
}

// Route families beyond kMaxRoutes are counted as "other", listed last and in the totals.
TEST(MetricsOutput, RoutesBeyondTheCapAreOther) {
  Metrics m;
  for (size_t i = 1; i < Metrics::kMaxRoutes + 6; i++)
    m.count(m.route_index("/r" + std::to_string(i)), Limiter::request_rate, Outcome::allowed);
  std::string json = m.json(StoreStats{}, Gauges{});
  EXPECT_NE(json.find(R"({"decisions":{"request_rate":{"allowed":69,"rejected":0,)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("/r63":{"request_rate":{"allowed":1,)"), std::string::npos) << json;
  EXPECT_EQ(json.find(R"("/r64")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"(,"other":{"request_rate":{"allowed":6,"rejected":0,"dark_rejected":0,"failed_open":0},)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("failed_open":0}}},"sources":{)"), std::string::npos) << json;
  std::string prom = m.prometheus(StoreStats{}, Gauges{});
  EXPECT_NE(prom.find("floodwall_decisions_total{limiter=\"request_rate\",outcome=\"allowed\",route=\"other\"} 6\n"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("floodwall_decisions_total{limiter=\"adaptive\",outcome=\"failed_open\",route=\"other\"} 0\n"
                      "# HELP floodwall_decisions_by_source_total"),
            std::string::npos)
      << prom;
  size_t lines = 0;
  for (size_t at = prom.find("floodwall_decisions_total{"); at != std::string::npos;
       at = prom.find("floodwall_decisions_total{", at + 1))
    lines++;
  EXPECT_EQ(lines, Metrics::kMaxRoutes * 5 * 4 + 5 * 4) << "64 route families (default among them) and other";
}
