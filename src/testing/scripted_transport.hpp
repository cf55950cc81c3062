#pragma once

// Internal to the scripted provider: the in-process transport its requests take. It answers at
// once; what the answer is, the provider's decoder decides (it takes the next queued answer).

#include <ullm/http/transport.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

namespace ullm::detail {

/// The content type of every answer of a `ScriptedTransport`, by which its decoders know one.
inline constexpr std::string_view scripted_content_type = "application/x-ullm-scripted";

/// How many event lines each open stream of a `ScriptedTransport` sends after its ticket line,
/// as its decoder tells. Shared by the transport, its streams and the decoders. Thread-safe.
class ScriptPacing {
public:
    /// A ticket for a new stream.
    std::uint64_t open();
    /// Tells the stream of `ticket` that `lines` event lines follow its ticket line.
    void set_lines(std::uint64_t ticket, std::size_t lines);
    /// The event lines of `ticket`: 0 until told.
    [[nodiscard]] std::size_t lines(std::uint64_t ticket);
    /// Forgets a stream that has closed.
    void close(std::uint64_t ticket);

private:
    std::mutex mutex_;
    std::map<std::uint64_t, std::size_t> lines_;
    std::uint64_t last_ticket_ = 0;
};

/// Answers a scripted provider's requests in-process. A whole response is an empty 200. A
/// stream's body is its ticket on a line (`"7\n"`), then one empty line per event of its
/// answer, `chunk_delay` apart (the first at once): the decoder reads the ticket, takes its
/// answer and tells the pacing how many events it has. Thread-safe.
class ScriptedTransport final : public Transport {
public:
    explicit ScriptedTransport(std::chrono::milliseconds chunk_delay);

    HttpResponse send(const HttpRequest& request, std::stop_token stop) override;
    std::unique_ptr<HttpStream> open_stream(const HttpRequest& request,
                                            std::stop_token stop) override;

    [[nodiscard]] const std::shared_ptr<ScriptPacing>& pacing() const noexcept { return pacing_; }

private:
    std::chrono::milliseconds chunk_delay_;
    std::shared_ptr<ScriptPacing> pacing_ = std::make_shared<ScriptPacing>();
};

}  // namespace ullm::detail
