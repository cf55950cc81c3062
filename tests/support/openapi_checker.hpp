#pragma once

// A small JSON-schema checker over the official OpenAI OpenAPI document in the fixtures
// (specs/openapi.json), shared by the tests that validate request bodies we build.

#include <ullm/core/json.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "support/fixtures.hpp"

namespace ullm::test {

namespace fs = std::filesystem;
using ullm::json;

// ---------------------------------------------------------------------------------------
// A small JSON-schema checker over the OpenAPI document: $ref, allOf, anyOf, oneOf (as anyOf:
// the spec's unions overlap, e.g. a user message is both an EasyInputMessage and an
// InputMessage), type, enum, const, required, properties, additionalProperties, items,
// lengths, patterns and bounds. Objects are closed: a key that no applicable `properties`
// names is an error unless the schema allows additional properties, so misspelt or invented
// fields are caught.
class SpecChecker {
public:
    explicit SpecChecker(const fs::path& path) : spec_(json::parse(ullm::test::read_file(path))) {}

    const json& schema(const std::string& name) const {
        return spec_.at("components").at("schemas").at(name);
    }

    // Empty when `value` matches components/schemas/`name`; else why not.
    std::string check(const json& value, const std::string& name) const {
        std::string why;
        return matches(value, schema(name), "", why, true) ? std::string() : why;
    }

    // The property names `schema` declares, through $ref and allOf.
    std::set<std::string> properties(const json& schema_in) const {
        const json& s = resolve(schema_in);
        std::set<std::string> out;
        if (!s.is_object()) return out;
        if (const auto all = s.find("allOf"); all != s.end()) {
            for (const auto& sub : *all) {
                const auto more = properties(sub);
                out.insert(more.begin(), more.end());
            }
        }
        if (const auto props = s.find("properties"); props != s.end()) {
            for (const auto& item : props->items()) out.insert(item.key());
        }
        return out;
    }

    // Every `type` constant reachable through the unions of `schema_in`.
    void union_types(const json& schema_in, std::set<std::string>& out, int depth = 0) const {
        const json& s = resolve(schema_in);
        if (!s.is_object() || depth > 8) return;
        for (const char* key : {"oneOf", "anyOf"}) {
            if (const auto alternatives = s.find(key); alternatives != s.end()) {
                for (const auto& alternative : *alternatives) {
                    union_types(alternative, out, depth + 1);
                }
            }
        }
        if (const auto props = s.find("properties"); props != s.end() && props->contains("type")) {
            const json& type = resolve((*props)["type"]);
            std::vector<const json*> candidates{&type};
            if (type.contains("anyOf")) {
                for (const auto& alternative : type["anyOf"]) candidates.push_back(&alternative);
            }
            for (const json* candidate : candidates) {
                if (candidate->contains("enum")) {
                    for (const auto& value : (*candidate)["enum"]) {
                        if (value.is_string()) out.insert(value.get<std::string>());
                    }
                }
            }
        }
    }

private:
    const json& resolve(const json& schema_in) const {
        const json* s = &schema_in;
        while (s->is_object() && s->contains("$ref")) {
            const std::string ref = (*s)["$ref"].get<std::string>();
            s = &spec_.at(json::json_pointer(ref.substr(1)));
        }
        return *s;
    }

    static bool type_matches(const json& value, const std::string& type) {
        if (type == "object") return value.is_object();
        if (type == "array") return value.is_array();
        if (type == "string") return value.is_string();
        if (type == "integer") return value.is_number_integer();
        if (type == "number") return value.is_number();
        if (type == "boolean") return value.is_boolean();
        if (type == "null") return value.is_null();
        return false;
    }

    // `closed`: unknown keys are errors here. The branches of an allOf are checked open, and
    // the keys against the properties of all branches together.
    bool matches(const json& value, const json& schema_in, const std::string& path,
                 std::string& why, bool closed) const {
        const json& s = resolve(schema_in);
        if (s.is_boolean()) return s.get<bool>();
        if (!s.is_object()) return true;
        const auto fail = [&](const std::string& reason) {
            why = (path.empty() ? std::string("/") : path) + ": " + reason;
            return false;
        };
        if (const auto type = s.find("type"); type != s.end()) {
            bool ok = false;
            if (type->is_string()) ok = type_matches(value, type->get<std::string>());
            if (type->is_array()) {
                for (const auto& t : *type) ok = ok || type_matches(value, t.get<std::string>());
            }
            if (!ok) return fail("expected type " + type->dump());
        }
        if (const auto values = s.find("enum"); values != s.end()) {
            if (std::find(values->begin(), values->end(), value) == values->end()) {
                return fail("not one of " + values->dump());
            }
        }
        if (const auto constant = s.find("const"); constant != s.end() && *constant != value) {
            return fail("not " + constant->dump());
        }
        if (const auto all = s.find("allOf"); all != s.end()) {
            for (const auto& sub : *all) {
                if (!matches(value, sub, path, why, false)) return false;
            }
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (const auto alternatives = s.find(key); alternatives != s.end()) {
                bool any = false;
                std::string reasons;
                for (const auto& alternative : *alternatives) {
                    std::string sub_why;
                    if (matches(value, alternative, path, sub_why, closed)) {
                        any = true;
                        break;
                    }
                    reasons += "\n    " + sub_why;
                }
                if (!any)
                    return fail(std::string("no alternative of ") + key + " matches:" + reasons);
            }
        }
        if (value.is_object()) {
            if (const auto required = s.find("required"); required != s.end()) {
                for (const auto& key : *required) {
                    if (!value.contains(key.get<std::string>())) {
                        return fail("missing required " + key.get<std::string>());
                    }
                }
            }
            const auto props = s.find("properties");
            if (props != s.end()) {
                for (const auto& item : value.items()) {
                    if (const auto sub = props->find(item.key()); sub != props->end()) {
                        if (!matches(item.value(), *sub, path + "/" + item.key(), why, true))
                            return false;
                    }
                }
            }
            const auto additional = s.find("additionalProperties");
            const bool composed = s.contains("allOf");
            if (closed && (props != s.end() || composed)) {
                const auto known = properties(s);
                for (const auto& item : value.items()) {
                    if (known.count(item.key()) != 0) continue;
                    if (additional == s.end() || additional->is_boolean()) {
                        if (additional == s.end() || !additional->get<bool>()) {
                            return fail("unknown property " + item.key());
                        }
                    } else if (!matches(item.value(), *additional, path + "/" + item.key(), why,
                                        true)) {
                        return false;
                    }
                }
            }
        }
        if (value.is_array()) {
            if (const auto items = s.find("items"); items != s.end()) {
                for (std::size_t i = 0; i < value.size(); ++i) {
                    if (!matches(value[i], *items, path + "/" + std::to_string(i), why, true))
                        return false;
                }
            }
        }
        if (value.is_string()) {
            const auto size = value.get_ref<const std::string&>().size();
            if (s.contains("maxLength") && size > s["maxLength"].get<std::size_t>()) {
                return fail("longer than maxLength");
            }
            if (s.contains("minLength") && size < s["minLength"].get<std::size_t>()) {
                return fail("shorter than minLength");
            }
            if (s.contains("pattern") &&
                !std::regex_search(value.get<std::string>(),
                                   std::regex(s["pattern"].get<std::string>()))) {
                return fail("does not match " + s["pattern"].dump());
            }
        }
        if (value.is_number()) {
            const double number = value.get<double>();
            if (s.contains("minimum") && number < s["minimum"].get<double>()) {
                return fail("below minimum " + s["minimum"].dump());
            }
            if (s.contains("maximum") && number > s["maximum"].get<double>()) {
                return fail("above maximum " + s["maximum"].dump());
            }
        }
        return true;
    }

    json spec_;
};

/// The OpenAI OpenAPI document, parsed once.
inline const SpecChecker& spec() {
    static const SpecChecker checker(ullm::test::fixtures_dir() / "specs" / "openapi.json");
    return checker;
}

}  // namespace ullm::test
