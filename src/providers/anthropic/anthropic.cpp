#include <ullm/providers/anthropic.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <optional>
#include <utility>

#include "../../core/arithmetic.hpp"
#include "../base_url.hpp"
#include "../json_readers.hpp"
#include "../provider_request.hpp"
#include "../request_checks.hpp"
#include "anthropic_internal.hpp"

namespace ullm {

namespace {

// The adapter's internal pieces (anthropic_internal.hpp).
namespace anthropic = detail::anthropic;

using detail::count_field;
using detail::string_field;

// provider_options keys the adapter consumes instead of sending.
constexpr std::string_view system_cache_key = "system_cache_control";
constexpr std::string_view tools_cache_key = "tools_cache_control";

}  // namespace

AnthropicProvider::AnthropicProvider(AnthropicOptions options) : options_(std::move(options)) {
    options_.base_url = detail::trimmed_base_url(std::move(options_.base_url));
}

std::string_view AnthropicProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities AnthropicProvider::capabilities(std::string_view model) const {
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = true;
    capabilities.response_schema = ResponseSchemaRules::anthropic;
    const anthropic::ClaudeModel claude = anthropic::parse_claude_model(model);
    if (!claude.known) return capabilities;
    const int version = claude.version();
    capabilities.images = version >= 30;
    capabilities.documents = version >= 35;
    capabilities.reasoning = version >= 37;
    // Structured output is native from Opus 4.1 and 4.5 on, a forced tool before (see
    // `result_tool_of`): every generation has it.
    // Opus 4.7 and later reject sampling parameters outright.
    capabilities.temperature = version < 47;
    capabilities.top_p = version < 47;
    return capabilities;
}

json AnthropicProvider::encode_body(const ChatRequest& request, bool stream) const {
    const ProviderCapabilities capabilities = this->capabilities(request.model);
    const json& provider_options = request.provider_options;

    // Extended thinking is a provider option; check what it cannot be combined with.
    const auto thinking = provider_options.find("thinking");
    const bool thinking_given = thinking != provider_options.end() && !thinking->is_null();
    const std::string thinking_type = thinking_given ? string_field(*thinking, "type") : "";
    if (thinking_given && thinking_type != "disabled" && !capabilities.reasoning) {
        detail::throw_unsupported(name(), request.model, "extended thinking");
    }
    if ((thinking_type == "enabled" || thinking_type == "adaptive") && request.tool_choice &&
        (request.tool_choice->mode == ToolChoice::Mode::required ||
         request.tool_choice->mode == ToolChoice::Mode::tool)) {
        detail::throw_unsupported(name(), request.model,
                                  "forcing a tool call while extended thinking is on");
    }
    if (request.temperature && request.top_p &&
        anthropic::parse_claude_model(request.model).modern()) {
        detail::throw_unsupported(name(), request.model, "temperature together with top_p");
    }

    json body = {{"model", request.model}};
    std::int64_t max_tokens = options_.default_max_tokens;
    if (thinking_given && thinking->is_object()) {
        max_tokens = detail::saturating_add(max_tokens, count_field(*thinking, "budget_tokens"));
    }
    body["max_tokens"] = request.max_tokens.value_or(max_tokens);

    json system = json::array();
    if (!request.system.empty()) system.push_back(anthropic::text_block(request.system));
    json messages = json::array();
    for (std::size_t i = 0; i < request.messages.size(); ++i) {
        const Message& message = request.messages[i];
        json blocks = json::array();
        switch (message.role) {
            case Role::system:
                if (!message.text().empty())
                    blocks.push_back(anthropic::text_block(message.text()));
                break;
            case Role::user:
            case Role::tool:
                blocks = anthropic::user_blocks(message, name());
                break;
            case Role::assistant:
                blocks = anthropic::assistant_blocks(message, name(), request.model);
                break;
        }
        if (blocks.empty()) continue;
        if (auto cache_control = anthropic::cache_control_value(
                message.metadata, "cache_control",
                "metadata.cache_control of message " + std::to_string(i))) {
            anthropic::set_cache_control(blocks, *cache_control);
        }
        if (message.role == Role::system) {
            for (auto& block : blocks) system.push_back(std::move(block));
        } else {
            anthropic::append_turn(messages, message.role == Role::assistant ? "assistant" : "user",
                                   std::move(blocks));
        }
    }
    if (auto cache_control = anthropic::cache_control_value(
            provider_options, system_cache_key, "provider_options.system_cache_control")) {
        anthropic::set_cache_control(system, *cache_control);
    }
    if (!system.empty()) {
        const bool plain = std::none_of(system.begin(), system.end(), [](const json& block) {
            return block.contains("cache_control");
        });
        if (plain) {
            std::string text;
            for (const auto& block : system) {
                if (!text.empty()) text += "\n\n";
                text += block["text"].get<std::string>();
            }
            body["system"] = std::move(text);
        } else {
            body["system"] = std::move(system);
        }
    }
    body["messages"] = std::move(messages);

    const std::string result_tool = anthropic::result_tool_of(request);
    if (!request.tools.empty() || !result_tool.empty()) {
        json tools = json::array();
        for (const auto& tool : request.tools) {
            if (tool.name == result_tool) {
                throw InvalidOptionError(ErrorCode::invalid_response_format,
                                         "the response format is named \"" + result_tool +
                                             "\" like a tool of the request; " + request.model +
                                             " takes it as a tool, so give it another name");
            }
            json entry = {{"name", tool.name}, {"input_schema", tool.parameters}};
            if (!tool.description.empty()) entry["description"] = tool.description;
            tools.push_back(std::move(entry));
        }
        if (auto cache_control = anthropic::cache_control_value(
                provider_options, tools_cache_key, "provider_options.tools_cache_control");
            cache_control && !tools.empty()) {
            tools.back()["cache_control"] = *cache_control;
        }
        if (!result_tool.empty()) {
            tools.push_back(
                {{"name", result_tool},
                 {"description",
                  "Give your final answer by calling this tool once, with the answer "
                  "as its input, instead of answering in text."},
                 {"input_schema", anthropic::output_schema(request.response_format->schema)}});
        }
        body["tools"] = std::move(tools);
        const bool forcing_allowed = thinking_type != "enabled" && thinking_type != "adaptive";
        if (!result_tool.empty() &&
            (!request.tool_choice || request.tool_choice->mode == ToolChoice::Mode::automatic ||
             request.tool_choice->mode == ToolChoice::Mode::required)) {
            // The model must answer through the result tool, or call one of the caller's first.
            if (!forcing_allowed) {
                body["tool_choice"] = {{"type", "auto"}};
            } else if (request.tools.empty()) {
                body["tool_choice"] = {{"type", "tool"}, {"name", result_tool}};
            } else {
                body["tool_choice"] = {{"type", "any"}};
            }
        } else if (request.tool_choice) {
            switch (request.tool_choice->mode) {
                case ToolChoice::Mode::automatic:
                    body["tool_choice"] = {{"type", "auto"}};
                    break;
                case ToolChoice::Mode::none:
                    body["tool_choice"] = {{"type", "none"}};
                    break;
                case ToolChoice::Mode::required:
                    body["tool_choice"] = {{"type", "any"}};
                    break;
                case ToolChoice::Mode::tool:
                    body["tool_choice"] = {{"type", "tool"}, {"name", request.tool_choice->name}};
                    break;
            }
        }
    }
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (!request.stop.empty()) body["stop_sequences"] = request.stop;
    if (request.response_format && result_tool.empty()) {
        body["output_config"] = {
            {"format",
             {{"type", "json_schema"},
              {"schema", anthropic::output_schema(request.response_format->schema)}}}};
    }
    if (stream) body["stream"] = true;
    for (const auto& [key, value] : provider_options.items()) {
        if (key == system_cache_key || key == tools_cache_key) continue;
        body[key] = value;
    }
    return body;
}

HttpRequest AnthropicProvider::encode(const ChatRequest& request, bool stream) const {
    const json body = encode_body(request, stream);
    detail::ProviderCall call{.url = options_.base_url + "/messages",
                              .body = &body,
                              .event_stream = stream,
                              .key = {"x-api-key", ""},
                              .own = {{"anthropic-version", options_.anthropic_version}}};
    std::string beta;
    for (const auto& flag : options_.beta) {
        if (flag.empty()) continue;
        if (!beta.empty()) beta += ",";
        beta += flag;
    }
    if (!beta.empty()) call.own.emplace_back("anthropic-beta", std::move(beta));
    return detail::provider_request(options_, std::move(call));
}

ChatResponse AnthropicProvider::decode(const HttpResponse& response,
                                       const ChatRequest& request) const {
    ErrorOrigin origin{std::string(name()), request.model,
                       response.header("request-id").value_or("")};
    if (response.status < 200 || response.status > 299) {
        const json body = detail::parse_json_exact(response.body);
        ProviderFailure failure =
            body.is_object()
                ? anthropic::failure_from_body(body, response.status)
                : ProviderFailure{response.status, "", "", response.body, std::nullopt};
        failure.status = response.status;
        failure.retry_after = retry_hint(response);
        if (origin.request_id.empty()) origin.request_id = string_field(body, "request_id");
        throw_provider_failure(failure, origin);
    }
    const json body = parse_provider_json(response.body, origin);
    if (!body.is_object()) throw_invalid_response("the response body is not a JSON object", origin);
    const std::string type = string_field(body, "type");
    if (type == "error") {
        if (origin.request_id.empty()) origin.request_id = string_field(body, "request_id");
        throw_provider_failure(anthropic::failure_from_body(body, response.status), origin);
    }
    if (!type.empty() && type != "message") {
        throw_invalid_response("the response body is a \"" + type + "\" object, not a message",
                               origin);
    }
    const auto content = body.find("content");
    if (content == body.end() || !content->is_array()) {
        throw_invalid_response("the response body has no content array", origin);
    }
    detail::ResponseBuilder builder;
    anthropic::MessageSummary summary;
    summary.stop_reason = string_field(body, "stop_reason");
    summary.stop_details = body.value("stop_details", json());
    summary.usage.update(body.value("usage", json()));
    summary.model = string_field(body, "model");
    summary.request_id = origin.request_id.empty() ? string_field(body, "id") : origin.request_id;
    summary.replay_model = request.model.empty() ? summary.model : request.model;
    const anthropic::Projection projection = anthropic::project_content(
        *content, summary.stop_reason, origin, builder, anthropic::result_tool_of(request));
    return anthropic::finish_response(builder, projection, summary, std::string(name()));
}

std::unique_ptr<StreamDecoder> AnthropicProvider::stream_decoder(const ChatRequest& request) const {
    return anthropic::make_stream_decoder(std::string(name()), request.model,
                                          anthropic::result_tool_of(request));
}

}  // namespace ullm
