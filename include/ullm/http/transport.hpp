#pragma once

/// The seam between ullm and the network: blocking requests and pull-based streams.

#include <ullm/http/http_types.hpp>

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
};

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
};

}  // namespace ullm
