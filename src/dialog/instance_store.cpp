#include "instance_store.hpp"

#include <ullm/conversation/snapshot.hpp>
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

namespace {

// Everything of a record but its conversation snapshot, checked.
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
        if (const auto violation = check_json_rules(value["result"], "/result");
            !violation.constraint.empty()) {
            refuse(violation.path, violation.constraint);
        }
        record.result = value["result"];
    }
    return record;
}

}  // namespace

std::pair<json, DialogInstanceRecord> parse_instance_record(const json& value) {
    DialogInstanceRecord record = parse_instance_part(value);
    // The conversation's part, checked here so that nothing is applied from a bad record.
    try {
        (void)parse_snapshot(value["conversation"]);
    } catch (const InvalidConversationSnapshotError& error) {
        refuse("/conversation" + error.path(), error.constraint());
    }
    return {value["conversation"], std::move(record)};
}

InstanceStore::InstanceStore(std::shared_ptr<SessionStore> inner,
                             std::function<DialogInstanceRecord()> read,
                             std::function<void(DialogInstanceRecord)> apply)
    : inner_(std::move(inner)), read_(std::move(read)), apply_(std::move(apply)) {}

std::optional<StoredSession> InstanceStore::get(std::string_view tenant,
                                                std::string_view session_id) {
    auto stored = inner_->get(tenant, session_id);
    if (!stored) {
        apply_({});  // The session is gone: the instance starts afresh.
        return std::nullopt;
    }
    json value;
    if (const auto nul = stored->snapshot.find('\0'); nul != std::string::npos) {
        refuse("", "is not JSON: a NUL byte at byte offset " + std::to_string(nul));
    }
    try {
        value = json::parse(stored->snapshot);
    } catch (const json::exception& error) {
        refuse("", std::string("is not JSON: ") + error.what());
    }
    auto [conversation, record] = parse_instance_record(value);
    apply_(std::move(record));
    stored->snapshot = conversation.dump();
    return stored;
}

std::uint64_t InstanceStore::put(std::string_view tenant, std::string_view session_id,
                                 std::string_view snapshot, std::uint64_t expected_version) {
    // The conversation checked its snapshot before handing it over; the rest is checked here,
    // so that nothing a load would refuse is stored.
    const json record = instance_record_to_json(json::parse(snapshot), read_());
    (void)parse_instance_part(record);
    std::string text;
    try {
        text = record.dump();
    } catch (const json::type_error&) {
        refuse("", "holds a string that is not valid UTF-8");
    }
    return inner_->put(tenant, session_id, text, expected_version);
}

bool InstanceStore::remove(std::string_view tenant, std::string_view session_id) {
    return inner_->remove(tenant, session_id);
}

SessionPage InstanceStore::list(std::string_view tenant, const SessionListOptions& options) {
    return inner_->list(tenant, options);
}

}  // namespace ullm::detail
