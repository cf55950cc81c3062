#include "openai_common.hpp"

#include <utility>

namespace ullm::detail {

bool is_openai_reasoning_model(std::string_view model) {
    return model.starts_with("o1") || model.starts_with("o3") || model.starts_with("o4") ||
           (model.starts_with("gpt-5") && !model.starts_with("gpt-5-chat"));
}

std::string data_url(const std::string& media_type, const std::string& data) {
    return "data:" + media_type + ";base64," + data;
}

HttpRequest openai_http_request(std::string url, const json& body, bool stream,
                                const std::string& api_key, const std::string& organization,
                                const std::string& project, const HttpHeaders& extra,
                                std::chrono::milliseconds connect_timeout,
                                std::chrono::milliseconds idle_timeout) {
    HttpRequest http;
    http.method = "POST";
    http.url = std::move(url);
    http.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    http.headers = {{"Content-Type", "application/json"}};
    if (stream) http.headers.emplace_back("Accept", "text/event-stream");
    if (!api_key.empty()) {
        http.headers.emplace_back("Authorization", "Bearer " + api_key);
        http.secrets.push_back(api_key);
    }
    if (!organization.empty()) http.headers.emplace_back("OpenAI-Organization", organization);
    if (!project.empty()) http.headers.emplace_back("OpenAI-Project", project);
    for (const auto& header : extra) http.headers.push_back(header);
    http.connect_timeout = connect_timeout;
    http.idle_timeout = idle_timeout;
    return http;
}

json openai_tool_choice(const ToolChoice& choice, const json& named) {
    switch (choice.mode) {
        case ToolChoice::Mode::automatic:
            return "auto";
        case ToolChoice::Mode::none:
            return "none";
        case ToolChoice::Mode::required:
            return "required";
        case ToolChoice::Mode::tool:
            return named;
    }
    return "auto";
}

std::string tool_result_text(const ToolResultPart& result) {
    return result.result.is_string() ? result.result.get<std::string>() : result.result.dump();
}

}  // namespace ullm::detail
