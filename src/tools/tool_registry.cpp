#include <ullm/tools/tool_registry.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include <exception>
#include <string>
#include <utility>

namespace ullm {

namespace {

constexpr std::size_t max_error_text = 2000;

// A tool name as messages show it: quoted, escaped, and cut after 80 bytes.
std::string quote_name(std::string_view name) {
    return detail::quote(name, 80);
}

// Exception text as it can be shown to the model: valid UTF-8 and bounded.
std::string clean(std::string_view text) {
    const std::string escaped =
        json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
    std::string out = json::parse(std::string_view(escaped)).get<std::string>();
    if (out.size() > max_error_text) {
        std::size_t cut = max_error_text;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0U) == 0x80U) --cut;
        out.resize(cut);
        out += "...";
    }
    return out;
}

ToolOutcome error_outcome(ErrorCode code, std::string text) {
    return ToolOutcome{json(std::move(text)), true, detail::report(code)};
}

}  // namespace

ToolRegistry::ToolRegistry(std::vector<Tool> tools) {
    auto parameters = detail::validate_tools_compiled(tools);
    for (std::size_t i = 0; i < tools.size(); ++i) index_.emplace(tools[i].name(), i);
    tools_ = std::move(tools);
    parameters_ = std::move(parameters);
}

void ToolRegistry::add(Tool tool) {
    auto parameters = detail::validate_tool_compiled(tool);
    if (index_.count(tool.name()) != 0) {
        throw ToolDefinitionError(ErrorCode::duplicate_tool_name,
                                  "tool name " + quote_name(tool.name()) +
                                      " is already registered; names must be unique (compared "
                                      "exactly and case-sensitively)");
    }
    // Reserve first: after the index entry is in, push_back can no longer throw.
    tools_.reserve(tools_.size() + 1);
    parameters_.reserve(parameters_.size() + 1);
    index_.emplace(tool.name(), tools_.size());
    tools_.push_back(std::move(tool));
    parameters_.push_back(std::move(parameters));
}

const Tool* ToolRegistry::find(std::string_view name) const noexcept {
    const auto found = index_.find(name);
    return found == index_.end() ? nullptr : &tools_[found->second];
}

std::vector<std::string> ToolRegistry::names() const {
    std::vector<std::string> out;
    out.reserve(tools_.size());
    for (const auto& tool : tools_) out.push_back(tool.name());
    return out;
}

ToolOutcome ToolRegistry::run(std::string_view name, const json& arguments, ToolContext& context,
                              ValidationMode mode) const {
    const Tool* tool = find(name);
    if (tool == nullptr) {
        std::string text = "Unknown tool " + quote_name(name) + ".";
        if (tools_.empty()) {
            text += " No tools are available.";
        } else {
            text += " Available tools: ";
            for (std::size_t i = 0; i < tools_.size(); ++i) {
                if (i > 0) text += ", ";
                text += tools_[i].name();
            }
            text += ".";
        }
        return error_outcome(ErrorCode::unknown_tool, std::move(text));
    }
    const std::string prefix = "Invalid arguments for tool " + quote_name(tool->name()) + ": ";
    try {
        if (mode == ValidationMode::strict) {
            parameters_[static_cast<std::size_t>(tool - tools_.data())].validate_arguments(
                arguments);
        } else if (!arguments.is_object()) {
            throw ToolArgumentError("",
                                    "must be an object, got " + std::string(arguments.type_name()));
        }
    } catch (const ToolArgumentError& error) {
        return error_outcome(error.error_code(), prefix + clean(error.message()) + ".");
    }
    try {
        return ToolOutcome{tool->execute(arguments, context), false, {}};
    } catch (const ToolArgumentError& error) {
        return error_outcome(error.error_code(), prefix + clean(error.message()) + ".");
    } catch (const ToolResultError& error) {
        return ToolOutcome{json(error.message()), true, error.outcome_code()};
    } catch (const Error& error) {
        return error_outcome(error.error_code(), "Tool " + quote_name(tool->name()) +
                                                     " failed: " + clean(error.message()));
    } catch (const std::exception& error) {
        return error_outcome(
            ErrorCode::tool_execution_failed,
            "Tool " + quote_name(tool->name()) + " failed: " + clean(error.what()));
    } catch (...) {
        return error_outcome(ErrorCode::tool_execution_failed,
                             "Tool " + quote_name(tool->name()) + " failed with an unknown error.");
    }
}

}  // namespace ullm
