// Type declarations of the floodwall package (bindings/node/lib/*.js).

export type LimiterName = 'request_rate' | 'concurrency' | 'fleet' | 'utilization' | 'adaptive';
export type Mode = 'enforce' | 'dark' | 'off';
export type FailReason = 'timeout' | 'connection' | 'breaker' | 'config' | 'error' | 'overload' | 'cluster';
export type Ticket = number | bigint;

/** The policy document: the same JSON schema in every floodwall language. */
export interface Policy {
  /** "memory://" (the default) or "redis://host:port/db". */
  store?: string;
  prefix?: string;
  docs_url?: string;
  /** The body of a rejection: floodwall's JSON (default) or RFC 9457 problem details. */
  body_format?: 'json' | 'problem+json';
  /** The limit headers on every decided response: all five (default), the IETF fields alone, or none. */
  headers?: 'all' | 'ietf' | 'none';
  max_tenants?: number;
  /** Where the core takes the tenant of a request that names none (admit without a tenant, the middleware's default). */
  tenant?: {
    /** Tried in order (default all three): a Bearer token, an X-API-Key (both hashed), the client's address. */
    from?: Array<'authorization' | 'x-api-key' | 'ip'>;
    /**
     * Which credentials name a tenant: "verified" (default) only those the app vouched for (`verified: true`,
     * the middleware's verify hook), the rest are keyed by address; "unverified" any credential not
     * rejected, for a gateway in front that already refuses unknown keys (else a client that invents keys
     * gets a new bucket per key).
     */
    credentials?: 'verified' | 'unverified';
    /** Proxies (addresses or CIDRs) whose forwarded-for header is believed (default none). */
    trusted_proxies?: string[];
    /** The header that trusted proxies set (default "x-forwarded-for"). */
    forwarded_header?: 'x-forwarded-for' | 'forwarded';
    /** IPv6 clients are grouped by this many leading bits (1-128, default 64). */
    ipv6_prefix?: number;
  };
  description?: string;
  request_rate?: {
    rate: number;
    burst: number;
    overrides?: Record<string, { rate: number; burst: number }>;
    mode?: Mode;
    /** Redis store: a hot tenant is decided in process from tokens leased in batches (README, "Hot tenants"). */
    lease?: { max_tokens: number; ttl_ms: number };
    /** Named buckets of their own per tenant for the routes (globs) and methods they list (Decision.rules). */
    limits?: Array<{ name: string; routes: string[]; methods?: string[]; rate: number; burst: number; mode?: Mode }>;
  };
  /** Calendar quotas per tenant (UTC or a fixed offset such as "UTC+09:00"); every route unless routes says. */
  quotas?: Array<{
    name: string;
    limit: number;
    period: 'hour' | 'day' | 'month';
    routes?: string[];
    methods?: string[];
    timezone?: string;
    mode?: Mode;
  }>;
  concurrency?: {
    limit: number;
    ttl_s?: number;
    routes?: string[];
    mode?: Mode;
    /** Redis store: a hot tenant's slots leased in batches (ttl_ms at most half of ttl_s). */
    lease?: { max_slots: number; ttl_ms: number };
  };
  /**
   * Plans (1 to 32, names of [A-Za-z0-9_.-]): a tier's rate and burst are its tenants' bucket, and its
   * limits and quotas, when it has them, replace the policy's for them. Needs a request_rate section.
   * A tenant's tier is set through the admin API (Floodwall#admin.setTier).
   */
  tiers?: Record<string, {
    rate: number;
    burst: number;
    limits?: NonNullable<NonNullable<Policy['request_rate']>['limits']>;
    quotas?: NonNullable<Policy['quotas']>;
  }>;
  fleet?: { capacity: number; ttl_s?: number; mode?: Mode };
  utilization?: {
    workers?: number;
    good?: number;
    bad?: number;
    delay_s?: number;
    ramp_s?: number;
    sample_s?: number;
    mode?: Mode;
  };
  /** The adaptive concurrency limit: in-flight requests under a limit the measured latency moves (503). */
  adaptive?: {
    enabled?: boolean;
    algorithm?: 'gradient2' | 'vegas';
    initial_limit?: number;
    min_limit?: number;
    max_limit?: number;
    smoothing?: number;
    window_ms?: number;
    tolerance?: number;
    critical_reserve?: number;
    ttl_s?: number;
    probe_interval_s?: number;
    routes?: string[];
    mode?: Mode;
  };
  redis?: {
    deadline_ms?: number;
    connect_timeout_ms?: number;
    /**
     * Pipelined connections per client, 1 to 16 (default 2). While one thread submits every call (the
     * event loop) they all take one of them; calls from several threads spread over all.
     */
    connections?: number;
    /** A blocking caller thread's own connections (0 to 8; Node's admits never block, so they go through the I/O thread). */
    direct_connections?: number;
    /** Who decides when Redis cannot answer in time: the local table of the same policy (default), nobody, or a 503. */
    fallback?: 'local' | 'open' | 'closed';
    breaker_min_calls?: number;
    breaker_failure_ratio?: number;
    breaker_window_ms?: number;
    breaker_open_ms?: number;
    flags_poll_ms?: number;
    /** How long an event-loop turn's admits and releases may wait for the turn's single write, and a release
     * outside a turn for a call to ride with (us, 0 to 1,000,000). */
    batch_window_us?: number;
  };
}

/**
 * A request's header fields: a flat [name, value, name, value, ...] array (Node's req.rawHeaders) or an
 * array of [name, value] pairs; every field in arrival order, repeats allowed, names in any case. Strings
 * are taken as Latin-1 (one byte per character, as node:http decodes header bytes); Buffers as they are.
 */
export type HeaderList = ReadonlyArray<string | Uint8Array> | ReadonlyArray<readonly [string | Uint8Array, string | Uint8Array]>;

/** Who a request is from: its tenant, or what the core derives one from (policy section "tenant"). */
export interface RequestIdentity {
  /**
   * The tenant id: any bytes ('' is the anonymous tenant). Absent, undefined or null: derived by the core
   * from `headers` and `peer` (a verified Bearer token or API key, hashed; else the client's address).
   */
  tenant?: string | Uint8Array | null;
  /** The request's headers; read only when there is no tenant. */
  headers?: HeaderList | null;
  /** The connection's peer address (req.socket.remoteAddress); read only when there is no tenant. */
  peer?: string | null;
  /**
   * What the app's check of the request's credential (Floodwall#requestCredential) said: true, it is real
   * and names the tenant; false, it is not (the request is keyed by its address); absent, undefined or null,
   * not checked (the policy's tenant.credentials decides: by default the address). Read only when there is
   * no tenant.
   */
  verified?: boolean | null;
}

/** What Floodwall#requestCredential reads. */
export interface CredentialRequest {
  headers?: HeaderList | null;
  peer?: string | null;
}

/** What Floodwall#requestRoute reads. */
export interface RouteRequest {
  /**
   * The framework's matched route pattern in its own syntax ('/orders/:id', '/orders/{id}', '/orders/<int:id>'),
   * or a route family's name; made canonical by the core.
   */
  route?: string | null;
  /** The request's path, without its query string: what the policy's route globs match when there is no route. */
  path?: string | null;
}

export interface AcquireRequest {
  /** The tenant id (any string or bytes; '' is the anonymous tenant). */
  tenant: string | Uint8Array;
  /** The route (pattern or family name) whose rules apply. */
  route?: string | null;
  /** Tokens this request costs (default 1; above the tenant's burst is an error). */
  cost?: number;
  /** The longest to wait for the turn, in milliseconds (default 10000; capped at burst / rate). */
  maxWait?: number;
  /** Aborted before the turn: acquire() rejects with its reason and gives the reservation back. */
  signal?: AbortSignal;
}

export interface AdmitRequest extends RequestIdentity, RouteRequest {
  /** The HTTP method (absent: GET). */
  method?: string | null;
  /** Tokens this request costs (default 1; 0 counts as 1; above the tenant's burst is an error). */
  cost?: number;
  /** Never counted by the fleet shedder, shed last by the utilization shedder. */
  critical?: boolean;
  /** Sandbox traffic: shed first by the utilization shedder. */
  sandbox?: boolean;
}

export class Decision {
  private constructor();
  readonly allowed: boolean;
  /** 200, 403 (blocked through the admin API), 429 (request_rate, concurrency) or 503 (fleet, utilization, adaptive). */
  readonly status: 200 | 403 | 429 | 503;
  readonly limiter: LimiterName | null;
  readonly darkLimiter: LimiterName | null;
  /** Allowed with no limiter at all (redis.fallback "open" while the store could not answer). */
  readonly failedOpen: boolean;
  /** Decided by the local fallback table while the store could not answer in time. */
  readonly degraded: boolean;
  /** Why the store did not decide (degraded, failed open or refused), else null. */
  readonly failReason: FailReason | null;
  readonly limit: number;
  readonly remaining: number;
  readonly reset: number;
  readonly retryAfter: number;
  readonly rate: number;
  readonly concurrencyLimit: number;
  readonly concurrencyRemaining: number;
  /** The tokens the request asked for (its cost, 0 counted as 1). */
  readonly cost: number;
  /** The limit or quota (request_rate.limits, quotas) that rejected the request (limiter 'request_rate'), or null. */
  readonly rule: string | null;
  /** The first dark-mode limit or quota that would have rejected the request, or null. */
  readonly darkRule: string | null;
  /** The limits and quotas that applied to the request, by name: the limits in policy order, then the quotas. */
  readonly rules: string[];
  /** The tenant is blocked through the admin API (Floodwall#admin.block): status 403, nothing consumed. */
  readonly blocked: boolean;
  /** When the block ends, in seconds since the epoch; null when not blocked, or blocked until unblocked. */
  readonly blockedUntil: number | null;
  /** acquire(): the milliseconds the request waited for its turn (0: at once; 0 for admit). */
  readonly waitedMs: number;
  readonly ticket: Ticket;
  /** The core's response headers, in order: RateLimit-Policy, RateLimit, RateLimit-Limit, -Remaining, -Reset, Retry-After. */
  readonly headers: Record<string, string>;
  /** The Content-Type of a rejection's body ('application/json' or 'application/problem+json'), or null when allowed. */
  readonly contentType: string | null;
  /** The body of a rejection (403, 429 or 503), or null when allowed. */
  readonly body: string | null;
  toJSON(): object;
}

/** A tenant's own bucket, set by Admin#setOverride. */
export interface TenantOverride {
  rate: number;
  burst: number;
}

/** A tenant with a control record, as Admin#list gives it. */
export interface TenantRecord {
  /** The tenant id (control characters and bytes that are not UTF-8 escaped). */
  tenant: string;
  tier: string | null;
  override: TenantOverride | null;
  blocked: boolean;
  /** When the block ends (RFC 3339, UTC), or null when blocked until unblocked (or not blocked). */
  blocked_until: string | null;
}

/** A tenant as the store has it (Admin#show). */
export interface TenantInfo extends TenantRecord {
  /** The tier the store names that the policy does not have (its bucket and rules do not apply). */
  tier_unknown?: true;
  /** With a request_rate section: the bucket in force (the override's, the tier's or the policy's). */
  request_rate?: { limit: number; remaining: number; rate: number; full_in_s: number };
  /** With a concurrency section. */
  concurrency?: { limit: number; in_flight: number };
  /** The limits of the tenant's tier (or the policy's), with the tokens each has left. */
  limits: Array<{ name: string; limit: number; remaining: number; rate: number; routes: string[] }>;
  /** The quotas of the tenant's tier (or the policy's), with what each has left and when its window ends. */
  quotas: Array<{ name: string; limit: number; remaining: number; period: 'hour' | 'day' | 'month'; reset: string; reset_in_s: number }>;
  /** The store's clock (RFC 3339, UTC). */
  store_time: string;
}

/**
 * The admin API of a client (Floodwall#admin): a tenant's control record, kept in the store, applied to the
 * next request of every client of it (Redis: the fleet; shm://: the machine; memory://: this client). Each
 * call waits on the store off the event loop (at most its deadline, at least a second). A bad argument
 * rejects with InvalidArgumentError naming it ('rate', 'tier', 'tenant', ...), a store that cannot be
 * reached with StoreError, a closed client with ClosedError.
 */
export class Admin {
  private constructor();
  /** Gives the tenant its own request-rate bucket (rate tokens/second, burst tokens). */
  setOverride(tenant: string | Uint8Array, options: TenantOverride): Promise<void>;
  /** Removes the tenant's own bucket: its tier's, or the policy's, applies again. */
  removeOverride(tenant: string | Uint8Array): Promise<void>;
  /** Puts the tenant in a tier of the policy's "tiers"; null takes it out of any. */
  setTier(tenant: string | Uint8Array, tier: string | null): Promise<void>;
  /** Blocks the tenant (403, nothing consumed) for `seconds` (above 0), or until unblock() without them. */
  block(tenant: string | Uint8Array, options?: { seconds?: number | null }): Promise<void>;
  unblock(tenant: string | Uint8Array): Promise<void>;
  show(tenant: string | Uint8Array): Promise<TenantInfo>;
  /** Forgets the tenant's buckets and quotas (full again); its control record and in-flight slots stay. */
  reset(tenant: string | Uint8Array): Promise<void>;
  /** Sets a limiter's mode for every client of the store (over each one's setMode); null: each one's own again. */
  setMode(limiter: LimiterName, mode: Mode | null): Promise<void>;
  /** The tenants with a control record, at most `limit` (default 1000). */
  list(options?: { limit?: number }): Promise<TenantRecord[]>;
}

export class Floodwall {
  /** @param policy an object, a JSON document or the path of a JSON file. @throws PolicyError, StoreError */
  constructor(policy?: Policy | string | URL);
  admit(request: AdmitRequest): Promise<Decision>;
  /**
   * Waits for the request's turn instead of a 429 (maxWait in ms, default 10000, capped at burst / rate);
   * resolves with admit()'s decision at the turn. Aborting `signal` before the turn rejects with its reason
   * and gives the reservation back. Never blocks the event loop.
   */
  acquire(request: AcquireRequest): Promise<Decision>;
  /** The tenant id admit() would use: the tenant as given, else "key:<32 hex>", "ip:<address>" or "anonymous". */
  tenantKey(request: RequestIdentity): string;
  /**
   * The credential an app checks before it says `verified`: the Bearer token (without its scheme) or the API
   * key, trimmed, that the policy's tenant.from would key the request on; null when there is none.
   */
  requestCredential(request: CredentialRequest): string | null;
  /**
   * The route the policy's route rules match: the route made canonical ('/orders/{id}' and '/orders/<int:id>'
   * are '/orders/:id'; '(.:format)', '{/:id}' and a trailing '/' dropped), else the path, else ''.
   */
  requestRoute(request: RouteRequest): string;
  /** The longest an admit waits for the store, in ms (redis.deadline_ms, 50 by default): verifyTimeout's default. */
  readonly deadlineMs: number;
  release(decision: Decision | Ticket | null | undefined): void;
  setMode(limiter: LimiterName, mode: Mode): void;
  getMode(limiter: LimiterName): Mode;
  reportUtilization(u: number): void;
  sheddingAmount(): number;
  metrics(): Record<string, any>;
  prometheus(): string;
  /** The admin API: tenants' overrides, tiers, blocks and resets, and fleet-wide modes. */
  readonly admin: Admin;
  close(): void;
  readonly closed: boolean;
}

export type FloodwallErrorCode = 'FW_ERROR' | 'FW_ENOMEM' | 'FW_EINVAL' | 'FW_EPOLICY' | 'FW_ESTORE' | 'FW_ECLOSED';
export class FloodwallError extends Error {
  readonly code: FloodwallErrorCode;
  /** The field the message names ('request_rate.burst', 'tenant', 'cost'), or null. */
  readonly field: string | null;
}
export class PolicyError extends FloodwallError {}
export class StoreError extends FloodwallError {}
export class InvalidArgumentError extends FloodwallError {}
export class ClosedError extends FloodwallError {}

/** The runtime version of the core. */
export const version: string;

/** The part of an @opentelemetry/api Meter that otel.instrument uses (structural: no import of the API's types). */
export interface OtelMeter {
  createObservableCounter(name: string, options?: { description?: string }): object;
  createObservableGauge(name: string, options?: { description?: string }): object;
  addBatchObservableCallback(callback: (result: any) => void, observables: object[]): void;
}

/**
 * OpenTelemetry metrics: instrument(client, meter?) registers one observable instrument per family of the
 * client's Prometheus text (a counter for each counter, a gauge for each gauge; the same names, descriptions
 * and attributes) on `meter`, default the global MeterProvider's meter "floodwall" (needs @opentelemetry/api).
 * Returns the instruments.
 */
export const otel: {
  instrument(client: Floodwall, meter?: OtelMeter): object[];
  parseFamilies(text: string): {
    families: Map<string, { type: string; help: string }>;
    samples: Map<string, Array<{ labels: Record<string, string>; value: number }>>;
  };
};

// ---------------------------------------------------------------------------------------- Express

/** The parts of Express's request and response that the middleware uses (no dependency on @types/express). */
export interface MiddlewareRequest {
  method: string;
  /** Every header of the request, [name, value, ...]: what the core derives the tenant from. */
  rawHeaders?: string[];
  socket?: { remoteAddress?: string };
  baseUrl?: string;
  route?: { path?: unknown };
  floodwall?: Decision;
  [key: string]: any;
}
export interface MiddlewareResponse {
  statusCode: number;
  headersSent: boolean;
  setHeader(name: string, value: string | number): unknown;
  end(body?: string): unknown;
  on(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
  [key: string]: any;
}
export type NextFunction = (err?: unknown) => void;

// req.floodwall on Express' own Request: @types/express-serve-static-core's Request extends the global
// Express.Request, which is there to be augmented (passport and express-session do the same). Declared
// globally rather than as `declare module 'express-serve-static-core'`, which would fail to compile for an
// app without @types/express. Set by the middleware on the requests it decides; absent on skipped ones.
declare global {
  namespace Express {
    interface Request {
      /** The decision the floodwall middleware made for this request (absent when it was skipped). */
      floodwall?: Decision;
    }
  }
}
type Key = string | Uint8Array | null | undefined;
type PerRequest<T, A, B> = T | ((a: A, b: B) => T | Promise<T>);

/**
 * The options of every Node integration (Express, Fastify, Koa), resolved the same way by each. `A` and `B`
 * are what the framework's hooks get: Express (req, res), Fastify (request, reply), Koa (ctx).
 * A value may be given as it is or as a function of the request, possibly async. A wrong type is a TypeError
 * naming the option when the middleware is made (the plugin registered), never at the first request.
 */
export interface IntegrationOptions<A, B = undefined> {
  /**
   * The tenant of a request. Absent, or returning undefined or null: the core derives it from the request's
   * raw headers and its peer address (policy section "tenant"). '' is the anonymous tenant.
   */
  keyGenerator?: (a: A, b: B) => Key | Promise<Key>;
  /**
   * The route family, a pattern in the framework's syntax (canonical in the core). Default: the matched route's
   * pattern (Express: the route the app's router matches; Fastify: request.routeOptions.url; Koa: @koa/router's).
   * The request's path is passed too: without a pattern the policy's route globs match it.
   */
  route?: PerRequest<string | undefined, A, B>;
  /** Tokens the request costs (default 1). */
  cost?: PerRequest<number, A, B>;
  /** Never counted by the fleet shedder, shed last (default false). */
  critical?: PerRequest<boolean, A, B>;
  /** Sandbox traffic, shed first (default false). */
  sandbox?: PerRequest<boolean, A, B>;
  /** Requests for which it is (or answers) true are not limited at all. */
  skip?: PerRequest<boolean, A, B>;
  /**
   * Vouches for the request's credential (the Bearer token or API key, as Floodwall#requestCredential gives
   * it) when the core derives the tenant: truthy, the credential names the tenant; falsy, the request is
   * keyed by its address. Asked only for requests that carry one. A hook that throws, rejects or takes
   * longer than verifyTimeout counts as falsy and is reported once (process warning 'FLOODWALL_VERIFY').
   * Without it every request without a keyGenerator tenant is keyed by its address (by default).
   */
  verify?: (credential: string, a: A) => unknown;
  /** Milliseconds verify may take (default fw.deadlineMs). */
  verifyTimeout?: number;
  /**
   * Off by default (a request the bucket refuses is answered 429 at once). Milliseconds: such a request
   * waits for its turn instead (fw.acquire: a timer, the event loop runs on) when the turn is within
   * maxWait, then goes on; further away it is a 429 as before. Capped at the bucket's burst / rate.
   */
  maxWait?: number;
}

export interface ExpressOptions<Req extends MiddlewareRequest = MiddlewareRequest, Res extends MiddlewareResponse = MiddlewareResponse>
  extends IntegrationOptions<Req, Res> {
  /** Sends a rejection (default: the decision's status (403, 429 or 503), body and contentType; its limit headers are already set on res). */
  handler?: (req: Req, res: Res, next: NextFunction, decision: Decision) => unknown;
}

export function express<Req extends MiddlewareRequest = MiddlewareRequest, Res extends MiddlewareResponse = MiddlewareResponse>(
  fw: Floodwall,
  options?: ExpressOptions<Req, Res>,
): (req: Req, res: Res, next: NextFunction) => void;

// ---------------------------------------------------------------------------------------- Fastify

/** The parts of Fastify's request and reply the plugin uses (no dependency on fastify's types). */
export interface FastifyLikeRequest {
  raw: { method?: string; url?: string; rawHeaders?: string[]; socket?: { remoteAddress?: string } };
  routeOptions: { url?: string; config?: any };
  floodwall?: Decision | null;
  [key: string]: any;
}
export interface FastifyLikeReply {
  code(status: number): this;
  header(name: string, value: unknown): this;
  headers(values: Record<string, string>): this;
  send(payload?: unknown): this;
  [key: string]: any;
}

/** A route's own options: `config: { floodwall: { cost, critical, sandbox, skip } }`, checked at the route's registration. */
export interface FastifyRouteOptions<Req = FastifyLikeRequest, Rep = FastifyLikeReply> {
  cost?: PerRequest<number, Req, Rep>;
  critical?: PerRequest<boolean, Req, Rep>;
  sandbox?: PerRequest<boolean, Req, Rep>;
  skip?: PerRequest<boolean, Req, Rep>;
}

export interface FastifyOptions<Req = FastifyLikeRequest, Rep = FastifyLikeReply> extends IntegrationOptions<Req, Rep> {
  /** The Floodwall that decides (required; open). */
  client: Floodwall;
  /** Sends a rejection (default: reply.code(status), the core's content type and body; the limit headers are already set). */
  handler?: (request: Req, reply: Rep, decision: Decision) => unknown;
}

/**
 * The Fastify plugin (Fastify 4 and 5): `app.register(floodwall.fastify, { client: fw, ...options })`.
 * App-wide (fastify-plugin's skip-override); the decision is request.floodwall.
 */
export const fastify: {
  (instance: any, options: FastifyOptions<any, any>, done: (err?: Error) => void): void;
  default: typeof fastify;
};

// -------------------------------------------------------------------------------------------- Koa

/** The parts of Koa's context the middleware uses (no dependency on koa's types). */
export interface KoaLikeContext {
  req: { method?: string; rawHeaders?: string[]; socket?: { remoteAddress?: string } };
  res: { on(event: string, listener: () => void): unknown };
  path: string;
  method: string;
  state: { floodwall?: Decision; [key: string]: any };
  set(field: Record<string, string>): void;
  [key: string]: any;
}

export interface KoaOptions<Ctx = KoaLikeContext> extends IntegrationOptions<Ctx> {
  /** Sends a rejection (default: ctx.status, the core's content type and body; the limit headers are already set). */
  handler?: (ctx: Ctx, next: () => Promise<unknown>, decision: Decision) => unknown;
  /**
   * The @koa/router Router(s) whose matched route is the route family when the middleware runs before them
   * (default: the routers the app uses, found by their router.routes() middleware).
   */
  router?: { match(path: string, method: string): unknown; stack: unknown[] } | Array<{ match(path: string, method: string): unknown; stack: unknown[] }>;
}

/** Koa middleware: `app.use(floodwall.koa(fw, options))`; the decision is ctx.state.floodwall. */
export function koa<Ctx = KoaLikeContext>(fw: Floodwall, options?: KoaOptions<Ctx>): (ctx: Ctx, next: () => Promise<unknown>) => Promise<unknown>;

// ------------------------------------------------------------------------------------ client side

/** The core's backoff defaults (FW_BACKOFF_INIT), in milliseconds: the same in every floodwall language. */
export const backoffDefaults: {
  /** Milliseconds of the first retry's range (100). */
  readonly base: number;
  /** The largest range in milliseconds (20000). */
  readonly cap: number;
  /** Calls in all, the first one included (5): retry() makes attempts - 1 retries. */
  readonly attempts: number;
};

export interface BackoffOptions {
  /** Milliseconds of the first retry's range (default backoffDefaults.base). */
  base?: number;
  /** The largest range in milliseconds (default backoffDefaults.cap). */
  cap?: number;
  /** The server's Retry-After (seconds or an HTTP-date): the wait starts there. */
  retryAfter?: string | number | null;
  /** A uniform random number in [0, 1) (default Math.random). */
  random?: () => number;
}
/** Milliseconds to wait before retry `attempt` (0-based): Retry-After plus full jitter, computed by the core. */
export function backoff(attempt: number, options?: BackoffOptions): number;
/** Retry-After (delay-seconds or an HTTP-date, counted from `now` in ms) in milliseconds, or null. */
export function parseRetryAfter(value: string | number | null | undefined, now?: number): number | null;

export interface RetryOptions extends Omit<BackoffOptions, 'retryAfter'> {
  /** Retries after the first call (default backoffDefaults.attempts - 1). */
  retries?: number;
  /** Statuses that are retried (default [429, 503]). */
  statuses?: number[];
  signal?: AbortSignal;
  onRetry?: (info: { attempt: number; status: number; wait: number }) => void;
}
export function retry<R extends { status?: number; statusCode?: number; headers?: any }>(
  fn: (attempt: number) => R | Promise<R>,
  options?: RetryOptions,
): Promise<R>;
