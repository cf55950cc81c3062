#pragma once

// Internal to the provider adapters: the checks every adapter makes of a request before it
// encodes it.

#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>

#include <string>
#include <string_view>

namespace ullm::detail {

/// Throws `ProviderCapabilityError` (`unsupported_option`) for options `capabilities` rules
/// out, `InvalidOptionError` for invalid option values, and, unless `tools_checked` (the tools
/// come from a `ToolRegistry`, validated when it was made), validates the tools (names,
/// descriptions, schemas, duplicates) as define_tool does.
void check_request(const ChatRequest& request, const ProviderCapabilities& capabilities,
                   std::string_view provider, bool stream, bool tools_checked = false);

/// Throws `ProviderCapabilityError` (`unsupported_option`): `provider` model `model` does not
/// support `what`.
[[noreturn]] void throw_unsupported(std::string_view provider, const std::string& model,
                                    const std::string& what);

}  // namespace ullm::detail
