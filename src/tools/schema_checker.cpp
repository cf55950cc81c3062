#include "schema_checker.hpp"

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

const std::set<std::string_view>& type_names() {
    static const std::set<std::string_view> names{"object",  "array",   "string", "number",
                                                  "integer", "boolean", "null"};
    return names;
}

[[noreturn]] void schema_error(const std::string& pointer, const std::string& problem) {
    throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                              "invalid parameter schema at #" + pointer + ": " + problem);
}

[[noreturn]] void unsupported(const std::string& pointer, std::string_view keyword,
                              const std::string& detail = {}) {
    throw ToolDefinitionError(ErrorCode::unsupported_schema_keyword,
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
            if (property_names && is_prototype_sensitive_key(it.key())) {
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
            if (is_prototype_sensitive_key(text)) {
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

}  // namespace

// Checks `schema` and returns its compiled patterns.
PatternMap check_schema(const json& schema, bool object_root) {
    check_schema_json_safe(schema);
    PatternMap patterns;
    SchemaChecker(schema, object_root, patterns).run();
    return patterns;
}

}  // namespace ullm::detail::validation
