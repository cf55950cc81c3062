#include "argument_checker.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/tools/validator.hpp>

#include "pattern.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm::detail::validation {

namespace {

struct Failure {
    std::string path;
    std::string reason;
    std::vector<std::string> expected_types;  // set when the failure is a type mismatch
};

using Result = std::optional<Failure>;

// Thrown internally when the step or recursion budget runs out.
struct TooComplex {
    std::string path;
};

std::string describe(const json& value) {
    switch (value.type()) {
        case json::value_t::null:
            return "null";
        case json::value_t::boolean:
            return std::string("boolean ") + render(value);
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
        case json::value_t::number_float:
            return "number " + render(value);
        case json::value_t::string:
            return "string " + render(value);
        case json::value_t::array:
            return "array";
        case json::value_t::object:
            return "object";
        default:
            return "unsupported value";
    }
}

std::string with_article(std::string_view type) {
    if (type == "null") return "null";
    if (type == "object" || type == "array" || type == "integer") {
        return "an " + std::string(type);
    }
    return "a " + std::string(type);
}

bool has_type(const json& value, std::string_view type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "number") return value.is_number();
    if (type == "integer") return is_integer_value(value);
    if (type == "boolean") return value.is_boolean();
    if (type == "null") return value.is_null();
    return false;
}

Failure type_failure(const std::string& path, std::vector<std::string> expected,
                     const json& value) {
    std::string reason = "must be ";
    for (std::size_t i = 0; i < expected.size(); ++i) {
        if (i > 0) reason += i + 1 == expected.size() ? " or " : ", ";
        reason += with_article(expected[i]);
    }
    if (expected.size() == 1 && expected[0] == "integer" && value.is_number()) {
        reason += ", got " + describe(value);
        if (value.is_number_float() && std::isfinite(value.get<double>()) &&
            std::floor(value.get<double>()) == value.get<double>()) {
            reason += " (outside the safe integer range)";
        }
    } else {
        reason += ", got " + describe(value);
    }
    return Failure{path, std::move(reason), std::move(expected)};
}

std::string render_list(const json& values, std::size_t limit = 20) {
    std::string out;
    std::size_t count = 0;
    for (const auto& value : values) {
        if (count == limit) {
            out += ", ...";
            break;
        }
        if (count > 0) out += ", ";
        out += render(value, 40);
        ++count;
    }
    return out;
}

std::string render_message(const Failure& failure) {
    return "argument " + (failure.path.empty() ? std::string("(root)") : failure.path) + " " +
           failure.reason;
}

class ArgumentChecker {
public:
    // `compiled` holds the schema's patterns when it is a CompiledSchema's; any other pattern
    // is compiled on first use and kept for the rest of this checker's life.
    explicit ArgumentChecker(const json& root, const PatternMap* compiled = nullptr)
        : root_(root), compiled_(compiled) {}

    Result check(const json& schema, const json& value, const std::string& path) {
        if (++steps_ > max_validation_steps || depth_ > max_recursion) throw TooComplex{path};
        ++depth_;
        Result result = check_inner(schema, value, path);
        --depth_;
        return result;
    }

private:
    static constexpr std::size_t max_recursion = 512;

    Result check_inner(const json& schema, const json& value, const std::string& path) {
        if (schema.is_boolean()) {
            if (schema.get<bool>()) return std::nullopt;
            return Failure{path, "is not allowed", {}};
        }
        if (!schema.is_object()) return std::nullopt;

        if (auto failure = check_type(schema, value, path)) return failure;
        if (const auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
            if (std::find(values->begin(), values->end(), value) == values->end()) {
                return Failure{
                    path,
                    "must be one of " + render_list(*values) + ", got " + describe(value),
                    {}};
            }
        }
        if (const auto expected = schema.find("const"); expected != schema.end()) {
            if (*expected != value) {
                return Failure{
                    path, "must be " + render(*expected) + ", got " + describe(value), {}};
            }
        }
        if (value.is_string()) {
            if (auto failure = check_string(schema, value.get_ref<const std::string&>(), path)) {
                return failure;
            }
        } else if (value.is_number()) {
            if (auto failure = check_number(schema, value, path)) return failure;
        } else if (value.is_array()) {
            if (auto failure = check_array(schema, value, path)) return failure;
        } else if (value.is_object()) {
            if (auto failure = check_object(schema, value, path)) return failure;
        }
        if (const auto ref = schema.find("$ref"); ref != schema.end() && ref->is_string()) {
            if (const auto target = parse_ref(ref->get_ref<const std::string&>())) {
                if (const json* resolved = resolve(root_, *target)) {
                    if (auto failure = check(*resolved, value, path)) return failure;
                }
            }
        }
        if (const auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
            for (const auto& member : *all) {
                if (auto failure = check(member, value, path)) return failure;
            }
        }
        if (const auto any = schema.find("anyOf"); any != schema.end() && any->is_array()) {
            std::vector<Failure> failures;
            for (const auto& member : *any) {
                auto failure = check(member, value, path);
                if (!failure) {
                    failures.clear();
                    break;
                }
                failures.push_back(std::move(*failure));
            }
            if (!failures.empty()) return combine(failures, value, path, "anyOf");
        }
        if (const auto one = schema.find("oneOf"); one != schema.end() && one->is_array()) {
            std::vector<Failure> failures;
            std::vector<std::size_t> matches;
            for (std::size_t i = 0; i < one->size(); ++i) {
                if (auto failure = check((*one)[i], value, path)) {
                    failures.push_back(std::move(*failure));
                } else {
                    matches.push_back(i + 1);
                }
            }
            if (matches.size() > 1) {
                return Failure{path,
                               "matches more than one of the alternatives (oneOf): alternatives " +
                                   std::to_string(matches[0]) + " and " +
                                   std::to_string(matches[1]) +
                                   " both match; it must match "
                                   "exactly one",
                               {}};
            }
            if (matches.empty()) return combine(failures, value, path, "oneOf");
        }
        return std::nullopt;
    }

    static Result check_type(const json& schema, const json& value, const std::string& path) {
        const auto type = schema.find("type");
        if (type == schema.end()) return std::nullopt;
        std::vector<std::string> expected;
        if (type->is_string()) {
            expected.push_back(type->get<std::string>());
        } else if (type->is_array()) {
            for (const auto& name : *type) {
                if (name.is_string()) expected.push_back(name.get<std::string>());
            }
        } else {
            return std::nullopt;
        }
        for (const auto& name : expected) {
            if (has_type(value, name)) return std::nullopt;
        }
        if (expected.empty()) return std::nullopt;
        return type_failure(path, std::move(expected), value);
    }

    Result check_string(const json& schema, const std::string& text, const std::string& path) {
        const auto length_limit = [&](const char* keyword) -> std::optional<std::uint64_t> {
            const auto found = schema.find(keyword);
            if (found == schema.end() || !is_non_negative_integer(*found)) return std::nullopt;
            return found->get<std::uint64_t>();
        };
        const std::size_t length = code_points(text);
        if (const auto min = length_limit("minLength"); min && length < *min) {
            return Failure{path,
                           "must be at least " + std::to_string(*min) + " characters long, got " +
                               std::to_string(length),
                           {}};
        }
        if (const auto max = length_limit("maxLength"); max && length > *max) {
            return Failure{path,
                           "must be at most " + std::to_string(*max) + " characters long, got " +
                               std::to_string(length),
                           {}};
        }
        const auto pattern = schema.find("pattern");
        if (pattern == schema.end() || !pattern->is_string()) return std::nullopt;
        const auto& source = pattern->get_ref<const std::string&>();
        if (text.size() > max_pattern_subject_bytes) {
            return Failure{path,
                           "is too long to check against the pattern " + render(*pattern) + " (" +
                               std::to_string(text.size()) + " bytes; at most " +
                               std::to_string(max_pattern_subject_bytes) + ")",
                           {}};
        }
        const re2::RE2* program = find_pattern(source);
        if (program == nullptr) {
            return Failure{
                path, "could not be checked against the pattern " + render(*pattern), {}};
        }
        if (detail::pattern_search(*program, text)) return std::nullopt;
        return Failure{
            path, "must match the pattern " + render(*pattern) + ", got " + render(text), {}};
    }

    // The program of `source`, or null when it does not compile (an unchecked schema).
    const re2::RE2* find_pattern(const std::string& source) {
        if (compiled_ != nullptr) {
            if (const auto found = compiled_->find(source); found != compiled_->end()) {
                return found->second.get();
            }
        }
        auto found = memo_.find(source);
        if (found == memo_.end()) {
            found =
                memo_.emplace(source, detail::compile_pattern(source, max_pattern_memory).program)
                    .first;
        }
        return found->second.get();
    }

    static Result check_number(const json& schema, const json& value, const std::string& path) {
        struct Bound {
            const char* keyword;
            const char* relation;
            bool (*ok)(int);
        };
        static constexpr Bound bounds[] = {
            {"minimum", ">=", [](int order) { return order >= 0; }},
            {"maximum", "<=", [](int order) { return order <= 0; }},
            {"exclusiveMinimum", ">", [](int order) { return order > 0; }},
            {"exclusiveMaximum", "<", [](int order) { return order < 0; }},
        };
        for (const auto& bound : bounds) {
            const auto limit = schema.find(bound.keyword);
            if (limit == schema.end() || !limit->is_number()) continue;
            if (!bound.ok(compare_numbers(value, *limit))) {
                return Failure{path,
                               std::string("must be ") + bound.relation + " " + render(*limit) +
                                   ", got " + render(value),
                               {}};
            }
        }
        const auto divisor = schema.find("multipleOf");
        if (divisor != schema.end() && divisor->is_number() && !is_multiple_of(value, *divisor)) {
            return Failure{
                path, "must be a multiple of " + render(*divisor) + ", got " + render(value), {}};
        }
        return std::nullopt;
    }

    Result check_array(const json& schema, const json& value, const std::string& path) {
        const auto count_limit = [&](const char* keyword) -> std::optional<std::uint64_t> {
            const auto found = schema.find(keyword);
            if (found == schema.end() || !is_non_negative_integer(*found)) return std::nullopt;
            return found->get<std::uint64_t>();
        };
        if (const auto min = count_limit("minItems"); min && value.size() < *min) {
            return Failure{path,
                           "must have at least " + std::to_string(*min) + " items, got " +
                               std::to_string(value.size()),
                           {}};
        }
        if (const auto max = count_limit("maxItems"); max && value.size() > *max) {
            return Failure{path,
                           "must have at most " + std::to_string(*max) + " items, got " +
                               std::to_string(value.size()),
                           {}};
        }
        if (const auto unique = schema.find("uniqueItems");
            unique != schema.end() && unique->is_boolean() && unique->get<bool>()) {
            if (auto failure = check_unique(value, path)) return failure;
        }
        if (const auto items = schema.find("items"); items != schema.end() && items->is_object()) {
            for (std::size_t i = 0; i < value.size(); ++i) {
                if (auto failure = check(*items, value[i], pointer_append(path, i))) return failure;
            }
        }
        return std::nullopt;
    }

    static Result check_unique(const json& value, const std::string& path) {
        // Sort indices so that duplicates are adjacent: O(n log n) even for long arrays.
        std::vector<std::size_t> order(value.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return std::less<json>{}(value[a], value[b]);
        });
        for (std::size_t i = 1; i < order.size(); ++i) {
            if (value[order[i - 1]] == value[order[i]]) {
                const auto first = std::min(order[i - 1], order[i]);
                const auto second = std::max(order[i - 1], order[i]);
                return Failure{path,
                               "must not contain duplicate items (items " + std::to_string(first) +
                                   " and " + std::to_string(second) + " are equal)",
                               {}};
            }
        }
        return std::nullopt;
    }

    Result check_object(const json& schema, const json& value, const std::string& path) {
        const auto properties = schema.find("properties");
        const bool has_properties = properties != schema.end() && properties->is_object();
        const auto additional = schema.find("additionalProperties");
        const bool closed =
            additional != schema.end() && additional->is_boolean() && !additional->get<bool>();

        if (closed) {
            for (auto it = value.begin(); it != value.end(); ++it) {
                if (has_properties && properties->contains(it.key())) continue;
                std::string allowed;
                if (has_properties && !properties->empty()) {
                    json names = json::array();
                    for (auto p = properties->begin(); p != properties->end(); ++p) {
                        names.push_back(p.key());
                    }
                    allowed = render_list(names, 50);
                } else {
                    allowed = "none";
                }
                return Failure{
                    path,
                    "has unexpected property " + quote(it.key()) + "; allowed: " + allowed,
                    {}};
            }
        }
        if (const auto required = schema.find("required");
            required != schema.end() && required->is_array()) {
            for (const auto& name : *required) {
                if (!name.is_string()) continue;
                const auto& key = name.get_ref<const std::string&>();
                if (!value.contains(key)) {
                    return Failure{pointer_append(path, key), "is required but missing", {}};
                }
            }
        }
        for (auto it = value.begin(); it != value.end(); ++it) {
            const std::string child = pointer_append(path, it.key());
            if (has_properties) {
                if (const auto property = properties->find(it.key());
                    property != properties->end()) {
                    if (auto failure = check(*property, it.value(), child)) return failure;
                    continue;
                }
            }
            if (additional != schema.end() && additional->is_object()) {
                if (auto failure = check(*additional, it.value(), child)) return failure;
            }
        }
        const auto count_limit = [&](const char* keyword) -> std::optional<std::uint64_t> {
            const auto found = schema.find(keyword);
            if (found == schema.end() || !is_non_negative_integer(*found)) return std::nullopt;
            return found->get<std::uint64_t>();
        };
        if (const auto min = count_limit("minProperties"); min && value.size() < *min) {
            return Failure{path,
                           "must have at least " + std::to_string(*min) + " properties, got " +
                               std::to_string(value.size()),
                           {}};
        }
        if (const auto max = count_limit("maxProperties"); max && value.size() > *max) {
            return Failure{path,
                           "must have at most " + std::to_string(*max) + " properties, got " +
                               std::to_string(value.size()),
                           {}};
        }
        return std::nullopt;
    }

    // One failure for an anyOf / oneOf none of whose alternatives matched.
    static Failure combine(std::vector<Failure>& failures, const json& value,
                           const std::string& path, std::string_view keyword) {
        const bool all_type_mismatches =
            std::all_of(failures.begin(), failures.end(), [&](const Failure& failure) {
                return !failure.expected_types.empty() && failure.path == path;
            });
        if (all_type_mismatches) {
            std::vector<std::string> expected;
            for (const auto& failure : failures) {
                for (const auto& type : failure.expected_types) {
                    if (std::find(expected.begin(), expected.end(), type) == expected.end()) {
                        expected.push_back(type);
                    }
                }
            }
            return type_failure(path, std::move(expected), value);
        }
        if (failures.size() == 1) return std::move(failures.front());
        std::string reason =
            "does not match any of the allowed alternatives (" + std::string(keyword) + "): ";
        constexpr std::size_t shown = 5;
        constexpr std::size_t max_reason = 300;
        for (std::size_t i = 0; i < failures.size() && i < shown; ++i) {
            if (i > 0) reason += "; ";
            std::string message = render_message(failures[i]);
            if (message.size() > max_reason) message = message.substr(0, max_reason) + "...";
            reason += "alternative " + std::to_string(i + 1) + ": " + message;
        }
        if (failures.size() > shown) reason += "; ...";
        return Failure{path, std::move(reason), {}};
    }

    const json& root_;
    const PatternMap* compiled_;
    PatternMap memo_;
    std::size_t steps_ = 0;
    std::size_t depth_ = 0;
};

// Checks what strict mode requires of every argument value, whatever the schema says: depth,
// finite numbers, valid UTF-8 and no prototype-sensitive keys. Iterative; document order.
Result check_arguments_safe(const json& arguments) {
    struct Item {
        const json* value;
        std::string path;
        std::size_t depth;
    };
    std::vector<Item> pending{{&arguments, "", 1}};
    while (!pending.empty()) {
        Item item = std::move(pending.back());
        pending.pop_back();
        const json& value = *item.value;
        if (value.is_number_float() && !std::isfinite(value.get<double>())) {
            return Failure{item.path, "must be a finite number", {}};
        }
        if (value.is_string() && !detail::is_valid_utf8(value.get_ref<const std::string&>())) {
            return Failure{item.path, "must be valid UTF-8 text", {}};
        }
        if (!value.is_structured()) continue;
        if (item.depth > max_argument_depth) {
            return Failure{item.path,
                           "is nested too deeply (more than " + std::to_string(max_argument_depth) +
                               " levels)",
                           {}};
        }
        const std::size_t first_child = pending.size();
        if (value.is_object()) {
            for (auto it = value.begin(); it != value.end(); ++it) {
                if (!detail::is_valid_utf8(it.key())) {
                    return Failure{item.path, "has a property name that is not valid UTF-8", {}};
                }
                if (is_prototype_sensitive_key(it.key())) {
                    return Failure{
                        pointer_append(item.path, it.key()),
                        "is not allowed: " + quote(it.key()) + " is a reserved property name",
                        {}};
                }
                pending.push_back(
                    {&it.value(), pointer_append(item.path, it.key()), item.depth + 1});
            }
        } else {
            std::size_t index = 0;
            for (const auto& element : value) {
                pending.push_back({&element, pointer_append(item.path, index++), item.depth + 1});
            }
        }
        // Visit children in document order.
        std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first_child), pending.end());
    }
    return std::nullopt;
}

}  // namespace

// What validate_arguments checks beyond the schema, then the schema itself.
void check_arguments(const json& schema, const json& arguments, const PatternMap* compiled) {
    if (!arguments.is_object()) {
        throw ToolArgumentError("", "must be an object, got " + describe(arguments));
    }
    if (auto failure = check_arguments_safe(arguments)) {
        throw ToolArgumentError(failure->path, failure->reason);
    }
    Result failure;
    try {
        failure = ArgumentChecker(schema, compiled).check(schema, arguments, "");
    } catch (const TooComplex& error) {
        throw ToolArgumentError(error.path,
                                "could not be validated: the schema is too expensive to evaluate "
                                "for these arguments");
    }
    if (failure) throw ToolArgumentError(failure->path, failure->reason);
}

void check_value(const json& schema, const json& value, const PatternMap* compiled) {
    Result failure;
    try {
        failure = ArgumentChecker(schema, compiled).check(schema, value, "");
    } catch (const TooComplex& error) {
        throw ToolArgumentError(error.path,
                                "could not be validated: the schema is too expensive to evaluate "
                                "for this value");
    }
    if (failure) throw ToolArgumentError(failure->path, failure->reason);
}

}  // namespace ullm::detail::validation
