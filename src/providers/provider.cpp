#include <ullm/providers/provider.hpp>

#include <ullm/core/error.hpp>

#include <string>

namespace ullm {

ChatResponse Provider::respond(const ChatRequest&, std::stop_token) const {
    throw ProviderCapabilityError(ErrorCode::not_offline,
                                  std::string(name()) + " answers over HTTP, not offline");
}

std::unique_ptr<EventSource> Provider::respond_stream(const ChatRequest&, std::stop_token) const {
    throw ProviderCapabilityError(ErrorCode::not_offline,
                                  std::string(name()) + " answers over HTTP, not offline");
}

}  // namespace ullm
