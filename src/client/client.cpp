#include <ullm/client/client.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>
#include <ullm/http/curl_transport.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/providers/provider_errors.hpp>

#include "../core/event_queue.hpp"
#include "../core/text.hpp"
#include "../providers/base_url.hpp"
#include "../providers/request_checks.hpp"
#include "call_steps.hpp"
#include "chat_stream_state.hpp"
#include "client_state.hpp"
#include "conversation_calls.hpp"
#include "response_checks.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

namespace ullm {

namespace {

using detail::check_call_budget;
using detail::checked;
using detail::redact_secrets;
using detail::report_usage;
using detail::retry_delay;
using detail::routed;
using detail::send_with_retries;
using detail::within_budget;

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

// Which provider serves a bare model name, and which variable configures it.
struct NamedRoute {
    std::string_view provider;
    std::string_view variable;
};

std::optional<NamedRoute> route_by_name(std::string_view model) {
    if (model.starts_with("gpt-") || model.starts_with("o1") || model.starts_with("o3") ||
        model.starts_with("o4") || model.starts_with("chatgpt-") ||
        model.starts_with("text-embedding-")) {
        return NamedRoute{"openai", "OPENAI_API_KEY"};
    }
    if (model.starts_with("claude-")) return NamedRoute{"anthropic", "ANTHROPIC_API_KEY"};
    if (model.starts_with("gemini-") || model.starts_with("models/gemini-")) {
        return NamedRoute{"gemini", "GEMINI_API_KEY (or GOOGLE_API_KEY)"};
    }
    return std::nullopt;
}

}  // namespace

void detail::price_response(const PriceTable& prices, ChatResponse& response,
                            std::string_view provider, const std::string& model) {
    if (response.usage.cost_usd) return;
    auto price = prices.find(provider, model);
    if (!price && !response.model.empty()) price = prices.find(provider, response.model);
    if (price) response.usage.cost_usd = PriceTable::cost(*price, response.usage);
}

HttpRequest detail::encode_request(const Provider& provider, const ChatRequest& request,
                                   bool stream) {
    try {
        return provider.encode(request, stream);
    } catch (const json::type_error&) {
        throw InvalidMessageError("/messages", "holds text that is not valid UTF-8");
    }
}

ChatStream::ChatStream(std::unique_ptr<detail::ChatStreamState> state) : state_(std::move(state)) {}
ChatStream::ChatStream(ChatStream&&) noexcept = default;
ChatStream& ChatStream::operator=(ChatStream&&) noexcept = default;
ChatStream::~ChatStream() = default;

std::optional<StreamEvent> ChatStream::next() {
    return state_->next();
}
void ChatStream::cancel() noexcept {
    state_->cancel();
}
const std::optional<ChatResponse>& ChatStream::response() const noexcept {
    return state_->response();
}
std::optional<StreamPosition> ChatStream::resume_position() const {
    return state_->resume_position();
}

Client::Client(ClientOptions options)
    : state_(std::make_shared<State>()), handle_(std::make_shared<detail::ClientHandle>(state_)) {
    state_->default_model = std::move(options.default_model);
    state_->transport =
        options.transport ? std::move(options.transport) : std::make_shared<CurlTransport>();
    state_->retry = options.retry;
    state_->session_store = std::move(options.session_store);
    state_->on_usage = std::move(options.on_usage);
    state_->prices = options.prices ? std::move(options.prices)
                                    : std::shared_ptr<const PriceTable>(std::shared_ptr<void>(),
                                                                        &PriceTable::builtin());
    for (auto& provider : options.providers) add_provider(std::move(provider));
    if (options.max_tool_threads == 0) {
        throw InvalidOptionError(ErrorCode::invalid_limits,
                                 "ClientOptions::max_tool_threads is 0: tools could never run");
    }
    state_->tools = std::make_unique<detail::ThreadPool>("ullm-tool", options.max_tool_threads);
    for (const auto& [provider, limits] : options.limits) {
        if (provider.empty()) {
            throw InvalidOptionError(ErrorCode::invalid_limits,
                                     "ClientOptions::limits names an empty provider");
        }
        if (limits.tokens_per_minute < 0 || limits.max_queue_wait.count() < 0) {
            throw InvalidOptionError(
                ErrorCode::invalid_limits,
                std::string(limits.tokens_per_minute < 0 ? "the tokens_per_minute"
                                                         : "the max_queue_wait") +
                    " limit of provider " + provider + " is negative");
        }
        // The timers of a provider's queue run on the client's callback thread, while the
        // client lives.
        auto schedule = [client = std::weak_ptr<State>(state_)](
                            detail::RequestLimiter::Clock::duration delay,
                            std::function<void()> work) {
            if (const auto state = client.lock())
                state->callbacks.post_after(delay, std::move(work));
        };
        state_->limiters.emplace(provider, std::make_shared<detail::RequestLimiter>(
                                               provider, limits, std::move(schedule)));
    }
}

Client Client::from_env(ClientOptions options) {
    std::vector<std::shared_ptr<const Provider>> found;
    if (const auto key = env("OPENAI_API_KEY"); !key.empty()) {
        OpenAiChatOptions openai;
        openai.api_key = key;
        if (const auto base = env("OPENAI_BASE_URL"); !base.empty()) openai.base_url = base;
        openai.organization = env("OPENAI_ORG_ID");
        openai.project = env("OPENAI_PROJECT_ID");
        // The Responses API of the same account, routed as openai-responses/<model>.
        OpenAiResponsesOptions responses;
        responses.api_key = openai.api_key;
        responses.base_url = openai.base_url;
        responses.provider_name = "openai-responses";
        responses.organization = openai.organization;
        responses.project = openai.project;
        found.push_back(std::make_shared<OpenAiChatProvider>(std::move(openai)));
        found.push_back(std::make_shared<OpenAiResponsesProvider>(std::move(responses)));
    }
    if (const auto key = env("ANTHROPIC_API_KEY"); !key.empty()) {
        AnthropicOptions anthropic;
        anthropic.api_key = key;
        if (const auto base = env("ANTHROPIC_BASE_URL"); !base.empty()) {
            // The SDKs take the host alone; the adapter wants everything before /messages.
            anthropic.base_url = detail::trimmed_base_url(base);
            if (anthropic.base_url.size() < 3 ||
                anthropic.base_url.compare(anthropic.base_url.size() - 3, 3, "/v1") != 0) {
                anthropic.base_url += "/v1";
            }
        }
        found.push_back(std::make_shared<AnthropicProvider>(std::move(anthropic)));
    }
    std::string gemini_key = env("GEMINI_API_KEY");
    if (gemini_key.empty()) gemini_key = env("GOOGLE_API_KEY");
    if (!gemini_key.empty()) {
        GeminiOptions gemini;
        gemini.api_key = std::move(gemini_key);
        found.push_back(std::make_shared<GeminiProvider>(std::move(gemini)));
    }
    OpenAiChatOptions ollama;
    ollama.provider_name = "ollama";
    ollama.base_url = env("OLLAMA_HOST");
    if (ollama.base_url.empty()) ollama.base_url = "http://localhost:11434";
    if (ollama.base_url.find("://") == std::string::npos)
        ollama.base_url = "http://" + ollama.base_url;
    ollama.base_url = detail::trimmed_base_url(std::move(ollama.base_url)) + "/v1";
    found.push_back(std::make_shared<OpenAiChatProvider>(std::move(ollama)));

    // Providers given explicitly win: register them last.
    for (auto& provider : options.providers) found.push_back(std::move(provider));
    options.providers = std::move(found);
    return Client(std::move(options));
}

void Client::add_provider(std::shared_ptr<const Provider> provider) {
    if (!provider) throw InvalidOptionError(ErrorCode::invalid_provider, "the provider is null");
    std::unique_lock lock(state_->mutex);
    state_->providers[std::string(provider->name())] = std::move(provider);
}

std::vector<std::string> Client::providers() const {
    std::shared_lock lock(state_->mutex);
    std::vector<std::string> names;
    for (const auto& [name, _] : state_->providers) names.push_back(name);
    return names;
}

const RetryPolicy& Client::retry_policy() const noexcept {
    return state_->retry;
}

Route Client::route(std::string_view model) const {
    if (model.empty()) model = state_->default_model;
    if (model.empty()) {
        throw InvalidOptionError(ErrorCode::invalid_model,
                                 "the request names no model and the client has no default");
    }
    std::shared_lock lock(state_->mutex);
    if (const auto slash = model.find('/'); slash != std::string_view::npos) {
        const auto it = state_->providers.find(model.substr(0, slash));
        if (it != state_->providers.end()) {
            const auto rest = model.substr(slash + 1);
            if (rest.empty()) {
                throw InvalidOptionError(
                    ErrorCode::invalid_model,
                    "\"" + std::string(model) + "\" names a provider but no model");
            }
            return {it->second, std::string(rest)};
        }
    }
    if (const auto named = route_by_name(model)) {
        const auto it = state_->providers.find(named->provider);
        if (it == state_->providers.end()) {
            throw ProviderCapabilityError(ErrorCode::provider_not_configured,
                                          "model \"" + std::string(model) + "\" is served by " +
                                              std::string(named->provider) +
                                              ", which is not configured: set " +
                                              std::string(named->variable));
        }
        return {it->second, std::string(model)};
    }
    std::string known;
    for (const auto& [name, _] : state_->providers) known += (known.empty() ? "" : ", ") + name;
    throw ProviderCapabilityError(ErrorCode::unknown_model_route,
                                  "no provider serves \"" + std::string(model) +
                                      "\"; name one as provider/model (configured: " + known + ")");
}

Route detail::routed(const Client& client, ChatRequest& request, bool stream, bool tools_checked) {
    Route route = client.route(request.model);
    request.model = route.model;
    detail::check_request(request, route.provider->capabilities(request.model),
                          route.provider->name(), stream, tools_checked);
    return route;
}

namespace {

// `Client::estimate` of a request already routed to `route`.
CostEstimate estimate_routed(const PriceTable& prices, const Route& route,
                             const ChatRequest& request) {
    CostEstimate estimate;
    estimate.price = prices.require(route.provider->name(), route.model);
    // About four characters per token of the prompt as the provider will see it.
    std::size_t characters = request.system.size();
    for (const auto& message : request.messages) {
        characters += message_to_json(message, false).dump().size();
    }
    for (const auto& tool : request.tools) {
        characters += tool.name.size() + tool.description.size() + tool.parameters.dump().size();
    }
    estimate.input_tokens = static_cast<std::int64_t>((characters + 3) / 4);
    estimate.max_output_tokens = request.max_tokens.value_or(4096);
    estimate.input_cost_usd =
        PriceTable::cost(estimate.price, Usage{estimate.input_tokens, 0, 0, 0, 0, std::nullopt});
    estimate.max_cost_usd = PriceTable::cost(
        estimate.price,
        Usage{estimate.input_tokens, estimate.max_output_tokens, 0, 0, 0, std::nullopt});
    return estimate;
}

}  // namespace

ChatResponse detail::checked(const Client::State& state, const Route& route,
                             const ChatRequest& request, ChatResponse response, bool report,
                             std::chrono::system_clock::time_point started) {
    detail::check_response(
        response, {std::string(route.provider->name()), request.model, response.request_id});
    detail::price_response(*state.prices, response, route.provider->name(), request.model);
    if (report && response.finished()) {
        report_usage(state, route.provider->name(), request.model, response.usage, false, false,
                     started);
    }
    return response;
}

namespace {

// Sends a routed, checked request, retrying what the retry policy allows; it waits for its
// provider's limits in `lane`.
ChatResponse complete_routed(const Client::State& state, const Route& route,
                             const ChatRequest& request, const std::stop_token& stop,
                             std::uint64_t lane = 0) {
    const auto started = std::chrono::system_clock::now();
    const HttpRequest http = detail::encode_request(*route.provider, request, false);
    const auto limit = detail::Limit::of(state, route.provider->name(), lane, http,
                                         detail::max_output_tokens(request));
    return send_with_retries(
        state, *route.provider, http, stop, limit, [&](const HttpResponse& answer) {
            return checked(state, route, request, route.provider->decode(answer, request), true,
                           started);
        });
}

// What a call about a background response needs: where `model` goes, the provider's codec, and
// the request its answers are decoded against (the model alone).
struct BackgroundRoute {
    Route route;
    const BackgroundCodec* codec = nullptr;
    ChatRequest request;
};

BackgroundRoute background_route(const Client& client, std::string_view model) {
    BackgroundRoute background{client.route(model), nullptr, {}};
    const Provider& provider = *background.route.provider;
    background.codec = provider.background();
    if (background.codec == nullptr) {
        throw ProviderCapabilityError(
            ErrorCode::unsupported_option,
            std::string(provider.name()) +
                " cannot run responses in the background (the OpenAI Responses API can)");
    }
    background.request.model = background.route.model;
    return background;
}

// Sends a request about a stored background response. An error status is retried as the retry
// policy allows; a failed response is not (polling it again cannot change it), and neither is
// a body that is not a response. A finished response is reported, when `report` says so, as
// begun at `started`.
ChatResponse send_background(const Client::State& state, const BackgroundRoute& background,
                             const HttpRequest& http, const std::stop_token& stop, bool report,
                             std::chrono::system_clock::time_point started,
                             std::optional<std::chrono::milliseconds>* asked = nullptr) {
    std::exception_ptr final_error;
    ChatResponse response = send_with_retries(
        state, *background.route.provider, http, stop,
        detail::Limit::of(state, background.route.provider->name(), 0, http, 0),
        [&](const HttpResponse& answer) -> ChatResponse {
            if (answer.status < 200 || answer.status > 299) {
                (void)background.codec->decode_retrieved(answer, background.request);
                throw ProviderError(
                    ErrorCode::invalid_provider_response,
                    "HTTP " + std::to_string(answer.status) + " without an error", 502, false,
                    {std::string(background.route.provider->name()), background.request.model, ""});
            }
            if (asked != nullptr) *asked = retry_hint(answer);
            try {
                return checked(state, background.route, background.request,
                               background.codec->decode_retrieved(answer, background.request),
                               report, started);
            } catch (Error& error) {
                redact_secrets(error, detail::request_secrets(http));
                final_error = std::current_exception();
                return {};
            }
        });
    if (final_error) std::rethrow_exception(final_error);
    return response;
}

}  // namespace

void detail::check_poll_options(const PollOptions& options) {
    // A zero interval would never grow: the wait would become a busy loop against the server.
    const bool valid = options.initial_interval.count() > 0 &&
                       options.max_interval >= options.initial_interval &&
                       std::isfinite(options.multiplier) && options.multiplier >= 1.0;
    if (!valid) {
        throw InvalidOptionError(
            ErrorCode::invalid_poll_options,
            "PollOptions needs 0 < initial_interval <= max_interval and a finite multiplier of "
            "at least 1");
    }
}

std::optional<ChatResponse> detail::within_budget(const Client::State& state,
                                                  const ChatRequest& request, const Route& route,
                                                  const CallBudget& budget) {
    const CostEstimate estimate = estimate_routed(*state.prices, route, request);
    if (estimate.max_cost_usd <= budget.usd) return std::nullopt;
    const std::string provider(route.provider->name());
    const std::string message = "the request to " + provider + "/" + route.model +
                                " could cost up to " + detail::format_usd(estimate.max_cost_usd) +
                                ", more than its budget of " + detail::format_usd(budget.usd);
    const BudgetWarning over{.scope = "request",
                             .budget_usd = budget.usd,
                             .remaining_usd = budget.usd,
                             .estimated_usd = estimate.max_cost_usd,
                             .model = route.model,
                             .provider = provider,
                             .message = message};
    if (detail::admit_over_budget(over, budget.action, budget.on_warning)) return std::nullopt;
    return detail::budget_skipped_response(message, route.model, provider);
}

void detail::check_call_budget(const CallBudget& budget) {
    detail::check_budget(budget.usd, "CallBudget::usd");
    detail::check_budget_action(budget.action);
}

ChatResponse Client::complete(ChatRequest request, std::stop_token stop) const {
    const Route route = routed(*this, request, false);
    return complete_routed(*state_, route, request, stop);
}

ChatStream Client::stream(ChatRequest request, std::stop_token stop) const {
    Route route = routed(*this, request, true);
    return ChatStream(std::make_unique<detail::ChatStreamState>(
        state_, std::move(route), std::move(request), std::move(stop)));
}

ChatResponse detail::ConversationCalls::complete(const Client& client, ChatRequest request,
                                                 std::stop_token stop, std::uint64_t lane) {
    const Route route = routed(client, request, false, true);
    return complete_routed(*client.state_, route, request, stop, lane);
}

ChatStream detail::ConversationCalls::stream(const Client& client, ChatRequest request,
                                             std::stop_token stop, std::uint64_t lane) {
    Route route = routed(client, request, true, true);
    return ChatStream(std::make_unique<detail::ChatStreamState>(
        client.state_, std::move(route), std::move(request), std::move(stop), lane));
}

detail::ThreadPool& detail::ConversationCalls::tool_pool(const Client& client) {
    return *client.state_->tools;
}

std::shared_ptr<detail::WorkThread> detail::ConversationCalls::callbacks(const Client& client) {
    return {client.state_, &client.state_->callbacks};
}

ChatResponse Client::complete(ChatRequest request, std::stop_token stop,
                              const CallBudget& budget) const {
    check_call_budget(budget);
    const Route route = routed(*this, request, false);
    if (auto skipped = within_budget(*state_, request, route, budget)) {
        report_usage(*state_, route.provider->name(), route.model, skipped->usage, false, true,
                     std::chrono::system_clock::now());
        return std::move(*skipped);
    }
    return complete_routed(*state_, route, request, stop);
}

ChatStream Client::stream(ChatRequest request, std::stop_token stop,
                          const CallBudget& budget) const {
    check_call_budget(budget);
    Route route = routed(*this, request, true);
    if (auto skipped = within_budget(*state_, request, route, budget)) {
        return ChatStream(std::make_unique<detail::ChatStreamState>(
            state_, std::move(route), std::move(request), std::move(*skipped)));
    }
    return ChatStream(std::make_unique<detail::ChatStreamState>(
        state_, std::move(route), std::move(request), std::move(stop)));
}

ChatResponse Client::wait_response(std::string_view model, std::string_view response_id,
                                   const PollOptions& options, std::stop_token stop) const {
    detail::check_poll_options(options);
    const BackgroundRoute background = background_route(*this, model);
    const HttpRequest http = background.codec->encode_retrieve(background.request, response_id);
    // The response is reported as begun with this wait (see `UsageReport::started_at`).
    const auto started = std::chrono::system_clock::now();
    std::chrono::milliseconds interval = options.initial_interval;
    for (;;) {
        std::optional<std::chrono::milliseconds> asked;
        ChatResponse response =
            send_background(*state_, background, http, stop, true, started, &asked);
        switch (response.status) {
            case ResponseStatus::finished:
                return response;
            case ResponseStatus::cancelled:
                throw_cancelled_response(response_id,
                                         {std::string(background.route.provider->name()),
                                          background.request.model, response.request_id});
            case ResponseStatus::queued:
            case ResponseStatus::in_progress:
                break;
        }
        const auto wait =
            asked ? std::min(*asked,
                             detail::retry_of(*state_, *background.route.provider).max_server_delay)
                  : interval;
        if (!RetryPolicy::sleep(wait, stop)) {
            throw CancelledError("waiting for the background response was cancelled");
        }
        const auto next = std::chrono::duration<double, std::milli>(interval) * options.multiplier;
        interval = next >= std::chrono::duration<double, std::milli>(options.max_interval)
                       ? options.max_interval
                       : std::chrono::duration_cast<std::chrono::milliseconds>(next);
    }
}

ChatResponse Client::cancel_response(std::string_view model, std::string_view response_id,
                                     std::stop_token stop) const {
    const BackgroundRoute background = background_route(*this, model);
    const HttpRequest http = background.codec->encode_cancel(background.request, response_id);
    return send_background(*state_, background, http, stop, false, {});
}

ChatStream Client::resume_stream(std::string_view model, std::string_view response_id,
                                 std::int64_t starting_after, std::stop_token stop) const {
    BackgroundRoute background = background_route(*this, model);
    const StreamPosition from{std::string(response_id), std::max<std::int64_t>(starting_after, -1)};
    return ChatStream(std::make_unique<detail::ChatStreamState>(
        state_, std::move(background.route), std::move(background.request), *background.codec, from,
        std::move(stop)));
}

const std::shared_ptr<SessionStore>& Client::session_store() const noexcept {
    return state_->session_store;
}

const PriceTable& Client::prices() const noexcept {
    return *state_->prices;
}

CostEstimate Client::estimate(const ChatRequest& request) const {
    return estimate_routed(*state_->prices, route(request.model), request);
}

}  // namespace ullm
