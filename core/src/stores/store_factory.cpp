#include "stores/store_factory.hpp"

#include "stores/memory_store.hpp"
#include "stores/redis/cluster_store.hpp"
#include "stores/redis/redis_store.hpp"
#include "stores/shm_store.hpp"
#include "util/errors.hpp"
#include "util/platform.hpp"

namespace floodwall {

std::unique_ptr<Store> make_store(const Policy &p, const Clock &clock) {
  if (p.store == "memory://" || p.store == "memory") return std::make_unique<MemoryStore>(clock, p.max_tenants);
  if (p.store.rfind("shm://", 0) == 0) {
#if FW_HAVE_SHM_STORE
    return std::make_unique<ShmStore>(clock, p.store.substr(6), p.max_tenants);
#else
    throw StoreError(std::string("store: shm:// is not available on ") + platform_name() +
                     " (it needs Linux's process-shared robust mutexes): use memory:// for one process, or a Redis "
                     "URL to share limits between processes");
#endif
  }
  if (is_redis_url(p.store)) {
    RedisUrl u = parse_redis_url(p.store);
    // redis.username and redis.password_env (the policy refuses them beside a URL that has its own).
    if (!p.redis.username.empty()) u.user = p.redis.username;
    if (!p.redis.password.empty()) u.password = p.redis.password;
    if (u.kind == RedisUrl::Kind::cluster) return std::make_unique<ClusterStore>(p, std::move(u));
    return std::make_unique<RedisStore>(p, std::move(u));
  }
  throw StoreError("store: unknown scheme in \"" + redact_url(p.store) +
                   "\" (expected memory://, shm://NAME, redis://, rediss://, redis+sentinel://, rediss+sentinel://, "
                   "redis+cluster:// or rediss+cluster://)");
}

}  // namespace floodwall
