#pragma once

// The model of `ullm chat --offline`: a scripted provider that answers from simple rules, so a
// newcomer sees the whole loop (streaming, a tool call and its result, tokens) with no
// network and no key. Ask it the time, a sum, to read a file, or for a story.

#include <ullm/providers/provider.hpp>
#include <ullm/providers/scripted_provider.hpp>

#include <chrono>
#include <memory>
#include <mutex>

namespace ullm_cli {

class OfflineModel final : public ullm::Provider {
public:
    // Streams word by word, `word_delay` apart.
    explicit OfflineModel(std::chrono::milliseconds word_delay = std::chrono::milliseconds(40));

    [[nodiscard]] std::string_view name() const noexcept override { return "offline"; }
    [[nodiscard]] ullm::ProviderCapabilities capabilities(std::string_view model) const override;
    [[nodiscard]] ullm::HttpRequest encode(const ullm::ChatRequest& request,
                                           bool stream) const override;
    [[nodiscard]] ullm::ChatResponse decode(const ullm::HttpResponse& response,
                                            const ullm::ChatRequest& request) const override;
    [[nodiscard]] std::unique_ptr<ullm::StreamDecoder> stream_decoder(
        const ullm::ChatRequest& request) const override;
    [[nodiscard]] bool offline() const noexcept override { return true; }
    [[nodiscard]] ullm::ChatResponse respond(const ullm::ChatRequest& request,
                                             std::stop_token stop) const override;
    [[nodiscard]] std::unique_ptr<ullm::EventSource> respond_stream(
        const ullm::ChatRequest& request, std::stop_token stop) const override;

private:
    // Queues the answer to `request` on the voice, which then plays it.
    void prepare(const ullm::ChatRequest& request) const;

    std::shared_ptr<ullm::ScriptedProvider> voice_;
    mutable std::mutex mutex_;  ///< Holds `prepare` and the voice's take together.
};

}  // namespace ullm_cli
