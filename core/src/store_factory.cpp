#include "store_factory.hpp"

#include "memory_store.hpp"
#include "redis/redis_store.hpp"
#include "shm_store.hpp"

namespace floodwall {

std::unique_ptr<Store> make_store(const Policy &p, const Clock &clock) {
  if (p.store == "memory://" || p.store == "memory") return std::make_unique<MemoryStore>(clock, p.max_tenants);
  if (p.store.rfind("redis://", 0) == 0) return std::make_unique<RedisStore>(p, parse_redis_url(p.store));
  if (p.store.rfind("shm://", 0) == 0) return std::make_unique<ShmStore>(clock, p.store.substr(6), p.max_tenants);
  throw StoreError("store: unknown scheme in \"" + p.store.substr(0, 64) +
                   "\" (expected \"memory://\", \"shm://NAME\" or \"redis://host:port/db\")");
}

}  // namespace floodwall
