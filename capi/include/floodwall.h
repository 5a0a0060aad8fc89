/*
 * floodwall.h - the stable C ABI of floodwall.
 *
 * floodwall is one rate-limiting and load-shedding engine for polyglot services: a request-rate token
 * bucket and a concurrency cap per tenant (429), a fleet usage shedder and a worker utilization shedder
 * (503), on an embedded store ("memory://") or shared through Redis ("redis://host:port/db").
 *
 * House rules of this header:
 * - Every function returns an int: 0 (FW_OK) on success, a negative FW_E* code otherwise. The detail of
 *   the last error of the calling thread is in fw_error_last(). Decide on the code, never on the message.
 * - Nothing throws across this ABI. A request that the store could not decide in time (outage, time-out,
 *   breaker open, overload) is still a decision, made by redis.fallback: the local table of the same
 *   policy (degraded set, the default), allowed with no limiter (failed_open set), or refused with a 503
 *   ("closed"). fail_reason says why in each case. Only bad arguments fail an admit.
 * - Structs that cross the ABI start with `unsigned version`; initialise them with their *_INIT macro.
 *   Fields are only ever appended.
 * - `**out` parameters hand ownership to the caller; returned `const char *` are borrowed.
 */
#ifndef FLOODWALL_H
#define FLOODWALL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(FW_BUILDING_DLL)
#define FW_EXTERN __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define FW_EXTERN __attribute__((visibility("default")))
#else
#define FW_EXTERN
#endif

#define FW_VERSION_MAJOR 0
#define FW_VERSION_MINOR 1
#define FW_VERSION_PATCH 0
#define FW_VERSION_STRING "0.1.0"

/** The runtime version of the library, "MAJOR.MINOR.PATCH"; static storage, never NULL. */
FW_EXTERN const char *fw_version(void);

/* ---------------------------------------------------------------------------------------------- errors */

typedef enum fw_status {
  FW_OK = 0,
  FW_ERROR = -1,   /* an unexpected internal error */
  FW_ENOMEM = -2,  /* out of memory */
  FW_EINVAL = -3,  /* a bad argument (NULL, empty tenant, cost above the burst, unknown enum) */
  FW_EPOLICY = -4, /* the policy document is invalid; the message names the field */
  FW_ESTORE = -5,  /* the store could not be set up (unparseable URL, unknown scheme), or an admin call
                      could not reach it (the message says why) */
  FW_ECLOSED = -6  /* the client was closed (fw_client_close) */
} fw_status;

typedef struct fw_error {
  int code;            /* one of fw_status */
  const char *message; /* UTF-8, never NULL; borrowed until the thread's next failing fw_* call */
} fw_error;

/**
 * The last error of the calling thread (thread-local). Returns NULL when no fw_* call of this thread
 * has failed yet. Successful calls do not clear it.
 */
FW_EXTERN const fw_error *fw_error_last(void);

/* ---------------------------------------------------------------------------------------- vocabulary */

typedef enum fw_limiter {
  FW_LIMITER_NONE = 0,
  FW_LIMITER_REQUEST_RATE = 1, /* token bucket per tenant, 429 */
  FW_LIMITER_CONCURRENCY = 2,  /* in-flight requests per tenant, 429 */
  FW_LIMITER_FLEET = 3,        /* non-critical in-flight requests fleet-wide, 503 */
  FW_LIMITER_UTILIZATION = 4,  /* per-box worker utilization controller, 503 */
  FW_LIMITER_ADAPTIVE = 5      /* in-flight requests under a limit the measured latency moves, 503 */
} fw_limiter;
#define FW_LIMITER_COUNT 6

typedef enum fw_mode {
  FW_MODE_ENFORCE = 0, /* decide and block */
  FW_MODE_DARK = 1,    /* decide fully, count what would have been blocked, block nothing */
  FW_MODE_OFF = 2      /* not evaluated at all */
} fw_mode;

/** Why the store did not decide (fw_decision.fail_reason); redis.fallback decided instead. */
typedef enum fw_fail_reason {
  FW_FAIL_NONE = 0,
  FW_FAIL_TIMEOUT = 1,    /* the store's reply did not arrive within the deadline */
  FW_FAIL_CONNECTION = 2, /* no connection to the store, or it broke */
  FW_FAIL_BREAKER = 3,    /* the circuit breaker is open; the store was not asked */
  FW_FAIL_CONFIG = 4,     /* the store refused the operation (wrong key type, CROSSSLOT, ...) */
  FW_FAIL_ERROR = 5,      /* any other store error */
  FW_FAIL_OVERLOAD = 6,   /* more admits waited on the store than it answers within the deadline */
  FW_FAIL_CLUSTER = 7     /* a Redis Cluster could not serve the slot now (CLUSTERDOWN, TRYAGAIN) */
} fw_fail_reason;

/** Lower-case names: "request_rate", "concurrency", "fleet", "utilization", "adaptive"; "none" for NONE. */
FW_EXTERN const char *fw_limiter_name(fw_limiter l);
/** "enforce", "dark", "off". */
FW_EXTERN const char *fw_mode_name(fw_mode m);
/** "none", "timeout", "connection", "breaker", "config", "error", "overload", "cluster". */
FW_EXTERN const char *fw_fail_reason_name(fw_fail_reason r);
/** Parses a name of fw_limiter_name (not "none"); FW_EINVAL when unknown. */
FW_EXTERN int fw_limiter_from_name(fw_limiter *out, const char *name);
/** Parses a name of fw_mode_name; FW_EINVAL when unknown. */
FW_EXTERN int fw_mode_from_name(fw_mode *out, const char *name);

/* ------------------------------------------------------------------------------------------- client */

typedef struct fw_client fw_client;

/**
 * Creates a client from a policy JSON document (UTF-8, NUL-terminated). See README.md, "Policy
 * reference", for the schema. On success *out is owned by the caller and freed with fw_client_free.
 * Returns FW_EPOLICY (message naming the field) for an invalid policy, FW_ESTORE for a bad store URL.
 * A Redis store that is unreachable at creation is not an error: the fallback decides until it is up.
 */
FW_EXTERN int fw_client_new(fw_client **out, const char *policy_json);

/**
 * Closes the client while others may still hold it: every later call on it returns FW_ECLOSED (fw_release
 * too, and does nothing), calls already in progress finish first, and admits pending on the store are
 * decided (each callback called exactly once, by the fallback) before it returns. Then only
 * fw_client_free is left to do. A second close (from any thread) is harmless and returns 0; NULL is a
 * no-op returning 0. Not from inside a callback run inline by a call on a client (FW_EINVAL): close
 * from the thread that owns the client's life.
 */
FW_EXTERN int fw_client_close(fw_client *c);

/**
 * Frees the client. Without fw_client_close first it also closes it, but no call may be in progress or
 * start meanwhile (the caller sees to that). NULL is a no-op.
 */
FW_EXTERN void fw_client_free(fw_client *c);

/* ------------------------------------------------------------------------------------------ buffers */

/** A byte buffer owned by the library; free its contents with fw_buf_dispose. */
typedef struct fw_buf {
  char *ptr;   /* NUL-terminated for convenience; NULL when empty */
  size_t size; /* bytes, without the terminating NUL */
} fw_buf;

#define FW_BUF_INIT \
  { NULL, 0 }

/** Frees buf->ptr and resets *buf to empty. NULL and an empty buffer are no-ops. */
FW_EXTERN void fw_buf_dispose(fw_buf *buf);

/**
 * A policy as every binding takes one, made JSON text for fw_client_new: with is_path 0, a string whose
 * first character that is not white space is "{" or "[" is the JSON text itself, and any other string is
 * the path of a file holding it; with is_path non-zero (a language's path object), always a path. The file
 * is read whole (at most 16 MiB). On success *out owns the text (fw_buf_dispose). FW_EPOLICY when the file
 * cannot be read, the message naming the path and the reason; FW_EINVAL for a NULL argument.
 */
FW_EXTERN int fw_policy_text(const char *policy, int is_path, fw_buf *out);

/* ------------------------------------------------------------------------------------------ request */

/* Version 2 appended headers, header_count and peer: the request as the server saw it, from which the
   core derives the tenant key (policy section "tenant") when no tenant is given. Version 3 appended
   credential: what the app said of the request's credential (a verify hook's answer). */
#define FW_REQUEST_VERSION 4

/* fw_request.credential: whether the request's credential (the Bearer token or API key that
   fw_request_credential names) may name its tenant. A credential nobody vouched for never does under the
   default policy (tenant.credentials "verified"): a client cannot mint itself a bucket by inventing keys. */
typedef enum fw_credential_check {
  FW_CREDENTIAL_UNCHECKED = 0, /* the app said nothing: the policy's tenant.credentials decides */
  FW_CREDENTIAL_VERIFIED = 1,  /* the app verified it (its verify hook said yes): it names the tenant */
  FW_CREDENTIAL_REJECTED = 2   /* the app did not: the request is keyed as if it carried none (its address) */
} fw_credential_check;

/** One HTTP header field (or any name/value pair): bytes, not NUL-terminated, any case in the name. */
typedef struct fw_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} fw_header;

typedef struct fw_request {
  unsigned version;   /* FW_REQUEST_VERSION */
  const char *tenant; /* the tenant id, any bytes (NUL-safe). NULL: derived from headers and peer by the
                         policy's "tenant" section. Version 2: an empty id is the anonymous tenant (version 1:
                         FW_EINVAL) */
  size_t tenant_len;  /* length of tenant in bytes */
  const char *route;  /* the matched route's pattern in the framework's syntax ("/orders/:id", "/orders/{id}",
                         "/orders/<int:id>") or a route family's name, NUL-terminated; NULL or "": the default
                         route, or (version 4) the path when one is given. Made canonical ("/orders/:id") as
                         fw_request_route says */
  const char *method; /* HTTP method, NUL-terminated; NULL means "GET" */
  uint64_t cost;      /* tokens this request costs; 0 means 1; above the tenant's burst is FW_EINVAL */
  int critical;       /* non-zero: never counted by the fleet shedder, shed last by utilization */
  int sandbox;        /* non-zero: sandbox traffic, shed first by utilization */
  /* Version 2. Read only when tenant is NULL. */
  const fw_header *headers; /* the request's header fields in arrival order (a name may repeat); may be NULL */
  size_t header_count;
  const char *peer; /* the connection's peer address as text (IPv4, IPv6, IPv4-mapped IPv6; a port or
                       brackets are tolerated); NULL or empty when unknown (a Unix socket) */
  size_t peer_len;
  /* Version 3. Read only when tenant is NULL. An fw_credential_check; another value is FW_EINVAL. */
  int credential;
  /* Version 4. The request's path (bytes, no query string), which the policy's route globs match when
     route is NULL or "": a middleware mounted app-wide, before its framework has matched a route, still
     has every route rule apply. The metrics count such a request under the first of the policy's globs
     it matches (so the route families stay as few as the globs), else under the default route.
     NULL: not known. */
  const char *path;
  size_t path_len;
} fw_request;

#define FW_REQUEST_INIT \
  { FW_REQUEST_VERSION, NULL, 0, NULL, NULL, 0, 0, 0, NULL, 0, NULL, 0, FW_CREDENTIAL_UNCHECKED, NULL, 0 }

/**
 * The tenant id that fw_admit would use for this request: req->tenant when given, else the key derived from
 * its headers and peer address (policy section "tenant": a vouched-for Bearer token or API key hashed to
 * "key:<32 hex digits>", else "ip:<address>" with IPv6 grouped to ipv6_prefix bits, else "anonymous").
 * On success *out owns new contents (dispose with fw_buf_dispose).
 */
FW_EXTERN int fw_tenant_key(fw_client *c, const fw_request *req, fw_buf *out);

/**
 * The credential a verify hook is asked about: the Bearer token or API key (raw, trimmed) that would name
 * the request's tenant if the app vouched for it, by the policy's tenant.from. *found is 1 and *out holds
 * it, or *found is 0 and *out is empty when the request has none that comes before its address. The
 * request's tenant and credential fields are not read. On success *out owns new contents (fw_buf_dispose).
 */
FW_EXTERN int fw_request_credential(fw_client *c, const fw_request *req, fw_buf *out, int *found);

/**
 * The route a request's rules match, in one spelling for every framework: its route made canonical (a
 * parameter of any syntax is ":name" — "{id}", "{id:int}", "<int:id>", ":id(\\d+)?" are ":id" —, an optional
 * part such as "(.:format)" or "{/:id}" is dropped, and a trailing '/' after a leading one), else its path
 * (version 4) with no trailing '/', else "". On success *out owns new contents (dispose with fw_buf_dispose).
 */
FW_EXTERN int fw_request_route(fw_client *c, const fw_request *req, fw_buf *out);

/* ----------------------------------------------------------------------------------------- decision */

/** Holds a request's slots (concurrency, fleet, in-flight accounting); 0 holds nothing. */
typedef uint64_t fw_ticket;

/* Version 2 appended `degraded`, version 3 `cost`, version 4 the rules, version 5 `waited_s`, version 6 `wait_s`.
   A caller that passes an older struct gets its fields only; a version above FW_DECISION_VERSION is FW_EINVAL. */
#define FW_DECISION_VERSION 6

typedef struct fw_decision {
  unsigned version;           /* set by the caller to FW_DECISION_VERSION */
  int allowed;                /* non-zero when the request may proceed */
  int status;                 /* 200, 429 (request rate, concurrency), 503 (fleet, utilization, adaptive, or the
                                 store unavailable under redis.fallback "closed": limiter NONE, fail_reason set) */
  fw_limiter limiter;         /* the enforcing limiter that rejected, or FW_LIMITER_NONE */
  fw_limiter dark_limiter;    /* the first dark-mode limiter that would have rejected, or NONE */
  int failed_open;            /* non-zero when allowed with no limiter at all (redis.fallback "open") */
  fw_fail_reason fail_reason; /* why the store did not decide (degraded, failed open or refused), else NONE */
  /* The tenant's request-rate bucket (all 0 when no request_rate section is configured). */
  int64_t limit;         /* the bucket's capacity (burst), in tokens */
  int64_t remaining;     /* whole tokens left after this decision */
  int64_t reset_s;       /* whole seconds (rounded up) until the bucket is full again */
  int64_t retry_after_s; /* on a rejection: whole seconds, at least 1, until a retry can pass; else 0 */
  double rate;           /* tokens per second the bucket refills */
  /* The tenant's concurrency cap for this route (both 0 when the route is not counted). */
  int64_t concurrency_limit;
  int64_t concurrency_remaining; /* slots left after this decision */
  fw_ticket ticket;              /* release with fw_release on every path; 0 when nothing is held */
  /* Version 2. Non-zero when the local fallback table decided (redis.fallback "local"): the same policy
     in this process, while the store could not answer in time. fail_reason says why. */
  int degraded;
  /* Version 3. The tokens the request asked for (its cost, 0 counted as 1), named in a rejection's message. */
  uint64_t cost;
  /* Version 4. The policy's limits and quotas (request_rate.limits, quotas), by their index: the limits in
     policy order, then the quotas; fw_client_rule_name names one. */
  uint64_t rules;            /* bit i: rule i applied to this request (RateLimit-Policy lists it) */
  int rule;                  /* the rule that rejected (limiter REQUEST_RATE), -1 when none did */
  int dark_rule;             /* the first dark-mode rule that would have rejected, -1 when none */
  int shown_rule;            /* the rule RateLimit reports (closest to exhaustion, or the one that rejected), -1 */
  int64_t rule_limit;        /* shown_rule's capacity: a limit's burst, a quota's limit */
  int64_t rule_remaining;    /* what shown_rule has left after this decision */
  int64_t rule_reset_s;      /* seconds until shown_rule is full again (a limit) or its window ends (a quota) */
  int64_t rule_window_end_s; /* a quota: when its window ends, seconds since the epoch (the store's clock); else 0 */
  /* Version 4. The tenant is blocked (fw_admin_block): status 403, limiter NONE, nothing consumed. */
  int blocked;
  int64_t blocked_until_s; /* when the block ends, seconds since the epoch; 0: until unblocked */
  /* Version 5. fw_acquire: the seconds an allowed request waited for its turn (0: it went at once; 0 for
     fw_admit). */
  double waited_s;
  /* Version 6. fw_reserve, fw_reserve_async: the seconds from when this decision was written until the
     request's turn; the caller must not go before (0: go now). 0 for every other call. */
  double wait_s;
} fw_decision;

#define FW_DECISION_INIT                                                                                             \
  {                                                                                                                  \
    FW_DECISION_VERSION, 0, 0, FW_LIMITER_NONE, FW_LIMITER_NONE, 0, FW_FAIL_NONE, 0, 0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0, \
        -1, -1, -1, 0, 0, 0, 0, 0, 0, 0.0, 0.0                                                                       \
  }

/**
 * Decides one request: utilization shedder (local) -> request rate + concurrency (one atomic store
 * operation) -> fleet shedder (non-critical only). A request that one limiter rejects leaves every other
 * limiter's state untouched. Returns 0 whenever a decision was made, including a failed-open one;
 * FW_EINVAL for a bad request (empty tenant, cost above the burst), with nothing consumed.
 * Blocks the calling thread for at most the store's deadline.
 */
FW_EXTERN int fw_admit(fw_client *c, const fw_request *req, fw_decision *out);

/**
 * Decides one request as fw_admit does, except that a request the request-rate bucket (or a limit of the
 * policy) would refuse now waits for its turn instead, when that turn is at most max_wait_s seconds away:
 * the store takes its tokens at once (one round trip, no polling; callers are served in the order the
 * store saw them) and this call sleeps until the turn, then writes the decision admit would have given an
 * allowed request (its ticket released with fw_release as always; waited_s in a version 5 decision). A
 * request whose turn is further away, or that another limiter refuses (a quota, the concurrency limit, the
 * fleet and utilization shedders, the adaptive limit: none of them waits), gets admit's refusal at once,
 * with nothing consumed. max_wait_s is capped at the longest full refill (burst / rate) of the request's
 * buckets; 0 decides as fw_admit. FW_EINVAL naming "max_wait" for a negative, NaN or infinite one, and for
 * what fw_admit refuses (a cost above the burst). Blocks for at most the store's deadline plus the wait;
 * fw_client_close waits for it as for any call in progress. See docs/concepts/acquire.md.
 */
FW_EXTERN int fw_acquire(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out);

/**
 * fw_acquire without the sleep, for a caller that waits in its own event loop: the same decision, taken in
 * the same one round trip, written at once; an allowed request's wait_s says how long after the decision
 * was written its turn comes, and the caller must not go before it. `out` must be a version 6 decision
 * (FW_DECISION_INIT): an older one, which has no wait_s, is FW_EINVAL. Blocks for at most the store's
 * deadline (never for the wait).
 *
 * Giving back: a caller that gives up before its turn (cancelled, timed out) calls fw_release on the
 * ticket before the turn, which gives the reservation's tokens back to the tenant's bucket when no later
 * reservation has been made on it since (the bucket still stands where this one left it); otherwise (or
 * once the turn has come) only its slots go back, and its tokens, at most its cost per abandoned
 * reservation, are repaid by the refill by its turn (within max_wait). A limit's tokens (taken at the turn)
 * are not given back. A reservation whose process dies is repaid the same way. The ticket of a reservation
 * that waits is never 0.
 */
FW_EXTERN int fw_reserve(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out);

/**
 * Callback of fw_admit_async. `status` is what fw_admit would have returned; `d` is borrowed for the
 * duration of the call (copy it). Called exactly once per accepted fw_admit_async, from the store's I/O
 * thread (or inline, before fw_admit_async returns, for the memory store and for errors). It must not
 * block; it may call fw_release and fw_admit_async.
 */
typedef void (*fw_admit_cb)(void *payload, int status, const fw_decision *d);

/**
 * Like fw_admit, without blocking. The request's strings are copied before return. Returns 0 when cb
 * has been or will be called; a negative code (and no call of cb) only for NULL arguments.
 */
FW_EXTERN int fw_admit_async(fw_client *c, const fw_request *req, fw_admit_cb cb, void *payload);

/**
 * fw_admit_async, telling whether cb was called inline: on return *completed is 1 when cb has already
 * been called on this thread (the memory and shm stores, a bad request, a decision the fallback made at
 * once), 0 when it will be called from the I/O thread. `completed` may be NULL.
 */
FW_EXTERN int fw_admit_async2(fw_client *c, const fw_request *req, fw_admit_cb cb, void *payload, int *completed);

/**
 * The callback of fw_admit_async3: the admit's status, its decision, and when status is not FW_OK the
 * error's message (UTF-8; NULL when status is FW_OK), borrowed for the duration of the call, so that a
 * binding never reads the thread-local fw_error_last() on the I/O thread.
 */
typedef void (*fw_admit_cb3)(void *payload, int status, const fw_decision *d, const char *message);

/**
 * Like fw_admit, without blocking, and never calling back inline. When the decision is made at once (the
 * memory and shm stores, a hot tenant decided in process, the fallback deciding at once) it is written to
 * *out, *decided is set to 1 and cb is never called. Otherwise *decided is 0 and cb is called exactly
 * once, later, from another thread (the store's I/O thread), never from inside this call. A bad request
 * returns its error code here (cb is not called). `out` must have its version set (FW_DECISION_INIT).
 */
FW_EXTERN int fw_admit_async3(fw_client *c, const fw_request *req, fw_decision *out, int *decided, fw_admit_cb3 cb,
                              void *payload);

/**
 * fw_reserve without blocking, in the manner of fw_admit_async3: decided at once (memory://, shm://, the
 * fallback deciding at once) into *out with *decided 1 and cb never called; else *decided 0 and cb called
 * once, later, from the store's I/O thread, with the decision (its wait_s counted from that call). A bad
 * request or max_wait returns its error code here (cb is not called). `out` must be a version 6 decision.
 */
FW_EXTERN int fw_reserve_async(fw_client *c, const fw_request *req, double max_wait_s, fw_decision *out, int *decided,
                               fw_admit_cb3 cb, void *payload);

/**
 * Whether fw_admit can wait on I/O with this client's store: 1 for a network store (Redis), 0 for the
 * in-process ones (memory://, shm://), whose admits take well under a microsecond. A binding uses it to
 * decide whether to give up its interpreter lock around an admit.
 */
FW_EXTERN int fw_client_can_block(fw_client *c, int *out);

/**
 * The longest an admit waits for the store, in milliseconds (the policy's redis.deadline_ms, 50 by default,
 * whatever the store). A middleware gives an app's verify hook no longer than this before it treats the
 * request's credential as not vouched for.
 */
FW_EXTERN int fw_client_deadline_ms(fw_client *c, int64_t *out);

/**
 * Batches this thread's store writes, for an event loop (as ioredis' auto-pipelining does): from
 * fw_client_hold until fw_client_flush, the fw_admit_async* and fw_release calls of the calling thread are
 * kept back (a reply that wakes the store's I/O thread mid-turn does not send them), and fw_client_flush
 * hands them over at once, to be written in one syscall (one pipeline: Redis reads them at once, instead
 * of one read per request). A call held longer than redis.batch_window_us (200 us) goes out as soon as the
 * I/O thread is awake anyway (a reply arriving; within 100 ms at most), so that Redis works while a long
 * turn runs on and a hold never flushed still goes out. A call's deadline counts from when it leaves the
 * hold. The loop holds while it runs a turn's callbacks and flushes before it waits for I/O again, so that
 * a call waits at most for the rest of its turn. A blocking fw_admit of the holding thread flushes first;
 * other threads' calls are never held. No-ops on the in-process stores.
 *
 * Without a hold, fw_release waits for a ride too: it goes out with the next call any thread sends (a
 * worker's next admit, behind the release), or alone once it has waited redis.batch_window_us, so that a
 * thread pool or a one-thread worker does not cost Redis a read and a reply per release.
 */
FW_EXTERN int fw_client_hold(fw_client *c);
FW_EXTERN int fw_client_flush(fw_client *c);

/**
 * The name of the policy's limit or quota at `index` (fw_decision.rule, dark_rule, shown_rule and the bits
 * of rules; the limits in policy order, then the quotas) into *out, which stays valid as long as the
 * client (until fw_client_free); *is_quota, when not NULL, is 1 for a quota. FW_EINVAL for an index the
 * policy has no rule at.
 */
FW_EXTERN int fw_client_rule_name(fw_client *c, int index, const char **out, int *is_quota);

/**
 * The request header names (lower case, static) that the policy's tenant derivation reads (section
 * "tenant": authorization, x-api-key, and the forwarded header when there are trusted proxies), by index
 * from 0: a binding may hand fw_admit and fw_tenant_key only the headers named here, since no other header
 * is ever read (a request's cookies and user agent need not cross). FW_EINVAL for an index past the last.
 */
FW_EXTERN int fw_client_tenant_header(fw_client *c, int index, const char **out);

/**
 * Releases what a ticket holds. Idempotent: releasing twice, releasing 0 or an unknown ticket is a
 * no-op returning 0. Never fails the caller: a store error is counted and the slot heals after ttl_s.
 * The ticket of a reservation (fw_reserve) released before its turn gives its tokens back (see there).
 */
FW_EXTERN int fw_release(fw_client *c, fw_ticket t);

/* ---------------------------------------------------------------------------------- modes, controls */

/** Sets a limiter's local mode at run time. A fleet-wide mode in Redis (the flags key) overrides it. */
FW_EXTERN int fw_set_mode(fw_client *c, fw_limiter l, fw_mode m);
/** The limiter's mode in force now (the fleet-wide one when set, else the local one). */
FW_EXTERN int fw_get_mode(fw_client *c, fw_limiter l, fw_mode *out);

/**
 * Reports this box's worker utilization in [0, 1]; from then on the utilization shedder samples the
 * reported value instead of its own in-flight accounting. A NaN or a value outside [0,1] is FW_EINVAL.
 */
FW_EXTERN int fw_report_utilization(fw_client *c, double u);
/** The utilization shedder's current shedding amount in [resting, 1] (0 when not configured). */
FW_EXTERN int fw_shedding_amount(fw_client *c, double *out);

/* ------------------------------------------------------------------------------------------- admin */

/*
 * The admin API: a tenant's control record, kept in the store (Redis: the hash <prefix>:{<tenant>}:ctl,
 * read by the admit script itself), so that a change applies to the next request of every client of the
 * store, with no poll and no deploy; on memory:// to this process, on shm:// to the machine's processes.
 * An app exposes these on an admin endpoint (behind its own authentication); the floodwall command drives
 * them. Each blocks for at most the store's deadline (at least a second). The tenant is an id as fw_admit
 * takes it (fw_tenant_key derives one from a request); one with a control character is FW_EINVAL.
 * Returns FW_EINVAL for a bad argument (the message names it), FW_ESTORE when the store cannot be reached.
 */

/** Gives the tenant its own bucket (rate tokens/second, burst tokens; validated as the policy's are). */
FW_EXTERN int fw_admin_set_override(fw_client *c, const char *tenant, size_t tenant_len, double rate, double burst);
/** Removes the tenant's own bucket: its tier's, or the policy's, again. */
FW_EXTERN int fw_admin_remove_override(fw_client *c, const char *tenant, size_t tenant_len);
/** Puts the tenant in a tier of the policy ("tiers"); NULL or "" takes it out of any. */
FW_EXTERN int fw_admin_set_tier(fw_client *c, const char *tenant, size_t tenant_len, const char *tier);
/** Blocks the tenant (403, nothing consumed) for `seconds`, or until unblocked when 0. */
FW_EXTERN int fw_admin_block(fw_client *c, const char *tenant, size_t tenant_len, double seconds);
FW_EXTERN int fw_admin_unblock(fw_client *c, const char *tenant, size_t tenant_len);
/**
 * The tenant as a JSON object: tier, override, blocked (and until when), the request-rate bucket's limit and
 * remaining tokens, the concurrency limit and requests in flight, and each limit and quota of its tier with
 * what it has left (a quota: its reset). On success *out owns new contents (dispose with fw_buf_dispose).
 */
FW_EXTERN int fw_admin_show(fw_client *c, const char *tenant, size_t tenant_len, fw_buf *out);
/** Forgets the tenant's buckets and quotas (full again); its control record and in-flight slots stay. */
FW_EXTERN int fw_admin_reset(fw_client *c, const char *tenant, size_t tenant_len);
/** Sets a limiter's fleet-wide mode (an fw_mode), or -1 to go back to each process's own (fw_set_mode). */
FW_EXTERN int fw_admin_set_mode(fw_client *c, fw_limiter l, int mode);
/** The tenants with a control record, at most `limit`, as a JSON array of objects like fw_admin_show's. */
FW_EXTERN int fw_admin_list(fw_client *c, size_t limit, fw_buf *out);
/**
 * The fleet as the store holds it now, as a JSON object: store (its URL, any password redacted), prefix,
 * server, topology, round_trip_ms (one PING over the admin connection), breaker (this client's), modes (each
 * limiter's fleet-wide mode, null when none is set), modes_fleet_wide (false for memory:// and shm://, whose
 * modes are each process's own), fleet (in_flight: the fleet shedder's live slots and the
 * clients' live reports; reporting_clients; capacity, this client's policy's), controlled (tenants with a
 * control record), overrides and blocks (as fw_admin_list's entries, at most 1,000 records read).
 */
FW_EXTERN int fw_admin_status(fw_client *c, fw_buf *out);
/**
 * The fleet view (`floodwall top`): every live client's summary as the store holds it now, a JSON array
 * sorted by id. Each client writes its own every `summary.period_s` (policy; 5 s by default, 0 never) with a
 * TTL of three periods: id, host, pid, language, version, started_at_ms, written_at_ms, period_s, decisions
 * (cumulative, by limiter and outcome), sources, decisions_total, refused (by limiter), per_s (decisions and
 * refused over its last period), fallback_share, top_refused (tenant, rejections, requests) and breaker.
 * memory:// holds this client's own only. FW_ESTORE when the store cannot be reached.
 */
FW_EXTERN int fw_admin_clients(fw_client *c, fw_buf *out);
/**
 * The language this client's summary names (the fleet view): a binding says its own ("python", "node",
 * "ruby"); a client of the C ABI is "c" until it says otherwise. 1-32 characters of [a-z0-9_.-], else
 * FW_EINVAL. The next summary written carries it.
 */
FW_EXTERN int fw_client_set_language(fw_client *c, const char *language);

/* ----------------------------------------------------------------------------------------- command */

/**
 * The floodwall command (README, "The floodwall command"): runs the command line argv[0..argc) (argv[0] is
 * the program's name) and sets *exit_status: 0 done, 1 the command failed (the store could not be reached,
 * the policy has errors), 2 a usage error (the message names the argument). What it prints goes to *out
 * (standard output) and *err (standard error), which the caller writes and disposes of; the environment's
 * FLOODWALL_STORE is read. The executable, the pip console script and the npm bin call this one function.
 * Blocks for at most the store's connect time-out and deadline per call it makes. Returns FW_EINVAL for
 * NULL arguments, else 0 (the command's own failure is in *exit_status and *err).
 */
FW_EXTERN int fw_cli_run(int argc, const char *const *argv, int *exit_status, fw_buf *out, fw_buf *err);

/* --------------------------------------------------------------------------------------- formatter */

/**
 * The response headers for a decision, as "Name: value\r\n" lines, in a fixed order: RateLimit-Policy,
 * RateLimit, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, then Retry-After on rejections.
 * Every value is ASCII built from numbers and the policy; no caller-supplied byte reaches it.
 * On success *out owns new contents (dispose with fw_buf_dispose).
 */
FW_EXTERN int fw_format_headers(fw_client *c, const fw_decision *d, fw_buf *out);

/** The JSON body of a rejection (429 or 503); an empty buffer for an allowed decision. */
FW_EXTERN int fw_format_body(fw_client *c, const fw_decision *d, fw_buf *out);

#define FW_RESPONSE_VERSION 1
#define FW_RESPONSE_MAX_HEADERS 8

/**
 * Everything a middleware needs to answer for a decision, as name/value pairs: no binding parses text.
 * headers are the limit headers in a fixed order (RateLimit-Policy, RateLimit, RateLimit-Limit,
 * RateLimit-Remaining, RateLimit-Reset, then Retry-After on a rejection; the policy's "headers": "ietf"
 * leaves out the three older fields, "none" all but Retry-After); names are static, values point
 * into memory the struct owns. On a rejection, body and content_type are the body to send (policy
 * "body_format": "json", or "problem+json" for RFC 9457); for an allowed decision both are empty.
 */
typedef struct fw_response {
  unsigned version; /* FW_RESPONSE_VERSION */
  int status;       /* the decision's status: 200, 429 or 503 */
  size_t header_count;
  fw_header headers[FW_RESPONSE_MAX_HEADERS];
  const char *content_type; /* NUL-terminated, static; "" for an allowed decision */
  const char *body;         /* NUL-terminated; "" for an allowed decision */
  size_t body_len;
  void *storage_; /* private: what the values and the body point into */
} fw_response;

#define FW_RESPONSE_INIT \
  { FW_RESPONSE_VERSION, 0, 0, {{NULL, 0, NULL, 0}}, "", "", 0, NULL }

/** Fills *out for a decision. Dispose of it with fw_response_dispose, also after a failure. */
FW_EXTERN int fw_format_response(fw_client *c, const fw_decision *d, fw_response *out);
/** Frees what fw_format_response put in *r and resets it to empty. NULL is a no-op. */
FW_EXTERN void fw_response_dispose(fw_response *r);

/* ------------------------------------------------------------------------------------------ backoff */

#define FW_BACKOFF_VERSION 1

/**
 * How a caller of a floodwall-protected API comes back after a 429 or a 503: capped exponential backoff
 * with full jitter, never earlier than the server's Retry-After. One set of defaults for every language.
 */
typedef struct fw_backoff {
  unsigned version;  /* FW_BACKOFF_VERSION */
  double base_s;     /* the first retry waits up to base_s; default 0.1 */
  double cap_s;      /* no jitter above cap_s; default 20 */
  unsigned attempts; /* calls in all, the first one included; default 5 */
} fw_backoff;

#define FW_BACKOFF_INIT \
  { FW_BACKOFF_VERSION, 0.1, 20.0, 5 }

/**
 * The wait in seconds before retry number `attempt` (0 for the first retry):
 * max(retry_after_s, 0) + random01 * min(cap_s, base_s * 2^attempt). retry_after_s < 0 means the server
 * sent none. random01 is a uniform random number in [0, 1) from the caller (so tests can fix it).
 * FW_EINVAL naming the field for base_s <= 0, cap_s < base_s, attempts 0, random01 outside [0, 1) or a NaN.
 */
FW_EXTERN int fw_backoff_delay(const fw_backoff *b, unsigned attempt, double retry_after_s, double random01,
                               double *out_s);

/**
 * A Retry-After field value in seconds: delay-seconds, or an HTTP-date (IMF-fixdate, RFC 850 or asctime)
 * counted from now_unix_s (never negative). FW_EINVAL when the value is neither.
 */
FW_EXTERN int fw_parse_retry_after(const char *value, size_t len, double now_unix_s, double *out_s);

/* ------------------------------------------------------------------------------------------ metrics */

/**
 * Counters as one JSON object: {"decisions": {limiter: {outcome: n}}, "routes": {...}, "top_tenants":
 * [...], "breaker": "closed|open|half_open", "store": {...}, "shedding_amount": x, "utilization": u}.
 */
FW_EXTERN int fw_metrics_json(fw_client *c, fw_buf *out);

/** The same counters as Prometheus text exposition format (version 0.0.4). */
FW_EXTERN int fw_metrics_prometheus(fw_client *c, fw_buf *out);

#ifdef __cplusplus
}
#endif

#endif /* FLOODWALL_H */
