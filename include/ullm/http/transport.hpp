#pragma once

/// The seam between ullm and the network: blocking requests, requests that report their end
/// to a handler, and pull-based streams.

#include <ullm/http/http_types.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

namespace ullm {

/// A response body arriving piece by piece. Owned by one consumer thread; `cancel()` may be
/// called from any thread.
class HttpStream {
public:
    virtual ~HttpStream() = default;

    /// Waits for the status line and headers. Throws `TransportError` when the request failed
    /// before a response arrived, `CancelledError` when cancelled.
    virtual const HttpResponseHead& head() = 0;

    /// Waits for more body bytes and moves them into `out` (replacing its contents). Returns
    /// false once the body is complete. Bytes that arrived before a failure are returned first;
    /// the failure is thrown by the following call: `TransportError` (disconnect, idle timeout)
    /// or `CancelledError`.
    virtual bool read(std::string& out) = 0;

    /// Aborts the transfer. Waiting and later calls throw `CancelledError`. Thread-safe and
    /// idempotent.
    virtual void cancel() noexcept = 0;

    /// Asks to be told, by `notify`, whenever `head()` or `read()` has become able to return
    /// without waiting (something arrived, or the stream ended), so that a consumer can read
    /// it without a thread of its own. `notify` runs on a transport thread and must not block;
    /// it may run spuriously. Returns false, and never calls `notify`, when the stream cannot
    /// tell (this default): its reads may wait.
    // NOLINTNEXTLINE(performance-unnecessary-value-param): an override keeps it
    virtual bool notify_when_ready(std::function<void()> notify) {
        (void)notify;
        return false;
    }

    /// Whether the next `head()` (until it has returned) or `read()` returns without waiting.
    /// Meaningful once `notify_when_ready` returned true; true by default.
    [[nodiscard]] virtual bool ready() { return true; }
};

/// A request started with `Transport::start`. Dropping it does not cancel the request.
class PendingRequest {
public:
    virtual ~PendingRequest() = default;

    /// Aborts the request: its handler is called with `CancelledError`, unless the request
    /// ended first. Thread-safe and idempotent; never blocks and never calls the handler itself.
    virtual void cancel() noexcept = 0;
};

/// Receives the end of a started request, exactly once: the whole response (HTTP error
/// statuses included) with a null `error`, or an empty response and the error that ended it
/// (`TransportError`, `CancelledError`). Runs on a transport thread: it must return quickly and
/// never block on another request of the same transport.
using ResponseHandler = std::function<void(HttpResponse response, std::exception_ptr error)>;

/// Sends HTTP requests. Implementations are thread-safe.
class Transport {
public:
    virtual ~Transport() = default;

    /// Sends `request` and waits for the whole response. HTTP error statuses are returned, not
    /// thrown. Throws `TransportError` when no response could be had and `CancelledError` when
    /// `stop` is requested.
    virtual HttpResponse send(const HttpRequest& request, std::stop_token stop = {}) = 0;

    /// Starts `request` and returns its body as a stream. Requesting `stop` cancels it.
    virtual std::unique_ptr<HttpStream> open_stream(const HttpRequest& request,
                                                    std::stop_token stop = {}) = 0;

    /// As `open_stream`, for a consumer that only ever waits in `head()` and `read()`, on one
    /// thread, and never asks `notify_when_ready`. A transport may then run the transfer on
    /// that thread, inside those calls (`CurlTransport` does). This default is `open_stream`.
    virtual std::unique_ptr<HttpStream> open_blocking_stream(const HttpRequest& request,
                                                             std::stop_token stop = {}) {
        return open_stream(request, std::move(stop));
    }

    /// Starts `request` and returns at once; `on_done` receives its end (see
    /// `ResponseHandler`). The transport must outlive the request. `CurlTransport` runs it on
    /// its I/O loop, no thread per request; this default runs `send` on a thread of its own per
    /// request, so that any transport can serve the async calls.
    virtual std::shared_ptr<PendingRequest> start(const HttpRequest& request,
                                                  ResponseHandler on_done);
};

}  // namespace ullm
