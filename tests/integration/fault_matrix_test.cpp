// The fault matrix: the real Client and the real libcurl transport against the in-process test
// server, for every provider (Chat Completions, an OpenAI-compatible server with an unprefixed
// key, Responses, Anthropic, Gemini), `complete` and `stream`, under the faults real networks
// and real providers produce. Every error met anywhere in this file is checked for two things
// besides its code: its text is valid UTF-8, and it holds no piece of the API key.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/http/curl_transport.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/catch.hpp"
#include "support/test_server.hpp"

namespace fault_matrix_test {

namespace {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::RecordedRequest;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;
using milliseconds = std::chrono::milliseconds;

// A run that takes longer than this hangs: it is cancelled and reported as not returning. It
// is generous on purpose; no test here asserts how fast anything is.
constexpr auto bound = 20s;
// The idle timeout of the stall scenarios.
constexpr milliseconds short_idle{200};

// ---------------------------------------------------------------------------------------------
// Checks on error text

/// Whether `text` is well-formed UTF-8 (RFC 3629): no stray continuation bytes, no truncated
/// sequences, no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto lead = static_cast<unsigned char>(text[i]);
        if (lead < 0x80) {
            ++i;
            continue;
        }
        std::size_t length = 0;
        std::uint32_t code_point = 0;
        std::uint32_t smallest = 0;
        if ((lead & 0xE0U) == 0xC0U) {
            length = 2;
            code_point = lead & 0x1FU;
            smallest = 0x80;
        } else if ((lead & 0xF0U) == 0xE0U) {
            length = 3;
            code_point = lead & 0x0FU;
            smallest = 0x800;
        } else if ((lead & 0xF8U) == 0xF0U) {
            length = 4;
            code_point = lead & 0x07U;
            smallest = 0x10000;
        } else {
            return false;
        }
        if (text.size() - i < length) return false;
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0U) != 0x80U) return false;
            code_point = (code_point << 6) | (next & 0x3FU);
        }
        if (code_point < smallest || code_point > 0x10FFFF ||
            (code_point >= 0xD800 && code_point <= 0xDFFF)) {
            return false;
        }
        i += length;
    }
    return true;
}

constexpr std::size_t key_piece = 8;  // No 8 consecutive characters of a key may show.

/// The first run of `key_piece` consecutive characters of `key` that `text` contains, or "".
std::string leaked_piece(std::string_view text, std::string_view key) {
    if (key.empty()) return {};
    if (key.size() < key_piece) return text.find(key) == std::string_view::npos ? "" : "short";
    for (std::size_t at = 0; at + key_piece <= key.size(); ++at) {
        if (text.find(key.substr(at, key_piece)) != std::string_view::npos) {
            return std::string(key.substr(at, key_piece));
        }
    }
    return {};
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
}

/// `text` as a failure message may show it: the key and its longest leaked prefix masked, and
/// bytes escaped when the text is not valid UTF-8.
std::string printable(std::string text, std::string_view key) {
    if (!key.empty()) {
        replace_all(text, key, "<KEY>");
        for (std::size_t length = key.size() - 1; length >= key_piece; --length) {
            if (text.find(key.substr(0, length)) != std::string::npos) {
                replace_all(text, key.substr(0, length),
                            "<KEY-PREFIX:" + std::to_string(length) + ">");
                break;
            }
        }
    }
    // Long runs of one character (the filler of the truncation scenarios) are counted.
    for (std::size_t at = 0; at < text.size(); ++at) {
        std::size_t end = at;
        while (end < text.size() && text[end] == text[at]) ++end;
        if (end - at > 16) {
            text.replace(at, end - at, "<" + std::to_string(end - at) + " x '" + text[at] + "'>");
        }
    }
    if (valid_utf8(text)) return text;
    std::string out;
    static constexpr char hex[] = "0123456789abcdef";
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte < 0x7F) {
            out.push_back(c);
        } else {
            out += "\\x";
            out.push_back(hex[byte >> 4]);
            out.push_back(hex[byte & 0x0FU]);
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Providers, clients and requests

enum class Api { openai_chat, compatible, responses, anthropic, gemini };

struct ProviderCase {
    Api api;
    std::string label;
    std::string model;  ///< As the client routes it.
    std::string key;    ///< A key of the shape this provider issues.
};

// Canary keys: fake, but shaped like the real ones.
const std::string openai_key = "sk-proj-4fQm9ZxTb2LpW7nKc1VyR8sHd3JgE6uA";
const std::string xai_key = "xai-Lm3Qz8Rt2Vb7Nw1Xc6Kp9Hs4Jd0Fg5Ay2Eu7";  // 40 characters
const std::string plain_key = "Tq7Wm2Xr9Lb4Kz8Vn3Hc6Jp1Fs5Dg0Ya";        // 32, no prefix
const std::string dashed_key = "tok-9Hq_3Lm-X7v_Rb2-Kc8_Wn4-Pz1_Jd";
const std::string anthropic_key = "sk-ant-api03-Rm4Xq8Lz2Vb7Nw3Kc9Hs1Jd6Fg0Ty5Ea-Pu_Qo";
const std::string gemini_key = "AIzaSyC8mQ2xLr7Vt4Nb9Kw1Hz6Jp3Fd0Gs5EaQ";

const std::vector<ProviderCase>& providers() {
    static const std::vector<ProviderCase> all = {
        {Api::openai_chat, "openai-chat", "gpt-4o", openai_key},
        {Api::compatible, "openai-compatible", "compat/llama-3.1-8b", plain_key},
        {Api::responses, "openai-responses", "openai-responses/gpt-4.1", openai_key},
        {Api::anthropic, "anthropic", "claude-sonnet-4-5", anthropic_key},
        {Api::gemini, "gemini", "gemini-2.5-flash", gemini_key},
    };
    return all;
}

struct Settings {
    std::string key;  ///< Empty: the provider's own key.
    milliseconds idle_timeout{10s};
    int max_attempts = 3;
    /// Shared by several clients when set; each client makes its own otherwise.
    std::shared_ptr<ullm::Transport> transport;
};

std::shared_ptr<const ullm::Provider> make_provider(const ProviderCase& provider,
                                                    const std::string& base_url,
                                                    const std::string& key, milliseconds idle) {
    switch (provider.api) {
        case Api::openai_chat:
            return std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
                .api_key = key, .base_url = base_url + "/v1", .idle_timeout = idle});
        case Api::compatible:
            return std::make_shared<ullm::OpenAiChatProvider>(
                ullm::OpenAiChatOptions{.api_key = key,
                                        .base_url = base_url + "/v1",
                                        .provider_name = "compat",
                                        .idle_timeout = idle});
        case Api::responses:
            return std::make_shared<ullm::OpenAiResponsesProvider>(
                ullm::OpenAiResponsesOptions{.api_key = key,
                                             .base_url = base_url + "/v1",
                                             .provider_name = "openai-responses",
                                             .idle_timeout = idle});
        case Api::anthropic:
            return std::make_shared<ullm::AnthropicProvider>(ullm::AnthropicOptions{
                .api_key = key, .base_url = base_url + "/v1", .idle_timeout = idle});
        case Api::gemini:
            return std::make_shared<ullm::GeminiProvider>(ullm::GeminiOptions{
                .api_key = key, .base_url = base_url + "/v1beta", .idle_timeout = idle});
    }
    return nullptr;
}

/// A client of `provider` at `server`, with retries that wait 5 ms (no jitter) unless the
/// server asks otherwise.
ullm::Client make_client(const ProviderCase& provider, const TestServer& server,
                         const Settings& settings = {}) {
    ullm::RetryPolicy retry;
    retry.max_attempts = settings.max_attempts;
    retry.initial_backoff = 5ms;
    retry.multiplier = 1.0;
    retry.max_backoff = 5ms;
    retry.jitter = 0;
    const std::string& key = settings.key.empty() ? provider.key : settings.key;
    return ullm::Client(
        {.transport = settings.transport,
         .retry = retry,
         .providers = {make_provider(provider, server.base_url(), key, settings.idle_timeout)}});
}

ullm::ChatRequest ask(const ProviderCase& provider) {
    ullm::ChatRequest request;
    request.model = provider.model;
    request.messages = {ullm::Message::user("Hi")};
    return request;
}

/// The key a request carried, in whichever header its provider uses.
std::string sent_key(const RecordedRequest& request) {
    if (const auto bearer = request.header("authorization"); bearer.rfind("Bearer ", 0) == 0) {
        return bearer.substr(7);
    }
    if (request.has_header("x-api-key")) return request.header("x-api-key");
    return request.header("x-goog-api-key");
}

// ---------------------------------------------------------------------------------------------
// What each provider sends

std::string sse(const json& data, std::string_view event = {}) {
    std::string out;
    if (!event.empty()) out += "event: " + std::string(event) + "\n";
    return out + "data: " + data.dump() + "\n\n";
}

std::string typed(const json& data) {
    return sse(data, data["type"].get<std::string>());
}

std::string gemini_sse(const json& data) {
    return "data: " + data.dump() + "\r\n\r\n";
}

json responses_body(const std::string& text) {
    const json part = {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
    const json item = {{"type", "message"},
                       {"id", "msg_1"},
                       {"role", "assistant"},
                       {"status", "completed"},
                       {"content", json::array({part})}};
    return {{"id", "resp_1"},
            {"object", "response"},
            {"status", "completed"},
            {"model", "gpt-4.1"},
            {"output", json::array({item})},
            {"usage", {{"input_tokens", 5}, {"output_tokens", 2}, {"total_tokens", 7}}}};
}

/// A successful non-streamed body whose text is `text`.
std::string ok_body(Api api, const std::string& text) {
    switch (api) {
        case Api::openai_chat:
        case Api::compatible: {
            const json message = {{"role", "assistant"}, {"content", text}};
            const json choice = {{"index", 0}, {"message", message}, {"finish_reason", "stop"}};
            return json{
                {"id", "chatcmpl-1"},
                {"object", "chat.completion"},
                {"model", "m-1"},
                {"choices", json::array({choice})},
                {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 2}, {"total_tokens", 7}}}}
                .dump();
        }
        case Api::responses:
            return responses_body(text).dump();
        case Api::anthropic: {
            const json block = {{"type", "text"}, {"text", text}};
            return json{{"id", "msg_1"},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", "claude-sonnet-4-5"},
                        {"content", json::array({block})},
                        {"stop_reason", "end_turn"},
                        {"stop_sequence", nullptr},
                        {"usage", {{"input_tokens", 5}, {"output_tokens", 2}}}}
                .dump();
        }
        case Api::gemini: {
            const json part = {{"text", text}};
            const json candidate = {
                {"content", {{"role", "model"}, {"parts", json::array({part})}}},
                {"finishReason", "STOP"},
                {"index", 0}};
            return json{
                {"candidates", json::array({candidate})},
                {"usageMetadata",
                 {{"promptTokenCount", 5}, {"candidatesTokenCount", 2}, {"totalTokenCount", 7}}},
                {"modelVersion", "gemini-2.5-flash"},
                {"responseId", "resp_1"}}
                .dump();
        }
    }
    return {};
}

/// The events a stream starts with, before anything visible.
std::string stream_open(Api api) {
    switch (api) {
        case Api::openai_chat:
        case Api::compatible:
        case Api::gemini:
            return {};
        case Api::responses:
            return typed({{"type", "response.created"},
                          {"sequence_number", 0},
                          {"response",
                           {{"id", "resp_1"},
                            {"object", "response"},
                            {"status", "in_progress"},
                            {"model", "gpt-4.1"},
                            {"output", json::array()}}}}) +
                   typed({{"type", "response.output_item.added"},
                          {"output_index", 0},
                          {"item",
                           {{"type", "message"},
                            {"id", "msg_1"},
                            {"role", "assistant"},
                            {"status", "in_progress"},
                            {"content", json::array()}}}});
        case Api::anthropic:
            return typed({{"type", "message_start"},
                          {"message",
                           {{"id", "msg_1"},
                            {"type", "message"},
                            {"role", "assistant"},
                            {"model", "claude-sonnet-4-5"},
                            {"content", json::array()},
                            {"stop_reason", nullptr},
                            {"usage", {{"input_tokens", 5}, {"output_tokens", 1}}}}}}) +
                   typed({{"type", "content_block_start"},
                          {"index", 0},
                          {"content_block", {{"type", "text"}, {"text", ""}}}});
    }
    return {};
}

/// One visible text delta.
std::string text_event(Api api, const std::string& delta) {
    switch (api) {
        case Api::openai_chat:
        case Api::compatible: {
            const json choice = {
                {"index", 0}, {"delta", {{"content", delta}}}, {"finish_reason", nullptr}};
            return sse({{"id", "chatcmpl-1"},
                        {"object", "chat.completion.chunk"},
                        {"model", "m-1"},
                        {"choices", json::array({choice})}});
        }
        case Api::responses:
            return typed({{"type", "response.output_text.delta"},
                          {"item_id", "msg_1"},
                          {"output_index", 0},
                          {"content_index", 0},
                          {"delta", delta}});
        case Api::anthropic:
            return typed({{"type", "content_block_delta"},
                          {"index", 0},
                          {"delta", {{"type", "text_delta"}, {"text", delta}}}});
        case Api::gemini: {
            const json part = {{"text", delta}};
            const json candidate = {
                {"content", {{"role", "model"}, {"parts", json::array({part})}}}, {"index", 0}};
            return gemini_sse({{"candidates", json::array({candidate})},
                               {"modelVersion", "gemini-2.5-flash"},
                               {"responseId", "resp_1"}});
        }
    }
    return {};
}

/// The events that end a stream whose text was `text`.
std::string stream_close(Api api, const std::string& text) {
    switch (api) {
        case Api::openai_chat:
        case Api::compatible: {
            const json choice = {
                {"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}};
            return sse({{"id", "chatcmpl-1"},
                        {"object", "chat.completion.chunk"},
                        {"model", "m-1"},
                        {"choices", json::array({choice})}}) +
                   sse({{"id", "chatcmpl-1"},
                        {"object", "chat.completion.chunk"},
                        {"model", "m-1"},
                        {"choices", json::array()},
                        {"usage",
                         {{"prompt_tokens", 5}, {"completion_tokens", 2}, {"total_tokens", 7}}}}) +
                   "data: [DONE]\n\n";
        }
        case Api::responses:
            return typed({{"type", "response.completed"}, {"response", responses_body(text)}});
        case Api::anthropic:
            return typed({{"type", "content_block_stop"}, {"index", 0}}) +
                   typed({{"type", "message_delta"},
                          {"delta", {{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}},
                          {"usage", {{"output_tokens", 2}}}}) +
                   typed({{"type", "message_stop"}});
        case Api::gemini: {
            const json candidate = {{"finishReason", "STOP"}, {"index", 0}};
            return gemini_sse(
                {{"candidates", json::array({candidate})},
                 {"usageMetadata",
                  {{"promptTokenCount", 5}, {"candidatesTokenCount", 2}, {"totalTokenCount", 7}}},
                 {"modelVersion", "gemini-2.5-flash"},
                 {"responseId", "resp_1"}});
        }
    }
    return {};
}

/// The opening events and one text event per delta: what is seen before the stream's end.
std::string stream_start(Api api, const std::vector<std::string>& deltas) {
    std::string out = stream_open(api);
    for (const auto& delta : deltas) out += text_event(api, delta);
    return out;
}

/// A whole, successful stream of `deltas`.
std::string full_stream(Api api, const std::vector<std::string>& deltas) {
    std::string text;
    for (const auto& delta : deltas) text += delta;
    return stream_start(api, deltas) + stream_close(api, text);
}

const std::vector<std::string> hello_deltas = {"Hel", "lo", " there"};
const std::string hello_text = "Hello there";

/// An error body as the provider sends it with HTTP `status`.
std::string error_body(Api api, int status, const std::string& message) {
    switch (api) {
        case Api::openai_chat:
        case Api::compatible:
        case Api::responses: {
            std::string type = status == 429   ? "requests"
                               : status >= 500 ? "server_error"
                                               : "invalid_request_error";
            const json code = status == 401   ? json("invalid_api_key")
                              : status == 429 ? json("rate_limit_exceeded")
                                              : json(nullptr);
            if (status == 529) type = "overloaded_error";
            return json{
                {"error",
                 {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}
                .dump();
        }
        case Api::anthropic: {
            const std::string type = status == 401   ? "authentication_error"
                                     : status == 429 ? "rate_limit_error"
                                     : status == 529 ? "overloaded_error"
                                     : status >= 500 ? "api_error"
                                                     : "invalid_request_error";
            return json{{"type", "error"},
                        {"error", {{"type", type}, {"message", message}}},
                        {"request_id", "req_1"}}
                .dump();
        }
        case Api::gemini: {
            const std::string grpc = status == 401   ? "UNAUTHENTICATED"
                                     : status == 429 ? "RESOURCE_EXHAUSTED"
                                     : status >= 500 ? "UNAVAILABLE"
                                                     : "INVALID_ARGUMENT";
            return json{{"error", {{"code", status}, {"message", message}, {"status", grpc}}}}
                .dump();
        }
    }
    return {};
}

/// An error event inside a 200 stream: an overload, or a refusal of the request.
std::string stream_error(Api api, bool overloaded, const std::string& message) {
    switch (api) {
        case Api::openai_chat:
        case Api::compatible:
            return sse({{"error",
                         {{"message", message},
                          {"type", overloaded ? "overloaded_error" : "invalid_request_error"},
                          {"code", nullptr}}}});
        case Api::responses:
            return typed({{"type", "error"},
                          {"code", overloaded ? "server_is_overloaded" : "invalid_prompt"},
                          {"message", message},
                          {"param", nullptr},
                          {"sequence_number", 9}});
        case Api::anthropic:
            return typed({{"type", "error"},
                          {"error",
                           {{"type", overloaded ? "overloaded_error" : "invalid_request_error"},
                            {"message", message}}}});
        case Api::gemini:
            return gemini_sse({{"error",
                                {{"code", overloaded ? 529 : 400},
                                 {"message", message},
                                 {"status", overloaded ? "UNAVAILABLE" : "INVALID_ARGUMENT"}}}});
    }
    return {};
}

/// `text` with the placeholder @RAW@ replaced by raw bytes (which no JSON library would write).
std::string with_raw(std::string text, std::string_view raw) {
    replace_all(text, "@RAW@", raw);
    return text;
}

ScriptedResponse html(int status, std::string page) {
    return ScriptedResponse::json(status, std::move(page),
                                  {{"Content-Type", "text/html; charset=utf-8"}});
}

std::string http_date(std::chrono::system_clock::time_point when) {
    const std::time_t time = std::chrono::system_clock::to_time_t(when);
    std::tm parts{};
    gmtime_r(&time, &parts);
    char text[64];
    const auto length = std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &parts);
    return std::string(text, length);
}

// ---------------------------------------------------------------------------------------------
// Running a request and recording what happened

enum class Mode { complete, stream };
constexpr Mode both_modes[] = {Mode::complete, Mode::stream};

const char* name_of(Mode mode) {
    return mode == Mode::complete ? "complete" : "stream";
}

/// What one `complete` or `stream` call did.
struct Outcome {
    bool returned = true;                     ///< It ended on its own within `bound`.
    std::string code = "no error";            ///< The `ullm::Error` code, or "no error".
    std::string what;                         ///< The error's `what()`.
    std::string message;                      ///< The error's `message()`.
    int status = 0;                           ///< The error's `status()`.
    bool retryable = false;                   ///< The error's `retryable()`.
    std::optional<milliseconds> retry_after;  ///< A RateLimitError's or ProviderError's.
    bool completed = false;                  ///< `complete` returned, or the stream reached `done`.
    std::string text;                        ///< The response's text, or the stream's text deltas.
    std::vector<ullm::StreamEvent> retries;  ///< The stream's `retry` events.
    int done_events = 0;
    std::string key;  ///< The key the client held (never to appear in the error).
};

std::string describe(const Outcome& out) {
    std::ostringstream text;
    text << "code " << out.code << (out.returned ? "" : " (did not return in time)");
    if (!out.what.empty()) text << "; what(): " << printable(out.what, out.key);
    text << "; text \"" << printable(out.text, out.key) << "\"; retries [";
    for (const auto& retry : out.retries) {
        text << " " << retry.error_code << " then " << retry.delay.count() << " ms;";
    }
    text << " ]";
    return text.str();
}

template <class Call>
void capture(Outcome& out, Call&& call) {
    const auto record = [&out](const ullm::Error& error) {
        out.code = error.code();
        out.what = error.what();
        out.message = error.message();
        out.status = error.status();
        out.retryable = error.retryable();
    };
    try {
        call();
    } catch (const ullm::RateLimitError& error) {
        record(error);
        out.retry_after = error.retry_after();
    } catch (const ullm::ProviderError& error) {
        record(error);
        out.retry_after = error.retry_after();
    } catch (const ullm::Error& error) {
        record(error);
    } catch (const std::exception& error) {
        out.code = "not an ullm::Error";
        out.what = error.what();
    }
}

Outcome attempt(Mode mode, const ullm::Client& client, const ullm::ChatRequest& request,
                const std::stop_token& stop) {
    Outcome out;
    capture(out, [&] {
        if (mode == Mode::complete) {
            out.text = client.complete(request, stop).text;
            out.completed = true;
            return;
        }
        auto stream = client.stream(request, stop);
        for (const auto& event : stream) {
            if (const auto* delta = event.text_delta()) out.text += *delta;
            if (event.type == ullm::StreamEvent::Type::retry) out.retries.push_back(event);
            if (event.type == ullm::StreamEvent::Type::done) ++out.done_events;
        }
        out.completed = stream.response().has_value();
    });
    return out;
}

/// Checks what every outcome must satisfy: it returned, and its error text is valid UTF-8
/// and holds no piece of the key.
void check_error_text(const Outcome& out) {
    INFO(describe(out));
    CHECK(out.returned);
    CHECK(valid_utf8(out.what));
    CHECK(valid_utf8(out.message));
    CHECK(leaked_piece(out.what, out.key).empty());
    CHECK(leaked_piece(out.message, out.key).empty());
}

/// One call running on its own thread, so that a hang is cancelled and reported instead of
/// hanging the suite, and so that slow scenarios can run side by side.
class Running {
public:
    Running(Mode mode, ullm::Client client, ullm::ChatRequest request, std::string key)
        : key_(std::move(key)),
          future_(std::async(
              std::launch::async,
              [mode, client = std::move(client), request = std::move(request),
               stop = stop_.get_token()] { return attempt(mode, client, request, stop); })) {}

    ~Running() {
        if (future_.valid()) {
            stop_.request_stop();
            future_.wait();
        }
    }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    Running(Running&&) = delete;
    Running& operator=(Running&&) = delete;

    /// Waits up to `bound` (then cancels), and checks the error text.
    Outcome wait() {
        const bool late = future_.wait_for(bound) != std::future_status::ready;
        if (late) stop_.request_stop();
        Outcome out = future_.get();
        out.returned = !late;
        out.key = key_;
        check_error_text(out);
        return out;
    }

private:
    std::stop_source stop_;
    std::string key_;
    std::future<Outcome> future_;
};

Outcome run(Mode mode, const ullm::Client& client, const ullm::ChatRequest& request,
            const std::string& key) {
    return Running(mode, client, request, key).wait();
}

Outcome run(Mode mode, const ProviderCase& provider, const TestServer& server,
            const Settings& settings = {}) {
    return run(mode, make_client(provider, server, settings), ask(provider),
               settings.key.empty() ? provider.key : settings.key);
}

}  // namespace

// =============================================================================================

TEST_CASE("fault matrix: the UTF-8 check of this file", "[fault_matrix]") {
    CHECK(valid_utf8(""));
    CHECK(valid_utf8("plain ASCII"));
    CHECK(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa6"));
    CHECK(valid_utf8("\xf4\x8f\xbf\xbf"));        // U+10FFFF
    CHECK_FALSE(valid_utf8("\xff"));              // never in UTF-8
    CHECK_FALSE(valid_utf8("caf\xe9"));           // Latin-1
    CHECK_FALSE(valid_utf8("\x80"));              // stray continuation byte
    CHECK_FALSE(valid_utf8("\xe2\x82"));          // truncated sequence
    CHECK_FALSE(valid_utf8("\xc3\x28"));          // bad continuation byte
    CHECK_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
    CHECK_FALSE(valid_utf8("\xe0\x80\xaf"));      // overlong '/'
    CHECK_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate U+D800
    CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
    CHECK_FALSE(valid_utf8("\xf8\x88\x80\x80\x80"));

    CHECK(xai_key.size() == 40);
    CHECK(plain_key.size() == 32);
    CHECK(leaked_piece("no key here", plain_key).empty());
    CHECK(leaked_piece("cut: Tq7Wm2Xr\xe2\x80\xa6", plain_key) == "Tq7Wm2Xr");
    CHECK(leaked_piece("cut: Tq7Wm2X\xe2\x80\xa6", plain_key).empty());
}

TEST_CASE("fault matrix: a disconnect mid-body or mid-stream is connection_failed",
          "[fault_matrix]") {
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        DYNAMIC_SECTION(provider.label << ": complete, the body cut short of its Content-Length") {
            TestServer server;
            server.set_handler([api](const RecordedRequest&) {
                ScriptedResponse cut = ScriptedResponse::json(200, ok_body(api, hello_text));
                cut.truncate_body_at = 20;
                return cut;
            });
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "connection_failed");
            CHECK(out.retryable);
            CHECK(server.request_count() == 3);  // transient: retried up to max_attempts
        }
        DYNAMIC_SECTION(provider.label << ": complete, a chunked body cut off") {
            TestServer server;
            server.set_handler([api](const RecordedRequest&) {
                return ScriptedResponse{.status = 200,
                                        .headers = {{"Content-Type", "application/json"}},
                                        .chunks = {ok_body(api, hello_text).substr(0, 20)},
                                        .disconnect = true};
            });
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "connection_failed");
            CHECK(server.request_count() == 3);
        }
        DYNAMIC_SECTION(provider.label << ": stream, cut before any visible event, retried") {
            TestServer server;
            ScriptedResponse cut =
                ScriptedResponse::sse(stream_open(api) + text_event(api, "Hel").substr(0, 12), 0);
            cut.disconnect = true;
            server.enqueue(cut);
            server.enqueue(ScriptedResponse::sse(full_stream(api, hello_deltas), 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.completed);
            CHECK(out.text == hello_text);
            REQUIRE(out.retries.size() == 1);
            CHECK(out.retries[0].error_code == "connection_failed");
            CHECK(server.request_count() == 2);
        }
        DYNAMIC_SECTION(provider.label << ": stream, cut after visible events, not retried") {
            TestServer server;
            ScriptedResponse cut =
                ScriptedResponse::sse(stream_start(api, {"Hel", "lo"}) + "data: {\"cho", 0);
            cut.disconnect = true;
            server.enqueue(cut);
            server.enqueue(ScriptedResponse::sse(full_stream(api, {"never"}), 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "connection_failed");
            CHECK(out.text == "Hello");
            CHECK(out.done_events == 0);
            CHECK(server.request_count() == 1);
        }
    }
}

// The stall scenarios wait for an idle timeout each, so every provider runs side by side.
TEST_CASE("fault matrix: a stall ends in a timeout", "[fault_matrix]") {
    struct Stall {
        std::string label;
        Mode mode;
        std::function<void(TestServer&, Api)> script;
        int max_attempts;
        std::string text_before;  ///< The text delivered before the timeout.
    };
    const std::vector<Stall> stalls = {
        {"complete, stall after the headers", Mode::complete,
         [](TestServer& server, Api) {
             server.enqueue(
                 {.status = 200, .headers = {{"Content-Type", "application/json"}}, .stall = true});
         },
         1, ""},
        {"complete, stall after part of the body", Mode::complete,
         [](TestServer& server, Api api) {
             ScriptedResponse part = ScriptedResponse::json(200, ok_body(api, hello_text));
             part.truncate_body_at = 25;
             part.stall = true;
             server.enqueue(part);
         },
         1, ""},
        {"stream, stall after the headers", Mode::stream,
         [](TestServer& server, Api) {
             ScriptedResponse silent = ScriptedResponse::sse("", 0);
             silent.stall = true;
             server.enqueue(silent);
         },
         1, ""},
        {"stream, stall after some events", Mode::stream,
         [](TestServer& server, Api api) {
             ScriptedResponse some = ScriptedResponse::sse(stream_start(api, {"Hel", "lo"}), 0);
             some.stall = true;
             server.enqueue(some);
         },
         1, "Hello"},
        {"stream, a stall before any event is retried", Mode::stream,
         [](TestServer& server, Api api) {
             ScriptedResponse silent = ScriptedResponse::sse(stream_open(api), 0);
             silent.stall = true;
             server.enqueue(silent);
             server.enqueue(ScriptedResponse::sse(full_stream(api, hello_deltas), 0));
         },
         2, ""},
    };
    for (const auto& stall : stalls) {
        SECTION(stall.label) {
            std::vector<std::unique_ptr<TestServer>> servers;
            std::vector<std::unique_ptr<Running>> runs;
            for (const auto& provider : providers()) {
                servers.push_back(std::make_unique<TestServer>());
                stall.script(*servers.back(), provider.api);
                const Settings settings{.idle_timeout = short_idle,
                                        .max_attempts = stall.max_attempts};
                runs.push_back(std::make_unique<Running>(
                    stall.mode, make_client(provider, *servers.back(), settings), ask(provider),
                    provider.key));
            }
            for (std::size_t i = 0; i < runs.size(); ++i) {
                const auto& provider = providers()[i];
                const auto out = runs[i]->wait();
                INFO(provider.label << ": " << describe(out));
                if (stall.max_attempts == 1) {
                    CHECK(out.code == "timeout");
                    CHECK(out.retryable);
                    CHECK(out.text == stall.text_before);
                    CHECK(servers[i]->request_count() == 1);
                    // The timed-out transfer was aborted: the server saw the client leave.
                    CHECK(servers[i]->wait_for_client_aborts(1, 5s));
                } else {
                    CHECK(out.completed);
                    CHECK(out.text == hello_text);
                    REQUIRE(out.retries.size() == 1);
                    CHECK(out.retries[0].error_code == "timeout");
                    CHECK(servers[i]->request_count() == 2);
                }
            }
        }
    }
}

TEST_CASE("fault matrix: 429 storms and Retry-After", "[fault_matrix]") {
    const auto rate_limited = [](Api api, std::string retry_after) {
        return ScriptedResponse::json(429, error_body(api, 429, "Rate limit reached"),
                                      {{"Retry-After", std::move(retry_after)}});
    };
    const auto ok = [](Api api, Mode mode) {
        return mode == Mode::complete ? ScriptedResponse::json(200, ok_body(api, hello_text))
                                      : ScriptedResponse::sse(full_stream(api, hello_deltas), 0);
    };
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        for (const Mode mode : both_modes) {
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": a storm of Retry-After: 0, then success") {
                TestServer server;
                server.enqueue(rate_limited(api, "0"));
                server.enqueue(rate_limited(api, "0"));
                server.enqueue(ok(api, mode));
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.completed);
                CHECK(out.text == hello_text);
                CHECK(server.request_count() == 3);
                if (mode == Mode::stream) {
                    REQUIRE(out.retries.size() == 2);
                    for (const auto& retry : out.retries) {
                        CHECK(retry.error_code == "rate_limited");
                        CHECK(retry.delay == 0ms);  // as the server asked, not the backoff
                    }
                    CHECK(out.retries[1].attempt == 3);
                }
            }
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": a storm that never ends is rate_limited") {
                TestServer server;
                server.set_handler(
                    [api, rate_limited](const RecordedRequest&) { return rate_limited(api, "0"); });
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.code == "rate_limited");
                CHECK(out.status == 429);
                CHECK(out.retryable);
                CHECK(server.request_count() == 3);
            }
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": Retry-After: 120 is beyond max_server_delay") {
                TestServer server;
                server.enqueue(rate_limited(api, "120"));
                server.enqueue(ok(api, mode));
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.code == "rate_limited");
                CHECK(out.retry_after == std::optional<milliseconds>(120s));
                CHECK(out.retries.empty());
                CHECK(server.request_count() == 1);
            }
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": Retry-After as a past HTTP-date is retried") {
                TestServer server;
                server.enqueue(rate_limited(api, "Wed, 21 Oct 2015 07:28:00 GMT"));
                server.enqueue(ok(api, mode));
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.completed);
                CHECK(server.request_count() == 2);
                if (mode == Mode::stream) {
                    REQUIRE(out.retries.size() == 1);
                    CHECK(out.retries[0].delay == 0ms);
                }
            }
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": Retry-After as an HTTP-date an hour ahead") {
                TestServer server;
                server.enqueue(rate_limited(api, http_date(std::chrono::system_clock::now() + 1h)));
                server.enqueue(ok(api, mode));
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.code == "rate_limited");
                REQUIRE(out.retry_after.has_value());
                CHECK(*out.retry_after > 55min);
                CHECK(*out.retry_after <= 61min);
                CHECK(out.retries.empty());
                CHECK(server.request_count() == 1);
            }
            for (const std::string_view far_future :
                 {"Mon, 01 Jan 2300 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"}) {
                DYNAMIC_SECTION(provider.label << ", " << name_of(mode) << ": Retry-After: "
                                               << far_future << " is reported, not retried") {
                    TestServer server;
                    server.enqueue(rate_limited(api, std::string(far_future)));
                    server.enqueue(ok(api, mode));
                    const auto out = run(mode, provider, server);
                    INFO(describe(out));
                    CHECK(out.code == "rate_limited");
                    // Far beyond max_server_delay: not a reason to ask again at once.
                    CHECK(out.retries.empty());
                    CHECK(server.request_count() == 1);
                    if (out.retry_after) {
                        CHECK(*out.retry_after > ullm::RetryPolicy{}.max_server_delay);
                    }
                }
            }
        }
    }
}

TEST_CASE("fault matrix: 529 overloaded before and after the first visible event",
          "[fault_matrix]") {
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        DYNAMIC_SECTION(provider.label << ": complete, a 529 is retried") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(529, error_body(api, 529, "Overloaded")));
            server.enqueue(ScriptedResponse::json(200, ok_body(api, hello_text)));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.completed);
            CHECK(out.text == hello_text);
            CHECK(server.request_count() == 2);
        }
        DYNAMIC_SECTION(provider.label << ": stream, a 529 before the first event is retried") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(529, error_body(api, 529, "Overloaded")));
            server.enqueue(ScriptedResponse::sse(full_stream(api, hello_deltas), 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.completed);
            CHECK(out.text == hello_text);
            REQUIRE(out.retries.size() == 1);
            CHECK(out.retries[0].error_code == "provider_overloaded");
            CHECK(out.retries[0].attempt == 2);
            CHECK(server.request_count() == 2);
        }
        for (const std::size_t chunk_size : {std::size_t{0}, std::size_t{7}}) {
            DYNAMIC_SECTION(provider.label << ": stream, overloaded after visible events ("
                                           << (chunk_size == 0 ? "one write" : "7-byte writes")
                                           << ") is surfaced after them, not retried") {
                TestServer server;
                server.enqueue(ScriptedResponse::sse(
                    stream_start(api, {"Hel", "lo"}) + stream_error(api, true, "Overloaded"),
                    chunk_size));
                server.enqueue(ScriptedResponse::sse(full_stream(api, {"never"}), 0));
                const auto out = run(Mode::stream, provider, server);
                INFO(describe(out));
                CHECK(out.code == "provider_overloaded");
                CHECK(out.retryable);
                CHECK(out.text == "Hello");
                CHECK(out.retries.empty());
                CHECK(out.done_events == 0);
                CHECK(server.request_count() == 1);
            }
        }
    }
}

TEST_CASE("fault matrix: malformed and truncated bodies", "[fault_matrix]") {
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        const std::string body = ok_body(api, hello_text);
        DYNAMIC_SECTION(provider.label << ": complete, a malformed JSON body") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(200, R"({"id": "x", "choices": [oops})"));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
            CHECK_FALSE(out.retryable);
            CHECK(server.request_count() == 1);
        }
        DYNAMIC_SECTION(provider.label << ": complete, an empty 200 body") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(200, ""));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
        }
        DYNAMIC_SECTION(provider.label
                        << ": complete, a body truncated by a clean close (no framing)") {
            TestServer server;
            server.enqueue({.status = 200,
                            .headers = {{"Content-Type", "application/json"}},
                            .body = body.substr(0, body.size() / 2),
                            .unframed = true});
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
            CHECK(server.request_count() == 1);
        }
        DYNAMIC_SECTION(provider.label << ": stream, a malformed event before any text") {
            TestServer server;
            server.enqueue(
                ScriptedResponse::sse(stream_open(api) + "data: {\"choices\": [oops}\n\n", 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
            CHECK_FALSE(out.retryable);
            CHECK(server.request_count() == 1);
        }
        DYNAMIC_SECTION(provider.label << ": stream, a malformed event after visible text") {
            TestServer server;
            server.enqueue(ScriptedResponse::sse(
                stream_start(api, {"Hel", "lo"}) + "data: {\"choices\": [oops}\n\n", 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
            CHECK(out.text == "Hello");
        }
        DYNAMIC_SECTION(provider.label << ": stream, ends before its terminal event") {
            TestServer server;
            server.enqueue(ScriptedResponse::sse(stream_start(api, {"Hel", "lo"}), 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "stream_truncated");
            CHECK(out.text == "Hello");
            CHECK(out.done_events == 0);
            CHECK(server.request_count() == 1);
        }
        DYNAMIC_SECTION(provider.label << ": stream, ends in the middle of its terminal event") {
            TestServer server;
            const std::string close = stream_close(api, "Hello");
            server.enqueue(ScriptedResponse::sse(
                stream_start(api, {"Hel", "lo"}) + close.substr(0, close.size() / 3), 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "stream_truncated");
            CHECK(out.text == "Hello");
            CHECK(out.done_events == 0);
        }
        DYNAMIC_SECTION(provider.label << ": stream, cut mid-event by a clean close (no framing)") {
            TestServer server;
            server.enqueue(
                {.status = 200,
                 .headers = {{"Content-Type", "text/event-stream"}},
                 .body = stream_start(api, {"Hel", "lo"}) + text_event(api, " there").substr(0, 10),
                 .unframed = true});
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "stream_truncated");
            CHECK(out.text == "Hello");
        }
        DYNAMIC_SECTION(provider.label
                        << ": stream, ends before any visible event: retried, then reported") {
            TestServer server;
            server.set_handler([api](const RecordedRequest&) {
                return ScriptedResponse::sse(stream_open(api), 0);
            });
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "stream_truncated");
            CHECK(out.retryable);
            REQUIRE(out.retries.size() == 2);
            CHECK(out.retries[0].error_code == "stream_truncated");
            CHECK(server.request_count() == 3);
        }
    }
}

TEST_CASE("fault matrix: invalid UTF-8 from the server never reaches an error's text",
          "[fault_matrix]") {
    // Latin-1, a bad continuation byte, bytes that are never UTF-8, a lone surrogate (CESU).
    const std::string raw = "caf\xe9 \xc3\x28 \xff\xfe \xed\xa0\x80 end";
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        DYNAMIC_SECTION(provider.label << ": complete, a 200 body with invalid UTF-8 text") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(200, with_raw(ok_body(api, "Hello @RAW@"), raw)));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
        }
        // Text in a pretty-printed body whose quoted start is cut at 120 bytes inside a "€":
        // the whitespace the quote collapses must not leave half a character behind.
        DYNAMIC_SECTION(provider.label
                        << ": complete, a quoted body start that cuts a multibyte character") {
            TestServer server;
            std::string page = "<!doctype html>\n\n\n\n        <p>";
            page += std::string(119 - page.size() - 1, '.') + "\xe2\x82\xac tail";
            REQUIRE(page.substr(118, 3) == "\xe2\x82\xac");
            server.enqueue(ScriptedResponse::json(200, page));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
        }
        for (const Mode mode : both_modes) {
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": a 400 JSON error whose message is not UTF-8") {
                TestServer server;
                server.enqueue(ScriptedResponse::json(
                    400, with_raw(error_body(api, 400, "Bad input: @RAW@"), raw)));
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.code == "invalid_request");
            }
            DYNAMIC_SECTION(provider.label << ", " << name_of(mode)
                                           << ": a 502 text error page in Latin-1") {
                TestServer server;
                server.set_handler([](const RecordedRequest&) {
                    return ScriptedResponse::json(
                        502, "Fehler: Ung\xfcltige Antwort vom Upstream-Server (\xa7 12)",
                        {{"Content-Type", "text/plain; charset=iso-8859-1"}});
                });
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK(out.code == "provider_error");
                CHECK(out.status == 502);
            }
        }
        DYNAMIC_SECTION(provider.label << ": stream, a text event with invalid UTF-8") {
            TestServer server;
            server.enqueue(ScriptedResponse::sse(
                with_raw(stream_open(api) + text_event(api, "@RAW@"), raw), 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
        }
        DYNAMIC_SECTION(provider.label << ": stream, an error event whose message is not UTF-8") {
            TestServer server;
            server.enqueue(ScriptedResponse::sse(
                with_raw(stream_start(api, {"Hel", "lo"}) + stream_error(api, false, "@RAW@"), raw),
                0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code != "no error");
            CHECK(out.text == "Hello");
        }
        DYNAMIC_SECTION(provider.label << ": stream, non-JSON data that is not UTF-8") {
            TestServer server;
            server.enqueue(ScriptedResponse::sse(stream_open(api) + "data: " + raw + "\n\n", 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
        }
        DYNAMIC_SECTION(provider.label
                        << ": stream, quoted non-JSON data that cuts a multibyte character") {
            TestServer server;
            std::string data = "upstream:          <p>";
            data += std::string(119 - data.size() - 1, '.') + "\xe2\x82\xac tail";
            server.enqueue(ScriptedResponse::sse(stream_open(api) + "data: " + data + "\n\n", 0));
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            CHECK(out.code == "invalid_provider_response");
        }
    }
}

TEST_CASE("fault matrix: a body followed by a NUL byte and junk is refused", "[fault_matrix]") {
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        for (const std::string& tail : {std::string("junk"), std::string("\0junk", 5)}) {
            const std::string label = tail.size() == 4 ? "junk" : "a NUL byte and junk";
            DYNAMIC_SECTION(provider.label << ": complete, a body followed by " << label) {
                TestServer server;
                server.enqueue(ScriptedResponse::json(200, ok_body(api, hello_text) + tail));
                const auto out = run(Mode::complete, provider, server);
                INFO(describe(out));
                CHECK(out.code == "invalid_provider_response");
                CHECK_FALSE(out.completed);
                CHECK(server.request_count() == 1);
            }
            DYNAMIC_SECTION(provider.label << ": stream, event data followed by " << label) {
                TestServer server;
                // The tail goes inside the event's data, before the blank line ending it.
                std::string event = text_event(api, "Hel");
                event.insert(event.size() - (event.ends_with("\r\n\r\n") ? 4 : 2), tail);
                server.enqueue(ScriptedResponse::sse(
                    stream_open(api) + event + text_event(api, "lo") + stream_close(api, "Hello"),
                    0));
                const auto out = run(Mode::stream, provider, server);
                INFO(describe(out));
                CHECK(out.code == "invalid_provider_response");
                CHECK(out.text.empty());
                CHECK_FALSE(out.completed);
            }
        }
    }
}

TEST_CASE("fault matrix: a gzip body", "[fault_matrix]") {
    for (const auto& provider : providers()) {
        const Api api = provider.api;
        // Non-streamed requests advertise the encodings libcurl decodes (docs/http.md).
        DYNAMIC_SECTION(provider.label << ": complete asks for gzip and gets it decoded") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(
                200, ullm::test::gzip_stored(ok_body(api, hello_text)),
                {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}}));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.completed);
            CHECK(out.text == hello_text);
            REQUIRE(server.request_count() == 1);
            CHECK(server.requests()[0].header("accept-encoding").find("gzip") != std::string::npos);
        }
        DYNAMIC_SECTION(provider.label << ": complete, a body that claims gzip but is not") {
            TestServer server;
            server.enqueue(ScriptedResponse::json(
                200, ok_body(api, hello_text),
                {{"Content-Type", "application/json"}, {"Content-Encoding", "gzip"}}));
            const auto out = run(Mode::complete, provider, server);
            INFO(describe(out));
            CHECK(out.code != "no error");
            CHECK_FALSE(out.completed);
            CHECK(out.text.empty());
        }
        // A stream may take gzip only if it asked for it (and then libcurl decodes it);
        // otherwise the gzip is unrequested and must be a clear error: never the bytes (nor
        // the events a stored deflate block leaves readable) taken as an event stream.
        DYNAMIC_SECTION(provider.label << ": stream gets gzip") {
            TestServer server;
            server.enqueue(
                {.status = 200,
                 .headers = {{"Content-Type", "text/event-stream"}, {"Content-Encoding", "gzip"}},
                 .chunks = {ullm::test::gzip_stored(full_stream(api, hello_deltas))}});
            const auto out = run(Mode::stream, provider, server);
            INFO(describe(out));
            REQUIRE(server.request_count() >= 1);
            const auto accepted = server.requests()[0].header("accept-encoding");
            INFO("Accept-Encoding: \"" << accepted << "\"");
            if (accepted.find("gzip") != std::string::npos) {
                CHECK(out.completed);
                CHECK(out.text == hello_text);
            } else {
                CHECK(out.code == "invalid_provider_response");
                CHECK_FALSE(out.completed);
                CHECK(out.text.empty());
                CHECK(server.request_count() == 1);
            }
        }
    }
}

TEST_CASE("fault matrix: a redirect to another origin is not followed", "[fault_matrix]") {
    for (const int status : {301, 302, 307, 308}) {
        for (const auto& provider : providers()) {
            const Api api = provider.api;
            for (const Mode mode : both_modes) {
                DYNAMIC_SECTION(status << " to another port, " << provider.label << ", "
                                       << name_of(mode)) {
                    TestServer elsewhere;
                    elsewhere.set_handler([api, mode](const RecordedRequest&) {
                        return mode == Mode::complete
                                   ? ScriptedResponse::json(200, ok_body(api, "followed"))
                                   : ScriptedResponse::sse(full_stream(api, {"followed"}), 0);
                    });
                    TestServer server;
                    server.set_handler([status, target = elsewhere.base_url()](
                                           const RecordedRequest& request) {
                        return ScriptedResponse{.status = status,
                                                .headers = {{"Location", target + request.target}}};
                    });
                    const auto out = run(mode, provider, server);
                    INFO(describe(out));
                    CHECK_FALSE(out.completed);
                    CHECK(out.text.empty());
                    CHECK(out.code != "no error");
                    CHECK_FALSE(out.retryable);
                    CHECK(out.message.find(std::to_string(status)) != std::string::npos);
                    CHECK(server.request_count() == 1);
                    // The other origin never saw the request, so never saw the key.
                    CHECK(elsewhere.request_count() == 0);
                    CHECK(elsewhere.connections_accepted() == 0);
                }
            }
        }
    }
}

TEST_CASE("fault matrix: an HTML error page", "[fault_matrix]") {
    const auto page = [](int status, const std::string& reason) {
        return "<html>\r\n<head><title>" + std::to_string(status) + " " + reason +
               "</title></head>\r\n<body>\r\n<center><h1>" + std::to_string(status) + " " + reason +
               "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";
    };
    for (const auto& [status, reason] : std::vector<std::pair<int, std::string>>{
             {502, "Bad Gateway"}, {503, "Service Temporarily Unavailable"}}) {
        for (const auto& provider : providers()) {
            for (const Mode mode : both_modes) {
                DYNAMIC_SECTION(status << " text/html, " << provider.label << ", "
                                       << name_of(mode)) {
                    TestServer server;
                    server.set_handler([status = status, text = page(status, reason)](
                                           const RecordedRequest&) { return html(status, text); });
                    const auto out = run(mode, provider, server);
                    INFO(describe(out));
                    CHECK(out.code == "provider_error");
                    CHECK(out.status == status);
                    CHECK(out.retryable);
                    CHECK(out.message.find(reason) != std::string::npos);
                    CHECK(out.message.find('\n') == std::string::npos);
                    CHECK(server.request_count() == 3);
                    if (mode == Mode::stream) CHECK(out.retries.size() == 2);
                }
            }
        }
    }
    for (const auto& provider : providers()) {
        for (const Mode mode : both_modes) {
            DYNAMIC_SECTION("200 text/html (a captive portal), " << provider.label << ", "
                                                                 << name_of(mode)) {
                TestServer server;
                server.set_handler([text = page(200, "Please log in to the hotel Wi-Fi")](
                                       const RecordedRequest&) { return html(200, text); });
                const auto out = run(mode, provider, server);
                INFO(describe(out));
                CHECK_FALSE(out.completed);
                CHECK(out.text.empty());
                if (mode == Mode::complete) {
                    CHECK(out.code == "invalid_provider_response");
                } else {
                    // No event at all: either reading of it is a clear error.
                    CHECK((out.code == "invalid_provider_response" ||
                           out.code == "stream_truncated"));
                }
            }
        }
    }
}

TEST_CASE("fault matrix: canary API keys never appear in error text", "[fault_matrix]") {
    const std::vector<std::pair<std::string, std::string>> keys = {
        {"sk-proj- (OpenAI)", openai_key},          {"xai- (40 characters)", xai_key},
        {"32 alphanumerics, no prefix", plain_key}, {"with - and _", dashed_key},
        {"sk-ant- (Anthropic)", anthropic_key},     {"AIza (Gemini)", gemini_key},
    };
    // Filler without whitespace, so that the cut at N characters falls 10 characters into
    // the key that follows it.
    const auto dots = [](std::size_t count) { return std::string(count, '.'); };
    struct Echo {
        std::string label;
        std::vector<Mode> modes;
        std::function<ScriptedResponse(Api, const std::string& key)> respond;
    };
    const std::vector<Echo> echoes = {
        {"a 401 JSON message",
         {Mode::complete, Mode::stream},
         [](Api api, const std::string& key) {
             return ScriptedResponse::json(
                 401, error_body(api, 401,
                                 "Incorrect API key provided: " + key +
                                     ". You can find your API key at https://example.invalid."));
         }},
        {"a 400 JSON message",
         {Mode::complete, Mode::stream},
         [](Api api, const std::string& key) {
             return ScriptedResponse::json(
                 400, error_body(api, 400, "Invalid header value '" + key + "' for this model"));
         }},
        {"an HTML error page",
         {Mode::complete, Mode::stream},
         [](Api, const std::string& key) {
             return html(502,
                         "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad "
                         "Gateway</h1><p>upstream refused the key " +
                             key + "</p></body></html>");
         }},
        {"a quoted invalid-JSON body",
         {Mode::complete},
         [](Api, const std::string& key) {
             return ScriptedResponse::json(200, "{\"echo\": \"" + key + "\", oops");
         }},
        {"an in-stream error event",
         {Mode::stream},
         [](Api api, const std::string& key) {
             return ScriptedResponse::sse(
                 stream_open(api) + stream_error(api, false, "Rejected credentials " + key), 0);
         }},
        {"non-JSON SSE data",
         {Mode::stream},
         [](Api api, const std::string& key) {
             return ScriptedResponse::sse(
                 stream_open(api) + "data: upstream refused the key " + key + "\n\n", 0);
         }},
        {"an invalid-JSON body cut at 120 characters inside the key",
         {Mode::complete},
         [dots](Api, const std::string& key) {
             return ScriptedResponse::json(200, dots(110) + key + " and more");
         }},
        {"non-JSON SSE data cut at 120 characters inside the key",
         {Mode::stream},
         [dots](Api api, const std::string& key) {
             return ScriptedResponse::sse(
                 stream_open(api) + "data: " + dots(110) + key + " and more\n\n", 0);
         }},
        {"an error message cut at 1000 characters inside the key",
         {Mode::complete, Mode::stream},
         [dots](Api api, const std::string& key) {
             return ScriptedResponse::json(400, error_body(api, 400, dots(990) + key + " more"));
         }},
        {"an HTML error page cut at 1000 characters inside the key",
         {Mode::complete, Mode::stream},
         [dots](Api, const std::string& key) {
             return html(502, "<html><body>" + dots(990 - 12) + key + "</body></html>");
         }},
        {"an in-stream error message cut at 1000 characters inside the key",
         {Mode::stream},
         [dots](Api api, const std::string& key) {
             return ScriptedResponse::sse(
                 stream_open(api) + stream_error(api, false, dots(990) + key + " more"), 0);
         }},
    };
    for (const auto& provider : providers()) {
        for (const auto& echo : echoes) {
            for (const Mode mode : echo.modes) {
                DYNAMIC_SECTION(provider.label << ", " << echo.label << ", " << name_of(mode)) {
                    TestServer server;
                    const Api api = provider.api;
                    // The server echoes the key it received.
                    server.set_handler(
                        [api, respond = echo.respond](const RecordedRequest& request) {
                            return respond(api, sent_key(request));
                        });
                    // One client per key, all on one transport.
                    const auto transport = std::make_shared<ullm::CurlTransport>();
                    for (std::size_t i = 0; i < keys.size(); ++i) {
                        const auto& [key_label, key] = keys[i];
                        INFO("key " << key_label);
                        const Settings settings{
                            .key = key, .max_attempts = 1, .transport = transport};
                        const auto out = run(mode, provider, server, settings);
                        INFO(describe(out));
                        CHECK(out.code != "no error");
                        REQUIRE(server.request_count() == i + 1);
                        CHECK(sent_key(server.requests()[i]) == key);
                    }
                }
            }
        }
    }
}

}  // namespace fault_matrix_test
