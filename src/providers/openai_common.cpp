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
