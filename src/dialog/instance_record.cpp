#include "instance_record.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include <set>
#include <utility>

namespace ullm::detail {

namespace {

constexpr const char* record_format = "ullm.dialog_instance";
constexpr int record_format_version = 1;
// Bounds on what one record may list, so that a hostile record cannot exhaust memory.
constexpr std::size_t max_listed = 10'000;

[[noreturn]] void refuse(const std::string& path, const std::string& constraint) {
    throw InvalidConversationSnapshotError(path, constraint);
}

// `value` is an object with exactly the keys `required`, plus those of `optional` it has.
void check_keys(const json& value, const std::string& path, const std::set<std::string>& required,
                const std::set<std::string>& optional = {}) {
    if (!value.is_object()) refuse(path, "must be an object");
    for (const auto& key : required) {
        if (!value.contains(key)) refuse(pointer_append(path, key), "is missing");
    }
    for (const auto& [key, item] : value.items()) {
        if (required.count(key) == 0 && optional.count(key) == 0) {
            refuse(pointer_append(path, key), "is not a key of a dialog instance record");
        }
    }
}

CellLink link_at(const json& value, const std::string& path) {
    if (!value.is_string()) refuse(path, "must be a link string, /of:<id>/<pointer>");
    try {
        return parse_link(value);
    } catch (const Error& error) {
        refuse(path, "is not a cell link: " + error.message());
    }
}

const json& list_at(const json& value, const std::string& key) {
    const json& list = value.at(key);
    if (!list.is_array()) refuse("/" + key, "must be an array");
    if (list.size() > max_listed) {
        refuse("/" + key, "lists more than " + std::to_string(max_listed) + " entries");
    }
    return list;
}

}  // namespace

json instance_record_to_json(json conversation, const DialogInstanceRecord& record) {
    json pins = json::array();
    for (const auto& pin : record.state.pins) {
        pins.push_back({{"name", pin.name}, {"link", pin.link.to_string()}});
    }
    json patterns = json::array();
    for (const auto& instance : record.state.pattern_instances) {
        patterns.push_back({{"pattern", instance.pattern.to_string()},
                            {"argument", instance.argument.to_string()},
                            {"result", instance.result.to_string()}});
    }
    json out = {{"format", record_format},
                {"format_version", record_format_version},
                {"conversation", std::move(conversation)},
                {"pins", std::move(pins)},
                {"pattern_instances", std::move(patterns)},
                {"turn_id", record.turn_id}};
    if (record.result) out["result"] = *record.result;
    return out;
}

DialogInstanceRecord parse_instance_part(const json& value) {
    check_keys(value, "",
               {"format", "format_version", "conversation", "pins", "pattern_instances", "turn_id"},
               {"result"});
    if (value["format"] != record_format) {
        refuse("/format", std::string("must be \"") + record_format + "\"");
    }
    if (value["format_version"] != record_format_version) {
        refuse("/format_version", "must be " + std::to_string(record_format_version) +
                                      " (a record from another version of ullm)");
    }
    DialogInstanceRecord record;
    const json& pins = list_at(value, "pins");
    for (std::size_t i = 0; i < pins.size(); ++i) {
        const std::string path = pointer_append("/pins", i);
        check_keys(pins[i], path, {"name", "link"});
        const json& name = pins[i]["name"];
        if (!name.is_string()) refuse(path + "/name", "must be a string");
        record.state.pins.push_back({name, link_at(pins[i]["link"], path + "/link")});
    }
    const json& patterns = list_at(value, "pattern_instances");
    for (std::size_t i = 0; i < patterns.size(); ++i) {
        const std::string path = pointer_append("/pattern_instances", i);
        check_keys(patterns[i], path, {"pattern", "argument", "result"});
        record.state.pattern_instances.push_back(
            {link_at(patterns[i]["pattern"], path + "/pattern"),
             link_at(patterns[i]["argument"], path + "/argument"),
             link_at(patterns[i]["result"], path + "/result")});
    }
    if (!value["turn_id"].is_number_unsigned()) {
        refuse("/turn_id", "must be an integer of at least 0");
    }
    record.turn_id = value["turn_id"].get<std::uint64_t>();
    if (value.contains("result")) {
        if (const auto violation = check_json_rules(value["result"], "/result", {}, 1);
            !violation.constraint.empty()) {
            refuse(violation.path, violation.constraint);
        }
        record.result = value["result"];
    }
    return record;
}

}  // namespace ullm::detail
