#include <ullm/tools/validator.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include "pattern.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm {

namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers

std::string pointer_append(const std::string& path, std::string_view token) {
    std::string out = path;
    out.push_back('/');
    for (const char c : token) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::string pointer_append(const std::string& path, std::size_t index) {
    return path + "/" + std::to_string(index);
}

std::size_t code_points(std::string_view text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
    }));
}

// A short, always-serialisable rendering of `value` for messages.
std::string render(const json& value, std::size_t limit = 60) {
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > limit) {
        text.resize(limit);
        text += "...";
    }
    return text;
}

std::string quote(std::string_view text) {
    return render(json(std::string(text)));
}

bool prototype_sensitive(std::string_view key) {
    return key == "__proto__" || key == "constructor" || key == "prototype";
}

bool is_non_negative_integer(const json& value) {
    if (value.is_number_unsigned()) return true;
    if (value.is_number_integer()) return value.get<std::int64_t>() >= 0;
    if (value.is_number_float()) {
        const double number = value.get<double>();
        return std::isfinite(number) && number >= 0 && std::floor(number) == number &&
               number <= 9007199254740992.0;
    }
    return false;
}

// Three-way numeric comparison, exact for integers of either signedness.
int compare_numbers(const json& a, const json& b) {
    if (a.is_number_integer() && b.is_number_integer()) {
        const bool a_unsigned = a.is_number_unsigned();
        const bool b_unsigned = b.is_number_unsigned();
        if (a_unsigned && b_unsigned) {
            const auto x = a.get<std::uint64_t>();
            const auto y = b.get<std::uint64_t>();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        if (!a_unsigned && !b_unsigned) {
            const auto x = a.get<std::int64_t>();
            const auto y = b.get<std::int64_t>();
            return x < y ? -1 : (x > y ? 1 : 0);
        }
        if (a_unsigned) return -compare_numbers(b, a);
        const auto x = a.get<std::int64_t>();  // signed
        if (x < 0) return -1;
        const auto ux = static_cast<std::uint64_t>(x);
        const auto y = b.get<std::uint64_t>();
        return ux < y ? -1 : (ux > y ? 1 : 0);
    }
    const auto x = a.get<long double>();
    const auto y = b.get<long double>();
    return x < y ? -1 : (x > y ? 1 : 0);
}

constexpr double max_safe_integer = 9007199254740992.0;  // 2^53

bool is_integer_value(const json& value) {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    const double number = value.get<double>();
    return std::isfinite(number) && std::floor(number) == number &&
           std::fabs(number) <= max_safe_integer;
}

bool is_multiple_of(const json& value, const json& divisor) {
    if (value.is_number_integer() && divisor.is_number_integer()) {
        if (divisor.is_number_unsigned() || divisor.get<std::int64_t>() > 0) {
            const auto d = divisor.get<std::uint64_t>();
            if (value.is_number_unsigned()) return value.get<std::uint64_t>() % d == 0;
            const auto v = value.get<std::int64_t>();
            // The magnitude of INT64_MIN does not fit int64_t; compute it unsigned.
            const std::uint64_t magnitude =
                v < 0 ? static_cast<std::uint64_t>(-(v + 1)) + 1U : static_cast<std::uint64_t>(v);
            return magnitude % d == 0;
        }
        return true;  // unvalidated schema: a non-positive divisor constrains nothing
    }
    const double d = divisor.get<double>();
    if (!(d > 0) || !std::isfinite(d)) return true;
    const double quotient = value.get<double>() / d;
    if (!std::isfinite(quotient)) return false;
    return std::fabs(quotient - std::nearbyint(quotient)) <=
           1e-9 * std::max(1.0, std::fabs(quotient));
}

const std::set<std::string_view>& type_names() {
    static const std::set<std::string_view> names{"object",  "array",   "string", "number",
                                                  "integer", "boolean", "null"};
    return names;
}

// Compiled patterns by their source text; a pattern that appears twice is compiled once.
using PatternMap = std::map<std::string, std::shared_ptr<const re2::RE2>, std::less<>>;

// ---------------------------------------------------------------------------------------------
// Schema validation

[[noreturn]] void schema_error(const std::string& pointer, const std::string& problem) {
    throw ToolDefinitionError("invalid_tool_schema",
                              "invalid parameter schema at #" + pointer + ": " + problem);
}

[[noreturn]] void unsupported(const std::string& pointer, std::string_view keyword,
                              const std::string& detail = {}) {
    throw ToolDefinitionError("unsupported_schema_keyword",
                              "unsupported schema keyword " + quote(keyword) + " at #" + pointer +
                                  (detail.empty() ? std::string() : ": " + detail));
}

enum class Keyword {
    type,
    properties,
    required,
    additional_properties,
    items,
    enumeration,
    constant,
    any_of,
    one_of,
    all_of,
    ref,
    defs,
    count,  // minLength, maxLength, minItems, maxItems, minProperties, maxProperties
    pattern,
    bound,  // minimum, maximum, exclusiveMinimum, exclusiveMaximum
    multiple_of,
    unique_items,
    text,       // description, title, format, $comment, $schema, $id
    any_value,  // default
    examples,
};

std::optional<Keyword> keyword_kind(std::string_view key) {
    static const std::map<std::string_view, Keyword> kinds{
        {"type", Keyword::type},
        {"properties", Keyword::properties},
        {"required", Keyword::required},
        {"additionalProperties", Keyword::additional_properties},
        {"items", Keyword::items},
        {"enum", Keyword::enumeration},
        {"const", Keyword::constant},
        {"anyOf", Keyword::any_of},
        {"oneOf", Keyword::one_of},
        {"allOf", Keyword::all_of},
        {"$ref", Keyword::ref},
        {"$defs", Keyword::defs},
        {"definitions", Keyword::defs},
        {"minLength", Keyword::count},
        {"maxLength", Keyword::count},
        {"minItems", Keyword::count},
        {"maxItems", Keyword::count},
        {"minProperties", Keyword::count},
        {"maxProperties", Keyword::count},
        {"pattern", Keyword::pattern},
        {"minimum", Keyword::bound},
        {"maximum", Keyword::bound},
        {"exclusiveMinimum", Keyword::bound},
        {"exclusiveMaximum", Keyword::bound},
        {"multipleOf", Keyword::multiple_of},
        {"uniqueItems", Keyword::unique_items},
        {"description", Keyword::text},
        {"title", Keyword::text},
        {"format", Keyword::text},
        {"$comment", Keyword::text},
        {"$schema", Keyword::text},
        {"$id", Keyword::text},
        {"default", Keyword::any_value},
        {"examples", Keyword::examples},
    };
    const auto found = kinds.find(key);
    if (found == kinds.end()) return std::nullopt;
    return found->second;
}

// A hint for keywords people commonly reach for, added to the rejection.
std::string unsupported_hint(std::string_view key) {
    if (key == "nullable") return "use \"type\": [\"<type>\", \"null\"] or anyOf with null";
    if (key == "prefixItems") return "tuple validation is not supported; use items";
    if (key == "strict") return "strict belongs to the provider request, not the schema";
    return "it is not part of the supported JSON Schema subset";
}

// The target of a local reference: "" for the root, otherwise "<container>/<name>".
struct RefTarget {
    std::string container;  // "", "$defs" or "definitions"
    std::string name;
};

std::optional<RefTarget> parse_ref(std::string_view ref) {
    if (ref == "#") return RefTarget{};
    for (const std::string_view container :
         {std::string_view("$defs"), std::string_view("definitions")}) {
        const std::string prefix = "#/" + std::string(container) + "/";
        if (ref.substr(0, prefix.size()) != prefix) continue;
        const std::string_view token = ref.substr(prefix.size());
        if (token.empty() || token.find('/') != std::string_view::npos) return std::nullopt;
        std::string name;
        for (std::size_t i = 0; i < token.size(); ++i) {
            if (token[i] != '~') {
                name.push_back(token[i]);
                continue;
            }
            if (i + 1 >= token.size()) return std::nullopt;
            if (token[i + 1] == '0') {
                name.push_back('~');
            } else if (token[i + 1] == '1') {
                name.push_back('/');
            } else {
                return std::nullopt;
            }
            ++i;
        }
        return RefTarget{std::string(container), std::move(name)};
    }
    return std::nullopt;
}

// The schema a reference points at, or null when it does not resolve.
const json* resolve(const json& root, const RefTarget& target) {
    if (target.container.empty()) return &root;
    if (!root.is_object()) return nullptr;
    const auto container = root.find(target.container);
    if (container == root.end() || !container->is_object()) return nullptr;
    const auto found = container->find(target.name);
    if (found == container->end()) return nullptr;
    return &*found;
}

std::string ref_key(const RefTarget& target) {
    return target.container.empty() ? std::string("#") : target.container + "/" + target.name;
}

// Fails when `schema` nests too deeply, holds a non-finite number or invalid UTF-8. Iterative.
void check_schema_json_safe(const json& schema) {
    struct Item {
        const json* value;
        std::string pointer;
        std::size_t depth;
    };
    std::vector<Item> pending{{&schema, "", 1}};
    while (!pending.empty()) {
        Item item = std::move(pending.back());
        pending.pop_back();
        const json& value = *item.value;
        if (value.is_number_float() && !std::isfinite(value.get<double>())) {
            schema_error(item.pointer, "numbers must be finite");
        }
        if (value.is_string() && !detail::is_valid_utf8(value.get_ref<const std::string&>())) {
            schema_error(item.pointer, "strings must be valid UTF-8");
        }
        if (!value.is_structured()) continue;
        if (item.depth > max_schema_depth) {
            schema_error(item.pointer, "the schema nests deeper than " +
                                           std::to_string(max_schema_depth) + " levels");
        }
        if (value.is_object()) {
            for (auto it = value.begin(); it != value.end(); ++it) {
                if (!detail::is_valid_utf8(it.key()))
                    schema_error(item.pointer, "keys must be valid UTF-8");
                pending.push_back(
                    {&it.value(), pointer_append(item.pointer, it.key()), item.depth + 1});
            }
        } else {
            std::size_t index = 0;
            for (const auto& element : value) {
                pending.push_back(
                    {&element, pointer_append(item.pointer, index++), item.depth + 1});
            }
        }
    }
}

// Where a schema sits: the root, a value's own schema (a property, additionalProperties,
// items, a definition) or a member of anyOf / oneOf / allOf, which its parent qualifies.
enum class Position { root, value, member };

// Whether `node` says which JSON types it accepts: through type, enum, const or $ref, through
// anyOf / oneOf alternatives that each do, or an allOf member that does.
bool names_types(const json& node) {
    if (!node.is_object()) return true;  // not a schema: reported as such
    for (const char* keyword : {"type", "enum", "const", "$ref"}) {
        if (node.contains(keyword)) return true;
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
        const auto list = node.find(keyword);
        if (list != node.end() && list->is_array() && !list->empty() &&
            std::all_of(list->begin(), list->end(), names_types)) {
            return true;
        }
    }
    const auto all = node.find("allOf");
    return all != node.end() && all->is_array() &&
           std::any_of(all->begin(), all->end(), names_types);
}

class SchemaChecker {
public:
    // Compiles every pattern into `patterns`.
    SchemaChecker(const json& root, bool object_root, PatternMap& patterns)
        : root_(root), object_root_(object_root), patterns_(patterns) {}

    void run() {
        check_node(root_, "", Position::root);
        check_ref_cycles();
    }

private:
    void check_node(const json& node, const std::string& pointer, Position position) {
        const bool is_root = position == Position::root;
        if (node.is_boolean()) {
            schema_error(pointer,
                         "a schema must be a JSON object (the boolean schemas true and false are "
                         "not supported)");
        }
        if (!node.is_object()) schema_error(pointer, "a schema must be a JSON object");
        for (auto it = node.begin(); it != node.end(); ++it) {
            const auto kind = keyword_kind(it.key());
            if (!kind) unsupported(pointer, it.key(), unsupported_hint(it.key()));
            if (*kind == Keyword::defs && !is_root) {
                unsupported(pointer, it.key(), "definitions are supported at the root only");
            }
        }
        if (is_root && object_root_) {
            const auto type = node.find("type");
            if (type == node.end() || !type->is_string() || *type != "object") {
                schema_error(pointer, "the root schema must have \"type\": \"object\"");
            }
        }
        // A nested $id would change what the $refs beneath it mean; it is only an annotation
        // here, so those $refs are refused (check_ref).
        const bool new_base = !is_root && node.contains("$id");
        if (new_base) ++nested_ids_;
        for (auto it = node.begin(); it != node.end(); ++it) {
            check_keyword(*keyword_kind(it.key()), it.key(), it.value(),
                          pointer_append(pointer, it.key()));
        }
        if (new_base) --nested_ids_;
        check_consistency(node, pointer);
        // Strict validation of tool arguments checks types; a schema that names none (`{}`,
        // {"description": ...}) would let any value through unseen. Checked after the
        // keywords, so that an unsupported keyword inside is reported as such.
        if (object_root_ && position == Position::value && !names_types(node)) {
            schema_error(pointer,
                         "the schema does not say which JSON types it accepts; give it \"type\" "
                         "(for any JSON value, all six: [\"object\", \"array\", \"string\", "
                         "\"number\", \"boolean\", \"null\"]), \"enum\", \"const\", \"$ref\", "
                         "or anyOf / oneOf alternatives that each do");
        }
    }

    void check_schema_map(const json& value, const std::string& pointer, bool property_names) {
        if (!value.is_object()) schema_error(pointer, "must be an object of schemas");
        for (auto it = value.begin(); it != value.end(); ++it) {
            if (property_names && prototype_sensitive(it.key())) {
                schema_error(pointer, "property name " + quote(it.key()) +
                                          " is reserved (prototype-sensitive)");
            }
            check_node(it.value(), pointer_append(pointer, it.key()), Position::value);
        }
    }

    void check_keyword(Keyword kind, const std::string& key, const json& value,
                       const std::string& pointer) {
        switch (kind) {
            case Keyword::type:
                check_type(value, pointer);
                break;
            case Keyword::properties:
                check_schema_map(value, pointer, true);
                break;
            case Keyword::required:
                check_required(value, pointer);
                break;
            case Keyword::additional_properties:
                if (!value.is_boolean()) check_node(value, pointer, Position::value);
                break;
            case Keyword::items:
                if (value.is_array()) {
                    unsupported(pointer.substr(0, pointer.size() - key.size() - 1), key,
                                "the array (tuple) form is not supported; give one schema");
                }
                check_node(value, pointer, Position::value);
                break;
            case Keyword::enumeration:
                if (!value.is_array() || value.empty()) {
                    schema_error(pointer, "must be a non-empty array");
                }
                break;
            case Keyword::constant:
            case Keyword::any_value:
                break;
            case Keyword::any_of:
            case Keyword::one_of:
            case Keyword::all_of:
                if (!value.is_array() || value.empty()) {
                    schema_error(pointer, "must be a non-empty array of schemas");
                }
                for (std::size_t i = 0; i < value.size(); ++i) {
                    check_node(value[i], pointer_append(pointer, i), Position::member);
                }
                break;
            case Keyword::ref:
                check_ref(key, value, pointer);
                break;
            case Keyword::defs:
                check_schema_map(value, pointer, false);
                break;
            case Keyword::count:
                if (!is_non_negative_integer(value)) {
                    schema_error(pointer, "must be a non-negative integer");
                }
                break;
            case Keyword::pattern:
                check_pattern(key, value, pointer);
                break;
            case Keyword::bound:
                if (value.is_boolean()) {
                    schema_error(pointer,
                                 "must be a number (the draft-04 boolean form is not supported)");
                }
                if (!value.is_number()) schema_error(pointer, "must be a number");
                break;
            case Keyword::multiple_of:
                if (!value.is_number() || !(value.get<double>() > 0)) {
                    schema_error(pointer, "must be a number greater than 0");
                }
                break;
            case Keyword::unique_items:
                if (!value.is_boolean()) schema_error(pointer, "must be a boolean");
                break;
            case Keyword::text:
                if (!value.is_string()) schema_error(pointer, "must be a string");
                break;
            case Keyword::examples:
                if (!value.is_array()) schema_error(pointer, "must be an array");
                break;
        }
    }

    static void check_type(const json& value, const std::string& pointer) {
        const auto check_name = [&](const json& name) {
            if (!name.is_string()) schema_error(pointer, "type names must be strings");
            if (type_names().count(name.get_ref<const std::string&>()) == 0) {
                schema_error(pointer, "unknown type " + render(name) +
                                          "; supported: object, array, string, number, "
                                          "integer, boolean, null");
            }
        };
        if (value.is_string()) {
            check_name(value);
            return;
        }
        if (!value.is_array() || value.empty()) {
            schema_error(pointer, "must be a type name or a non-empty array of type names");
        }
        std::set<std::string> seen;
        for (const auto& name : value) {
            check_name(name);
            if (!seen.insert(name.get<std::string>()).second) {
                schema_error(pointer, "type " + render(name) + " is listed twice");
            }
        }
    }

    static void check_required(const json& value, const std::string& pointer) {
        if (!value.is_array()) schema_error(pointer, "must be an array of property names");
        std::set<std::string> seen;
        for (const auto& name : value) {
            if (!name.is_string()) schema_error(pointer, "property names must be strings");
            const auto& text = name.get_ref<const std::string&>();
            if (prototype_sensitive(text)) {
                schema_error(pointer,
                             "property name " + quote(text) + " is reserved (prototype-sensitive)");
            }
            if (!seen.insert(text).second) {
                schema_error(pointer, "property " + quote(text) + " is listed twice");
            }
        }
    }

    void check_ref(const std::string& key, const json& value, const std::string& pointer) {
        const std::string node_pointer = pointer.substr(0, pointer.size() - key.size() - 1);
        if (!value.is_string()) schema_error(pointer, "must be a string");
        const auto target = parse_ref(value.get_ref<const std::string&>());
        if (!target) {
            unsupported(node_pointer, key,
                        "only local references \"#\", \"#/$defs/<name>\" and "
                        "\"#/definitions/<name>\" are supported, got " +
                            render(value));
        }
        if (nested_ids_ > 0) {
            unsupported(node_pointer, key,
                        "a $ref inside a schema with its own \"$id\" would resolve against that "
                        "$id, which is not supported; $id is supported at the root only when "
                        "$refs are beneath it");
        }
        if (resolve(root_, *target) == nullptr) {
            schema_error(pointer, "reference " + render(value) + " does not resolve");
        }
    }

    void check_pattern(const std::string& key, const json& value, const std::string& pointer) {
        if (!value.is_string()) schema_error(pointer, "must be a string");
        const auto& text = value.get_ref<const std::string&>();
        if (text.size() > max_pattern_bytes) {
            schema_error(pointer,
                         "patterns are limited to " + std::to_string(max_pattern_bytes) + " bytes");
        }
        if (patterns_.count(text) != 0) return;
        auto compiled = detail::compile_pattern(text, max_pattern_memory);
        switch (compiled.problem) {
            case detail::PatternProblem::none:
                break;
            case detail::PatternProblem::malformed:
                schema_error(pointer, "pattern " + render(value) +
                                          " is not a valid ECMAScript regular expression: " +
                                          compiled.reason);
            case detail::PatternProblem::unsupported:
                unsupported(
                    pointer.substr(0, pointer.size() - key.size() - 1), key,
                    "pattern " + render(value) + " cannot be run by RE2: " + compiled.reason);
        }
        program_size_ += static_cast<std::size_t>(detail::pattern_program_size(*compiled.program));
        if (program_size_ > max_schema_pattern_program) {
            schema_error(pointer, "the schema's patterns together compile to more than " +
                                      std::to_string(max_schema_pattern_program) +
                                      " RE2 instructions (max_schema_pattern_program)");
        }
        patterns_.emplace(text, std::move(compiled.program));
    }

    static void check_consistency(const json& node, const std::string& pointer) {
        const auto check_pair = [&](const char* low, const char* high) {
            const auto lo = node.find(low);
            const auto hi = node.find(high);
            if (lo != node.end() && hi != node.end() && compare_numbers(*lo, *hi) > 0) {
                schema_error(pointer, std::string(low) + " is greater than " + high +
                                          ", so no value can match");
            }
        };
        check_pair("minLength", "maxLength");
        check_pair("minItems", "maxItems");
        check_pair("minProperties", "maxProperties");
        check_pair("minimum", "maximum");

        const auto additional = node.find("additionalProperties");
        const auto required = node.find("required");
        if (additional != node.end() && additional->is_boolean() && !additional->get<bool>() &&
            required != node.end()) {
            const auto properties = node.find("properties");
            for (const auto& name : *required) {
                if (properties == node.end() || !properties->contains(name.get<std::string>())) {
                    schema_error(pointer, "required property " + render(name) +
                                              " is not in properties while "
                                              "additionalProperties is false");
                }
            }
        }
    }

    // Refs reachable from `node` without descending into any child value of the instance
    // (through $ref, anyOf, oneOf and allOf only).
    static void same_instance_refs(const json& node, std::vector<RefTarget>& out) {
        if (!node.is_object()) return;
        if (const auto ref = node.find("$ref"); ref != node.end() && ref->is_string()) {
            if (auto target = parse_ref(ref->get_ref<const std::string&>())) {
                out.push_back(std::move(*target));
            }
        }
        for (const char* keyword : {"anyOf", "oneOf", "allOf"}) {
            if (const auto list = node.find(keyword); list != node.end() && list->is_array()) {
                for (const auto& member : *list) same_instance_refs(member, out);
            }
        }
    }

    void check_ref_cycles() {
        enum class Mark { visiting, done };
        std::map<std::string, Mark> marks;
        std::vector<std::string> chain;
        const auto visit = [&](const auto& self, const RefTarget& target) -> void {
            const std::string key = ref_key(target);
            const auto display = [](const std::string& k) { return k == "#" ? k : "#/" + k; };
            if (const auto mark = marks.find(key); mark != marks.end()) {
                if (mark->second == Mark::done) return;
                std::string cycle;
                for (const auto& step : chain) cycle += display(step) + " -> ";
                cycle += display(key);
                schema_error("", "$ref cycle " + cycle + " never reaches a nested value");
            }
            if (chain.size() >= max_schema_depth) {
                schema_error("", "more than " + std::to_string(max_schema_depth) +
                                     " $refs are chained without reaching a nested value");
            }
            const json* schema = resolve(root_, target);
            if (schema == nullptr) return;
            marks[key] = Mark::visiting;
            chain.push_back(key);
            std::vector<RefTarget> next;
            same_instance_refs(*schema, next);
            for (const auto& successor : next) self(self, successor);
            chain.pop_back();
            marks[key] = Mark::done;
        };
        visit(visit, RefTarget{});
        for (const char* container : {"$defs", "definitions"}) {
            const auto defs = root_.find(container);
            if (defs == root_.end() || !defs->is_object()) continue;
            for (auto it = defs->begin(); it != defs->end(); ++it) {
                visit(visit, RefTarget{container, it.key()});
            }
        }
    }

    const json& root_;
    bool object_root_;
    PatternMap& patterns_;
    std::size_t program_size_ = 0;
    std::size_t nested_ids_ = 0;  // schemas with their own $id around the node being checked
};

// ---------------------------------------------------------------------------------------------
// Argument validation

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
                if (prototype_sensitive(it.key())) {
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

// Checks `schema` and returns its compiled patterns.
PatternMap check_schema(const json& schema, bool object_root) {
    check_schema_json_safe(schema);
    PatternMap patterns;
    SchemaChecker(schema, object_root, patterns).run();
    return patterns;
}

}  // namespace

void validate_schema(const json& schema) {
    (void)check_schema(schema, true);
}

void validate_value_schema(const json& schema) {
    (void)check_schema(schema, false);
}

void validate_arguments(const json& schema, const json& arguments) {
    check_arguments(schema, arguments, nullptr);
}

void validate_value(const json& schema, const json& value) {
    check_value(schema, value, nullptr);
}

struct CompiledSchema::State {
    json schema;
    PatternMap patterns;
};

CompiledSchema::CompiledSchema(std::shared_ptr<const State> state) noexcept
    : state_(std::move(state)) {}

CompiledSchema CompiledSchema::parameters(json schema) {
    auto patterns = check_schema(schema, true);
    return CompiledSchema(
        std::make_shared<const State>(State{std::move(schema), std::move(patterns)}));
}

CompiledSchema CompiledSchema::value(json schema) {
    auto patterns = check_schema(schema, false);
    return CompiledSchema(
        std::make_shared<const State>(State{std::move(schema), std::move(patterns)}));
}

const json& CompiledSchema::schema() const noexcept {
    return state_->schema;
}

void CompiledSchema::validate_arguments(const json& arguments) const {
    check_arguments(state_->schema, arguments, &state_->patterns);
}

void CompiledSchema::validate_value(const json& value) const {
    check_value(state_->schema, value, &state_->patterns);
}

}  // namespace ullm
