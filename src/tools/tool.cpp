#include <ullm/tools/tool.hpp>

#include <ullm/detail/json_checks.hpp>
#include <ullm/tools/validator.hpp>

#include "../core/text.hpp"

#include <algorithm>
#include <new>
#include <set>
#include <string_view>

namespace ullm {

namespace {

constexpr std::size_t max_tool_name_length = 64;

// The name as it can safely appear in a message: escaped, quoted and shortened.
std::string quote_name(const std::string& name) {
    std::string text = json(name).dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 80) text = text.substr(0, 80) + "...";
    return text;
}

bool valid_name_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

// The text of an exception thrown while decoding, without nlohmann's "[json.exception...] ".
std::string decode_reason(std::string_view text) {
    if (text.substr(0, 16) == "[json.exception.") {
        if (const auto end = text.find("] "); end != std::string_view::npos) {
            text = text.substr(end + 2);
        }
    }
    return std::string(text);
}

}  // namespace

namespace detail {

void throw_argument_decode_error(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const ToolArgumentError&) {
        throw;
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& failure) {
        throw ToolArgumentError("", "could not be decoded: " + decode_reason(failure.what()));
    } catch (...) {
        throw ToolArgumentError("", "could not be decoded");
    }
}

}  // namespace detail

json Tool::execute(const json& arguments, ToolContext& context) const {
    if (!definition_->execute) {
        throw ToolDefinitionError(
            ErrorCode::missing_tool_execute,
            "tool " + quote_name(definition_->name) + " has no execute callback");
    }
    return definition_->execute(arguments, context);
}

namespace {

void check_name_and_description(const std::string& name, const std::string& description) {
    if (name.empty() || name.size() > max_tool_name_length ||
        !std::all_of(name.begin(), name.end(), valid_name_char)) {
        throw ToolDefinitionError(
            ErrorCode::invalid_tool_name,
            "tool name " + quote_name(name) + " is invalid: names must match [A-Za-z0-9_-]{1,64}");
    }
    if (detail::is_blank(description)) {
        throw ToolDefinitionError(ErrorCode::invalid_tool_description,
                                  "tool " + quote_name(name) + " needs a non-empty description");
    }
    if (!detail::is_valid_utf8(description)) {
        throw ToolDefinitionError(
            ErrorCode::invalid_tool_description,
            "the description of tool " + quote_name(name) + " is not valid UTF-8");
    }
}

// Runs `check` on the parameters of tool `name`, naming the tool in what it throws.
template <class Check>
auto check_parameters(const std::string& name, Check check) {
    try {
        return check();
    } catch (const ToolDefinitionError& error) {
        throw ToolDefinitionError(error.error_code(),
                                  "tool " + quote_name(name) + ": " + error.message());
    }
}

void check_declaration(const std::string& name, const std::string& description,
                       const json& parameters) {
    check_name_and_description(name, description);
    check_parameters(name, [&] { validate_schema(parameters); });
}

template <class Item, class NameOf>
void check_unique(const std::vector<Item>& items, NameOf name_of) {
    std::set<std::string_view> names;
    for (const auto& item : items) {
        if (!names.insert(name_of(item)).second) {
            throw ToolDefinitionError(ErrorCode::duplicate_tool_name,
                                      "tool name " + quote_name(std::string(name_of(item))) +
                                          " is used twice; names must be unique (compared "
                                          "exactly and case-sensitively)");
        }
    }
}

}  // namespace

void validate_declaration(const ToolDeclaration& declaration) {
    check_declaration(declaration.name, declaration.description, declaration.parameters);
}

void validate_declarations(const std::vector<ToolDeclaration>& declarations) {
    for (const auto& declaration : declarations) validate_declaration(declaration);
    check_unique(declarations, [](const ToolDeclaration& d) -> std::string_view { return d.name; });
}

void validate_tool(const Tool& tool) {
    (void)detail::validate_tool_compiled(tool);
}

namespace detail {

CompiledSchema validate_tool_compiled(const Tool& tool) {
    check_name_and_description(tool.name(), tool.description());
    auto parameters = check_parameters(
        tool.name(), [&] { return CompiledSchema::parameters(tool.parameters()); });
    if (!tool.definition().execute) {
        throw ToolDefinitionError(ErrorCode::missing_tool_execute,
                                  "tool " + quote_name(tool.name()) + " has no execute callback");
    }
    return parameters;
}

std::vector<CompiledSchema> validate_tools_compiled(const std::vector<Tool>& tools) {
    std::vector<CompiledSchema> out;
    out.reserve(tools.size());
    for (const auto& tool : tools) out.push_back(validate_tool_compiled(tool));
    check_unique(tools, [](const Tool& t) -> std::string_view { return t.name(); });
    return out;
}

}  // namespace detail

void validate_tools(const std::vector<Tool>& tools) {
    (void)detail::validate_tools_compiled(tools);
}

}  // namespace ullm
