#pragma once

// Internal: what the client refuses in a provider's answer before a caller, a tool loop or a
// snapshot sees it. Every provider's decoder is held to the same rules here, custom ones
// included, so a malformed answer can neither run a tool nor be committed to a history.

#include <ullm/core/error.hpp>
#include <ullm/providers/chat.hpp>

#include <map>
#include <set>
#include <string>

namespace ullm::detail {

/// Throws `ProviderError` `invalid_provider_response` when `response` holds a tool call that no
/// tool loop could answer or no snapshot could restore: a call without an id or a name, or two
/// calls with one id.
void check_response(const ChatResponse& response, const ErrorOrigin& origin);

/// Checks the tool-call events of one streamed attempt as they leave the decoder: a call starts
/// once, with an id and a name; its argument deltas and its end name a started, unended call;
/// the end names the tool the start did; a provider sends no tool results; and at `done` every
/// started call has ended and the final response holds exactly the calls that ended. Anything
/// else throws `ProviderError` `invalid_provider_response`. One per attempt; not thread-safe.
class StreamEventChecker {
public:
    explicit StreamEventChecker(ErrorOrigin origin) : origin_(std::move(origin)) {}

    /// Checks the next event of the stream. Throws as the class comment says.
    void check(const StreamEvent& event);

private:
    [[noreturn]] void refuse(const std::string& what) const;

    ErrorOrigin origin_;
    std::map<std::string, std::string, std::less<>> open_;  ///< Started calls: id → name.
    std::map<std::string, std::string, std::less<>> ended_;
};

}  // namespace ullm::detail
