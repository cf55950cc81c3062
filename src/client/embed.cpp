// Client::embed: embedding calls, split into requests within the provider's limit and sent one
// after another through the client's transport, with its retries, usage reports and budgets.

#include <ullm/client/client.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "client_state.hpp"

namespace ullm {

namespace {

// Refuses, before routing, inputs and options no provider can embed.
void check_embedding_request(const EmbeddingRequest& request) {
    if (request.inputs.empty()) {
        throw InvalidOptionError(ErrorCode::invalid_embedding_input,
                                 "an embedding request needs at least one input");
    }
    for (std::size_t i = 0; i < request.inputs.size(); ++i) {
        if (request.inputs[i].empty()) {
            throw InvalidOptionError(ErrorCode::invalid_embedding_input,
                                     "input " + std::to_string(i) + " is empty");
        }
        if (!detail::is_valid_utf8(request.inputs[i])) {
            throw InvalidOptionError(ErrorCode::invalid_embedding_input,
                                     "input " + std::to_string(i) + " is not valid UTF-8");
        }
    }
    if (request.dimensions && *request.dimensions <= 0) {
        throw InvalidOptionError(
            ErrorCode::invalid_embedding_dimensions,
            "dimensions must be positive, not " + std::to_string(*request.dimensions));
    }
}

// Where an embedding call goes, and the codec of its provider.
struct EmbeddingRoute {
    Route route;
    const EmbeddingCodec* codec = nullptr;
};

// Checks `request`, routes it (its model becomes the provider's id) and lets the provider
// refuse what it cannot do. Before any I/O.
EmbeddingRoute embedding_route(const Client& client, EmbeddingRequest& request) {
    check_embedding_request(request);
    EmbeddingRoute routed{client.route(request.model), nullptr};
    request.model = routed.route.model;
    const Provider& provider = *routed.route.provider;
    routed.codec = provider.embeddings();
    if (routed.codec == nullptr) {
        throw ProviderCapabilityError(
            ErrorCode::unsupported_option,
            std::string(provider.name()) +
                " has no embeddings API (OpenAI, Gemini and OpenAI-compatible servers have)");
    }
    routed.codec->check(request);
    return routed;
}

// Prices `usage` of `model` when the provider counted its tokens and the model has a price.
void price_embedding(const PriceTable& prices, std::string_view provider, const std::string& model,
                     const std::string& answered, Usage& usage) {
    if (usage.input_tokens == 0 || usage.cost_usd) return;
    auto price = prices.find(provider, model);
    if (!price && !answered.empty()) price = prices.find(provider, answered);
    if (price) usage.cost_usd = PriceTable::cost(*price, usage);
}

// Sends the requests of a routed, checked call, in order, and joins their vectors.
EmbeddingResponse embed_routed(const Client::State& state, const EmbeddingRoute& routed,
                               const EmbeddingRequest& request, const std::stop_token& stop) {
    const std::string_view provider = routed.route.provider->name();
    const std::size_t limit = std::max<std::size_t>(1, routed.codec->max_inputs(request.model));
    const std::size_t count = request.inputs.size();
    EmbeddingResponse total;
    total.model = request.model;
    total.vectors.reserve(count);
    EmbeddingRequest part{.model = request.model,
                          .inputs = {},
                          .dimensions = request.dimensions,
                          .task = request.task};
    for (std::size_t first = 0; first < count; first += limit) {
        if (stop.stop_requested()) throw CancelledError("the embedding call was cancelled");
        const auto begin = request.inputs.begin() + static_cast<std::ptrdiff_t>(first);
        part.inputs.assign(begin,
                           begin + static_cast<std::ptrdiff_t>(std::min(limit, count - first)));
        const HttpRequest http = routed.codec->encode(part);
        const auto started = std::chrono::system_clock::now();
        EmbeddingResponse answer = detail::send_with_retries(
            state, *routed.route.provider, http, stop,
            detail::Limit::of(state, provider, 0, http, 0),
            [&](const HttpResponse& response) { return routed.codec->decode(response, part); });
        price_embedding(*state.prices, provider, request.model, answer.model, answer.usage);
        detail::report_usage(state, provider, request.model, answer.usage, false, false, started,
                             true);
        if (!total.vectors.empty() && answer.dimensions() != total.dimensions()) {
            throw_invalid_response("the embeddings of inputs from " + std::to_string(first) +
                                       " have " + std::to_string(answer.dimensions()) +
                                       " dimensions where those before have " +
                                       std::to_string(total.dimensions()),
                                   {std::string(provider), request.model, ""});
        }
        if (first == 0 && !answer.model.empty()) total.model = answer.model;
        total.usage += answer.usage;
        total.requests += 1;
        for (auto& vector : answer.vectors) total.vectors.push_back(std::move(vector));
    }
    return total;
}

}  // namespace

EmbeddingResponse Client::embed(EmbeddingRequest request, std::stop_token stop) const {
    const EmbeddingRoute routed = embedding_route(*this, request);
    return embed_routed(*state_, routed, request, stop);
}

EmbeddingResponse Client::embed(EmbeddingRequest request, std::stop_token stop,
                                const CallBudget& budget) const {
    detail::check_budget(budget.usd, "CallBudget::usd");
    detail::check_budget_action(budget.action);
    const EmbeddingRoute routed = embedding_route(*this, request);
    const std::string provider(routed.route.provider->name());
    const ModelPrice price = state_->prices->require(provider, request.model);
    // About four characters per token, as `estimate` counts a prompt.
    Usage estimated;
    for (const auto& input : request.inputs) {
        estimated.input_tokens += static_cast<std::int64_t>((input.size() + 3) / 4);
    }
    const double most = PriceTable::cost(price, estimated);
    if (most > budget.usd) {
        const std::string message = "the embedding call to " + provider + "/" + request.model +
                                    " could cost up to " + detail::format_usd(most) +
                                    ", more than its budget of " + detail::format_usd(budget.usd);
        const BudgetWarning over{.scope = "request",
                                 .budget_usd = budget.usd,
                                 .remaining_usd = budget.usd,
                                 .estimated_usd = most,
                                 .model = request.model,
                                 .provider = provider,
                                 .message = message};
        if (!detail::admit_over_budget(over, budget.action, budget.on_warning)) {
            EmbeddingResponse skipped;
            skipped.model = request.model;
            skipped.usage.cost_usd = 0.0;
            skipped.budget_skipped = true;
            detail::report_usage(*state_, provider, request.model, skipped.usage, false, true,
                                 std::chrono::system_clock::now(), true);
            return skipped;
        }
    }
    return embed_routed(*state_, routed, request, stop);
}

}  // namespace ullm
