#pragma once

// Internal to the provider adapters: the checks every adapter makes of a request before it
// encodes it.

#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>

#include <string_view>

namespace ullm::detail {

/// Throws `ProviderCapabilityError` (`unsupported_option`) for options `capabilities` rules
/// out, and validates the tools (names, descriptions, schemas, duplicates) as define_tool does.
void check_request(const ChatRequest& request, const ProviderCapabilities& capabilities,
                   std::string_view provider, bool stream);

}  // namespace ullm::detail
