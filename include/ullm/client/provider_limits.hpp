#pragma once

/// Limits on the requests one client sends one provider (`ClientOptions::limits`).

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ullm {

/// How much one provider is sent at once and per minute. A value type; 0 means no limit.
///
/// A request that the limits hold back waits in its provider's queue, without a thread of its
/// own when it is async. The queue serves its lanes in turn (a conversation's requests form
/// a lane of their own; `AsyncOptions::lane` numbers others, 0 by default), so one busy
/// conversation cannot starve the rest; within a lane, requests keep their order. Every HTTP
/// request counts: each attempt of a retried call, and a stream until it ends.
struct ProviderLimits {
    /// Requests in flight at once.
    std::size_t max_in_flight = 0;
    /// Requests started in any 60 seconds.
    std::size_t requests_per_minute = 0;
    /// Tokens in any 60 seconds. A request is charged its estimate when it starts (its body at
    /// about 4 bytes a token, plus its `max_tokens`, else 4,096) and, once it ends, the tokens
    /// its usage reports instead. A request larger than the whole limit starts alone, when
    /// nothing else was charged in the last 60 seconds. Not negative (else `invalid_limits`).
    std::int64_t tokens_per_minute = 0;
    /// Requests that may wait at once; one more fails at once with `QueueFullError`
    /// (`queue_full`). 0: a request that cannot start at once fails.
    std::size_t max_queued = 1024;
    /// The longest a request waits in the queue; then it fails with `QueueTimeoutError`
    /// (`queue_timeout`) and nothing is sent. 0: no bound (a blocking call's own stop token,
    /// an async call's cancellation still end the wait). Not negative (else `invalid_limits`).
    std::chrono::milliseconds max_queue_wait{0};
};

}  // namespace ullm
