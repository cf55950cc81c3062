#pragma once

// Internal to the client: the steps every chat call takes, whichever face it has (blocking in
// client.cpp, async in async_calls.cpp): route and check, budget, encode, check and price.

#include <ullm/client/client.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ullm::detail {

/// Routes `request` (its model becomes the provider's id) and refuses what the model cannot do,
/// for every provider, custom ones included. Before any I/O. The tools are validated unless
/// `tools_checked` (a conversation's, validated when it was made).
Route routed(const Client& client, ChatRequest& request, bool stream, bool tools_checked = false);

/// Throws `invalid_budget` or `invalid_budget_action` unless `budget` can be applied.
void check_call_budget(const CallBudget& budget);

/// Whether a routed `request` may be sent within `budget`: nullopt to send it, or the response
/// of a skipped request. Throws `BudgetExceededError` for `throw`.
std::optional<ChatResponse> within_budget(const Client::State& state, const ChatRequest& request,
                                          const Route& route, const CallBudget& budget);

/// The provider's encoding of `request`; text that is not valid UTF-8 (which no JSON body can
/// carry) is an `InvalidMessageError`, not a JSON library exception.
HttpRequest encode_request(const Provider& provider, const ChatRequest& request, bool stream);

/// Fills in the cost of `response` when its model has a price.
void price_response(const PriceTable& prices, ChatResponse& response, std::string_view provider,
                    const std::string& model);

/// Checks and prices a response of `route`; a finished one is reported to `on_usage`, as a
/// request that began at `started`, when `report` says so (an unfinished background response
/// has spent nothing yet).
ChatResponse checked(const Client::State& state, const Route& route, const ChatRequest& request,
                     ChatResponse response, bool report,
                     std::chrono::system_clock::time_point started);

}  // namespace ullm::detail
