#pragma once

/// The libcurl transport: one multi handle driven by one I/O thread per transport.

#include <ullm/http/transport.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace ullm {

/// Settings of a `CurlTransport`. A value type.
struct CurlTransportOptions {
    /// Path of a PEM CA bundle. Empty: `CURL_CA_BUNDLE` or `SSL_CERT_FILE` from the
    /// environment, else libcurl's default store.
    std::string ca_bundle;
    /// Proxy URL. Empty: libcurl's environment handling (`https_proxy`, `no_proxy`, …).
    std::string proxy;
    /// Turns TLS certificate and host name verification off. For local test servers only.
    bool insecure_skip_tls_verify = false;
    /// Largest body `send()` buffers before failing with `response_too_large`.
    std::size_t max_response_bytes = std::size_t{256} << 20;
    /// A stream stops reading from the socket while this many unread bytes wait for the
    /// consumer (back-pressure), and resumes when they are taken.
    std::size_t stream_buffer_bytes = std::size_t{4} << 20;
    /// The User-Agent header sent with every request.
    std::string user_agent = "ullm";
};

/// A `Transport` over libcurl. Streams and started requests of one transport share one curl
/// multi handle driven by one I/O thread (connection reuse; HTTP/2 multiplexing where the server
/// offers it), so concurrent streams and async calls cost no thread each. A blocking `send`
/// (and a blocking stream's reader) drives its transfer on the calling thread instead, on a
/// handle pair the transport keeps with its open connections for the next call (up to 64 idle
/// pairs): no wake-up of the I/O thread and back. Thread-safe. Streams may outlive the transport:
/// they then fail with `connection_failed`.
class CurlTransport final : public Transport {
public:
    /// Starts the I/O thread. Throws `TransportError` if libcurl cannot be initialised.
    explicit CurlTransport(CurlTransportOptions options = {});
    /// Aborts every transfer still running and joins the I/O thread.
    ~CurlTransport() override;

    CurlTransport(const CurlTransport&) = delete;
    CurlTransport& operator=(const CurlTransport&) = delete;

    HttpResponse send(const HttpRequest& request, std::stop_token stop = {}) override;
    std::unique_ptr<HttpStream> open_stream(const HttpRequest& request,
                                            std::stop_token stop = {}) override;
    /// Runs the transfer on the reader's thread, on a kept handle pair as `send` does: the
    /// bytes are decoded where they arrive. Nothing is read from the socket between the
    /// reader's calls, so its pace is the back-pressure.
    std::unique_ptr<HttpStream> open_blocking_stream(const HttpRequest& request,
                                                     std::stop_token stop = {}) override;
    /// Runs on the I/O loop; the handler is called on the I/O thread (or, when the transport
    /// has been shut down, on the calling thread). It may hold the last reference to the
    /// transport: the I/O thread then ends once the handler has returned.
    std::shared_ptr<PendingRequest> start(const HttpRequest& request,
                                          ResponseHandler on_done) override;

    /// Transfers currently running on the I/O thread (for tests and diagnostics).
    [[nodiscard]] std::size_t active_transfers() const;

    class Engine;

private:
    std::shared_ptr<Engine> engine_;
};

}  // namespace ullm
