// Fuzz target: the strict validator with an arbitrary schema and arbitrary arguments, through
// the public API only (`define_tool`, `ToolRegistry`, `validate_*`).
//
// The payload is a JSON Schema text, an ASCII record separator (0x1E, as in RFC 7464 JSON
// text sequences), then an arguments text; inputs whose parts are not JSON are ignored. Only
// `ullm::Error` may leave the validator, and its entry points must agree:
// - tool mode (options bit 0 clear): a registry accepts the tool exactly when
//   `validate_schema` accepts the schema, and then `validate_value_schema` accepts it too;
//   `ToolRegistry::run` never throws, and fails with `invalid_tool_arguments` exactly when
//   `validate_arguments` throws, otherwise returning the arguments; arguments
//   `validate_arguments` accepts, `validate_value` accepts too.
// - value mode (options bit 0 set): `validate_value_schema`, then `validate_value`.
// The chunking and seed bytes are unused.

#include <ullm/core/json.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/tool_registry.hpp>
#include <ullm/tools/validator.hpp>

#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace {

using ullm::json;
using ullm::fuzz::capture;
using ullm::fuzz::describe;
using ullm::fuzz::finding;
using ullm::fuzz::show;

constexpr char record_separator = '\x1e';
constexpr const char* tool_name = "fuzz_tool";

void fuzz_tool_mode(const json& schema, std::string_view arguments_text) {
    const ullm::Tool tool = ullm::define_tool(ullm::ToolDefinition{
        .name = tool_name,
        .description = "Echoes its arguments",
        .parameters = schema,
        .execute = [](const json& arguments, ullm::ToolContext&) -> json { return arguments; }});
    ullm::ToolRegistry registry;
    const auto added = capture([&] { registry.add(tool); });
    const auto schema_failure = capture([&] { ullm::validate_schema(schema); });
    if (added.has_value() != schema_failure.has_value()) {
        finding("ToolRegistry::add and validate_schema disagree on a schema",
                "schema " + show(schema) + "\nadd: " + describe(added) +
                    "\nvalidate_schema: " + describe(schema_failure));
    }
    if (added) return;
    if (const auto failure = capture([&] { ullm::validate_value_schema(schema); })) {
        finding("validate_value_schema refuses a schema validate_schema accepts",
                "schema " + show(schema) + "\n" + describe(failure));
    }

    const json arguments = json::parse(arguments_text, nullptr, false);
    if (arguments.is_discarded()) return;
    const auto argument_failure = capture([&] { ullm::validate_arguments(schema, arguments); });
    ullm::ToolContext context;
    ullm::ToolOutcome outcome;
    if (const auto failure =
            capture([&] { outcome = registry.run(tool_name, arguments, context); })) {
        finding("ToolRegistry::run threw", describe(failure));
    }
    const std::string detail = "schema " + show(schema) + "\narguments " + show(arguments) +
                               "\nvalidate_arguments: " + describe(argument_failure) +
                               "\nrun: " + outcome.error_code + " " + show(outcome.result);
    if (argument_failure) {
        if (!outcome.is_error || outcome.error_code != "invalid_tool_arguments") {
            finding("ToolRegistry::run ran a tool on arguments validate_arguments refuses", detail);
        }
        return;
    }
    if (outcome.is_error || outcome.result != arguments) {
        finding("ToolRegistry::run refused arguments validate_arguments accepts", detail);
    }
    if (const auto failure = capture([&] { ullm::validate_value(schema, arguments); })) {
        finding("validate_value refuses arguments validate_arguments accepts",
                detail + "\nvalidate_value: " + describe(failure));
    }
}

void fuzz_value_mode(const json& schema, std::string_view value_text) {
    if (capture([&] { ullm::validate_value_schema(schema); })) return;
    const json value = json::parse(value_text, nullptr, false);
    if (value.is_discarded()) return;
    (void)capture([&] { ullm::validate_value(schema, value); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const std::size_t separator = input->payload.find(record_separator);
    if (separator == std::string_view::npos) return 0;
    const json schema = json::parse(input->payload.substr(0, separator), nullptr, false);
    if (schema.is_discarded()) return 0;
    const std::string_view rest = input->payload.substr(separator + 1);
    if ((input->options & 1) != 0) {
        fuzz_value_mode(schema, rest);
    } else {
        fuzz_tool_mode(schema, rest);
    }
    return 0;
}
