#include <ullm/store/redis_session_store.hpp>

#include <ullm/core/error.hpp>

#include "../connection_pool.hpp"
#include "../store_rules.hpp"

#include <hiredis/hiredis.h>

#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ullm {

namespace {

// KEYS: the session hash, the tenant's index. ARGV: expected version, new version, snapshot,
// now (ms), ttl (ms, 0 none), session id. Returns {1, new} or {0, actual}.
constexpr std::string_view put_script = R"lua(
local cur = redis.call('HGET', KEYS[1], 'v')
if cur and not string.match(cur, '^[1-9][0-9]*$') then
  return redis.error_reply('ULLM_CORRUPT a stored version is not a positive integer')
end
if not cur then cur = '0' end
if cur ~= ARGV[1] then return {0, cur} end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 't', ARGV[4], 'd', ARGV[3])
redis.call('ZADD', KEYS[2], 0, ARGV[6])
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return {1, ARGV[2]}
)lua";

// KEYS: the session hash, the tenant's index. ARGV: session id. Returns how many were deleted.
constexpr std::string_view remove_script = R"lua(
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return n
)lua";

// KEYS: the tenant's index. ARGV: the lex minimum ('-' or '(' .. after), how many, the prefix of
// the tenant's session keys. Returns {id, version, updated} rows in id order; index entries
// whose session expired are removed on the way.
constexpr std::string_view list_script = R"lua(
local out = {}
local min = ARGV[1]
local want = tonumber(ARGV[2])
while #out < want do
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, want - #out)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local key = ARGV[3] .. string.gsub(id, '.', function(c) return string.format('%02x', string.byte(c)) end)
    local row = redis.call('HMGET', key, 'v', 't')
    if row[1] then out[#out + 1] = {id, row[1], row[2] or '0'} else redis.call('ZREM', KEYS[1], id) end
    min = '(' .. id
  end
end
return out
)lua";

struct ContextDeleter {
    void operator()(redisContext* context) const noexcept { redisFree(context); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
    void operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

bool valid_prefix(std::string_view prefix) {
    if (prefix.empty() || prefix.size() > 64) return false;
    return std::all_of(prefix.begin(), prefix.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
    });
}

// A positive decimal integer that fits in int64, or nullopt.
std::optional<std::int64_t> parse_positive(std::string_view text) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
    return value;
}

std::string reply_text(const redisReply* reply) {
    return {reply->str, reply->len};
}

}  // namespace

struct RedisSessionStore::Impl {
    RedisStoreOptions options;
    std::string target;
    std::string put_sha;
    std::string remove_sha;
    std::string list_sha;

    detail::ConnectionPool<Context> pool;

    [[noreturn]] void fail(const std::string& what, std::string detail, bool retryable) const {
        if (!options.password.empty()) {
            for (std::size_t at = detail.find(options.password); at != std::string::npos;
                 at = detail.find(options.password, at)) {
                detail.replace(at, options.password.size(), "***");
            }
        }
        throw SessionStoreError(
            "redis session store " + target + ": cannot " + what + ": " + detail, retryable);
    }

    std::string session_key(std::string_view tenant, std::string_view session_id) const {
        return options.key_prefix + ":s:{" + detail::to_hex(tenant) +
               "}:" + detail::to_hex(session_id);
    }
    std::string index_key(std::string_view tenant) const {
        return options.key_prefix + ":i:{" + detail::to_hex(tenant) + "}";
    }

    // One command; a null reply (the connection broke) and an error reply throw.
    Reply command(redisContext* context, const std::vector<std::string>& args,
                  const std::string& what) const {
        std::vector<const char*> argv;
        std::vector<std::size_t> lengths;
        for (const auto& arg : args) {
            argv.push_back(arg.data());
            lengths.push_back(arg.size());
        }
        Reply reply(static_cast<redisReply*>(
            redisCommandArgv(context, static_cast<int>(argv.size()), argv.data(), lengths.data())));
        if (reply == nullptr) {
            fail(what, context->errstr[0] != '\0' ? context->errstr : "the connection broke", true);
        }
        if (reply->type == REDIS_REPLY_ERROR) {
            const std::string text = reply_text(reply.get());
            // LOADING, BUSY, TRYAGAIN, MASTERDOWN: the server will answer later.
            const bool retryable = text.rfind("LOADING", 0) == 0 || text.rfind("BUSY", 0) == 0 ||
                                   text.rfind("TRYAGAIN", 0) == 0 ||
                                   text.rfind("MASTERDOWN", 0) == 0;
            if (text.rfind("NOSCRIPT", 0) != 0) fail(what, text, retryable);
        }
        return reply;
    }

    std::string load(redisContext* context, std::string_view script) const {
        const Reply reply =
            command(context, {"SCRIPT", "LOAD", std::string(script)}, "load a script");
        if (reply->type != REDIS_REPLY_STRING) fail("load a script", "unexpected reply", false);
        return reply_text(reply.get());
    }

    // EVALSHA, loading the script again when the server lost it (a restart, SCRIPT FLUSH).
    Reply run_script(redisContext* context, std::string_view script, const std::string& sha,
                     std::vector<std::string> args, const std::string& what) const {
        args.insert(args.begin(), {"EVALSHA", sha});
        Reply reply = command(context, args, what);
        if (reply->type == REDIS_REPLY_ERROR) {  // NOSCRIPT
            (void)load(context, script);
            reply = command(context, args, what);
            if (reply->type == REDIS_REPLY_ERROR) fail(what, reply_text(reply.get()), true);
        }
        return reply;
    }

    Context connect() {
        const auto ms = options.timeout.count();
        const timeval tv{static_cast<time_t>(ms / 1000),
                         static_cast<suseconds_t>(ms % 1000 * 1000)};
        Context context(redisConnectWithTimeout(options.host.c_str(), options.port, tv));
        if (context == nullptr) fail("connect", "out of memory", true);
        if (context->err != 0) fail("connect", context->errstr, true);
        if (redisSetTimeout(context.get(), tv) != REDIS_OK) fail("connect", context->errstr, true);
        if (!options.password.empty()) {
            std::vector<std::string> auth{"AUTH"};
            if (!options.username.empty()) auth.push_back(options.username);
            auth.push_back(options.password);
            (void)command(context.get(), auth, "authenticate");
        }
        return context;
    }

    // Runs `body(context)` on a pooled connection; one that broke is not kept.
    template <typename Body>
    auto with_connection(Body&& body) {
        return pool.run(
            [&] { return connect(); },
            [&] {
                fail("get a connection",
                     "all " + std::to_string(options.pool_size) + " connections stayed busy", true);
            },
            [](redisContext* context) { return context->err == 0; }, std::forward<Body>(body));
    }

    std::uint64_t version_of(const redisReply* reply) const {
        if (reply->type == REDIS_REPLY_STRING) {
            const auto value = parse_positive(reply_text(reply));
            if (value && *value >= 1) return static_cast<std::uint64_t>(*value);
        }
        throw SessionStoreError("redis session store " + target +
                                ": a stored version is not a positive integer; the data was "
                                "changed outside ullm");
    }

    std::int64_t time_of(const redisReply* reply) const {
        if (reply->type == REDIS_REPLY_STRING) {
            if (const auto value = parse_positive(reply_text(reply))) return *value;
        }
        throw SessionStoreError("redis session store " + target +
                                ": a stored time is not an integer; the data was changed "
                                "outside ullm");
    }
};

RedisSessionStore::RedisSessionStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisSessionStore::~RedisSessionStore() = default;

std::shared_ptr<RedisSessionStore> RedisSessionStore::open(const RedisStoreOptions& options) {
    if (!valid_prefix(options.key_prefix)) {
        throw SessionStoreError(
            "redis session store: the key prefix must be 1..64 of A-Z a-z 0-9 _ . -");
    }
    if (options.pool_size < 1 || options.pool_size > 64) {
        throw SessionStoreError("redis session store: the pool size must be 1..64, not " +
                                std::to_string(options.pool_size));
    }
    if (options.timeout.count() <= 0 || options.ttl.count() < 0) {
        throw SessionStoreError(
            "redis session store: the timeout must be positive and the ttl "
            "not negative");
    }
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->target = options.host + ":" + std::to_string(options.port);
    impl->pool.size = options.pool_size;
    impl->pool.wait = options.timeout;
    impl->with_connection([&](redisContext* context) {
        impl->put_sha = impl->load(context, put_script);
        impl->remove_sha = impl->load(context, remove_script);
        impl->list_sha = impl->load(context, list_script);
        return 0;
    });
    return std::shared_ptr<RedisSessionStore>(new RedisSessionStore(std::move(impl)));
}

std::optional<StoredSession> RedisSessionStore::get(std::string_view tenant,
                                                    std::string_view session_id) {
    validate_session_key(tenant, session_id);
    return impl_->with_connection([&](redisContext* context) -> std::optional<StoredSession> {
        const Reply reply = impl_->command(
            context, {"HMGET", impl_->session_key(tenant, session_id), "v", "t", "d"},
            "read a session");
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) {
            impl_->fail("read a session", "unexpected reply", false);
        }
        if (reply->element[0]->type == REDIS_REPLY_NIL) return std::nullopt;
        const std::uint64_t version = impl_->version_of(reply->element[0]);
        const std::int64_t updated = impl_->time_of(reply->element[1]);
        if (reply->element[2]->type != REDIS_REPLY_STRING) {
            throw SessionStoreError("redis session store " + impl_->target +
                                    ": a stored session has no snapshot; the data was changed "
                                    "outside ullm");
        }
        return StoredSession{std::string(tenant), std::string(session_id), version,
                             reply_text(reply->element[2]), detail::from_unix_ms(updated)};
    });
}

std::uint64_t RedisSessionStore::put(std::string_view tenant, std::string_view session_id,
                                     std::string_view snapshot, std::uint64_t expected_version) {
    validate_session_key(tenant, session_id);
    if (expected_version >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw SessionStoreError("redis session store " + impl_->target +
                                ": the session version cannot grow any further");
    }
    const std::string now = std::to_string(detail::to_unix_ms(detail::now_ms()));
    return impl_->with_connection([&](redisContext* context) -> std::uint64_t {
        const Reply reply =
            impl_->run_script(context, put_script, impl_->put_sha,
                              {"2", impl_->session_key(tenant, session_id),
                               impl_->index_key(tenant), std::to_string(expected_version),
                               std::to_string(expected_version + 1), std::string(snapshot), now,
                               std::to_string(impl_->options.ttl.count()), std::string(session_id)},
                              "write a session");
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_INTEGER) {
            impl_->fail("write a session", "unexpected reply", false);
        }
        if (reply->element[0]->integer == 1) return expected_version + 1;
        const auto actual = parse_positive(reply_text(reply->element[1]));
        detail::throw_conflict(expected_version, static_cast<std::uint64_t>(actual.value_or(0)));
    });
}

bool RedisSessionStore::remove(std::string_view tenant, std::string_view session_id) {
    validate_session_key(tenant, session_id);
    return impl_->with_connection([&](redisContext* context) {
        const Reply reply = impl_->run_script(context, remove_script, impl_->remove_sha,
                                              {"2", impl_->session_key(tenant, session_id),
                                               impl_->index_key(tenant), std::string(session_id)},
                                              "remove a session");
        return reply->type == REDIS_REPLY_INTEGER && reply->integer > 0;
    });
}

SessionPage RedisSessionStore::list(std::string_view tenant, const SessionListOptions& options) {
    const detail::ListQuery query = detail::parse_list_query(tenant, options);
    std::vector<SessionSummary> rows = impl_->with_connection([&](redisContext* context) {
        const Reply reply = impl_->run_script(
            context, list_script, impl_->list_sha,
            {"1", impl_->index_key(tenant), query.after.empty() ? "-" : "(" + query.after,
             std::to_string(query.limit + 1),
             impl_->options.key_prefix + ":s:{" + detail::to_hex(tenant) + "}:"},
            "list sessions");
        if (reply->type != REDIS_REPLY_ARRAY)
            impl_->fail("list sessions", "unexpected reply", false);
        std::vector<SessionSummary> found;
        for (std::size_t i = 0; i < reply->elements; ++i) {
            const redisReply* row = reply->element[i];
            if (row->type != REDIS_REPLY_ARRAY || row->elements != 3 ||
                row->element[0]->type != REDIS_REPLY_STRING) {
                impl_->fail("list sessions", "unexpected reply", false);
            }
            found.push_back(SessionSummary{reply_text(row->element[0]),
                                           impl_->version_of(row->element[1]),
                                           detail::from_unix_ms(impl_->time_of(row->element[2]))});
        }
        return found;
    });
    return detail::finish_page(std::move(rows), query.limit);
}

}  // namespace ullm
