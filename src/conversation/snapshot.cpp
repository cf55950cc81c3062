#include <ullm/conversation/snapshot.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/store/session_store.hpp>

#include "snapshot_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "../core/arithmetic.hpp"
#include "../core/fast_json.hpp"
#include "tool_sequence.hpp"

namespace ullm {

namespace {

using detail::pointer_append;
using WallClock = std::chrono::system_clock;

constexpr std::string_view snapshot_format = "ullm.conversation";

[[noreturn]] void fail(std::string path, std::string constraint) {
    throw InvalidConversationSnapshotError(std::move(path), std::move(constraint));
}

// A total plus `amount`, saturating; negative amounts are not usage and add nothing.
std::int64_t add_count(std::int64_t total, std::int64_t amount) noexcept {
    return detail::saturating_add(total, std::max<std::int64_t>(amount, 0));
}

const json& required(const json& object, const char* key, const std::string& path) {
    const auto it = object.find(key);
    if (it == object.end()) fail(path, "is required");
    return *it;
}

void only_keys(const json& object, const std::string& path,
               std::initializer_list<std::string_view> allowed, const char* where) {
    for (auto it = object.begin(); it != object.end(); ++it) {
        if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
            fail(pointer_append(path, it.key()), std::string("is not a field of ") + where);
        }
    }
}

// --- Keys --------------------------------------------------------------------------------------

// Whether `text` holds a control character: C0, DEL or C1 (U+0080..U+009F, which UTF-8 writes
// as C2 80..C2 9F). `text` is valid UTF-8.
std::string parse_key(const json& root, const char* name) {
    const std::string path = pointer_append("", name);
    const json& value = required(root, name, path);
    if (!value.is_string()) fail(path, "must be a string");
    return value.get<std::string>();
}

// The store's key rules, reported at the field that breaks them.
void check_keys(const std::string& tenant, const std::string& session_id) {
    try {
        validate_session_key(tenant, session_id);
    } catch (const InvalidOptionError& error) {
        fail(error.error_code() == ErrorCode::invalid_tenant ? "/tenant" : "/session_id",
             error.message());
    }
}

// --- Timestamps --------------------------------------------------------------------------------

constexpr const char* timestamp_form =
    "must be an RFC 3339 timestamp such as 2026-11-29T22:58:25.123Z (upper-case T and Z, or an "
    "offset like +02:00; fractional seconds optional)";

class TimestampReader {
public:
    TimestampReader(std::string_view text, std::string path)
        : text_(text), path_(std::move(path)) {}

    int digits(std::size_t count) {
        int value = 0;
        for (std::size_t i = 0; i < count; ++i) {
            if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
                fail(path_, timestamp_form);
            }
            value = value * 10 + (text_[pos_++] - '0');
        }
        return value;
    }

    void expect(char c) {
        if (pos_ >= text_.size() || text_[pos_] != c) fail(path_, timestamp_form);
        ++pos_;
    }

    bool accept(char c) {
        if (pos_ >= text_.size() || text_[pos_] != c) return false;
        ++pos_;
        return true;
    }

    [[nodiscard]] bool done() const { return pos_ == text_.size(); }

    // Up to nine fractional digits, as nanoseconds.
    std::int64_t fraction() {
        std::int64_t nanos = 0;
        std::size_t count = 0;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            if (++count > 9) fail(path_, "has more than 9 fractional second digits");
            nanos = nanos * 10 + (text_[pos_++] - '0');
        }
        if (count == 0) fail(path_, timestamp_form);
        for (; count < 9; ++count) nanos *= 10;
        return nanos;
    }

private:
    std::string_view text_;
    std::string path_;
    std::size_t pos_ = 0;
};

WallClock::time_point parse_timestamp(const json& root, const char* name) {
    namespace chrono = std::chrono;
    const std::string path = pointer_append("", name);
    const json& value = required(root, name, path);
    if (!value.is_string()) fail(path, timestamp_form);
    TimestampReader reader(value.get_ref<const std::string&>(), path);

    const int year = reader.digits(4);
    reader.expect('-');
    const int month = reader.digits(2);
    reader.expect('-');
    const int day = reader.digits(2);
    reader.expect('T');
    const int hour = reader.digits(2);
    reader.expect(':');
    const int minute = reader.digits(2);
    reader.expect(':');
    const int second = reader.digits(2);
    const std::int64_t nanos = reader.accept('.') ? reader.fraction() : 0;
    int offset_minutes = 0;
    if (!reader.accept('Z')) {
        int sign = 0;
        if (reader.accept('+')) {
            sign = 1;
        } else if (reader.accept('-')) {
            sign = -1;
        } else {
            fail(path, timestamp_form);
        }
        const int offset_hour = reader.digits(2);
        reader.expect(':');
        const int offset_minute = reader.digits(2);
        if (offset_hour > 23 || offset_minute > 59) {
            fail(path, "has an impossible UTC offset (hours 00..23, minutes 00..59)");
        }
        offset_minutes = sign * (offset_hour * 60 + offset_minute);
    }
    if (!reader.done()) fail(path, timestamp_form);

    if (month < 1 || month > 12) {
        fail(path, "has month " + std::to_string(month) + ", which does not exist (01..12)");
    }
    const chrono::year_month_day date{chrono::year{year},
                                      chrono::month{static_cast<unsigned>(month)},
                                      chrono::day{static_cast<unsigned>(day)}};
    if (!date.ok()) {
        fail(path,
             fmt::format("has day {:02}, which does not exist in {:04}-{:02}", day, year, month));
    }
    if (hour > 23) fail(path, "has hour " + std::to_string(hour) + " (00..23)");
    if (minute > 59) fail(path, "has minute " + std::to_string(minute) + " (00..59)");
    if (second == 60) fail(path, "is a leap second (:60), which ullm cannot represent");
    if (second > 59) fail(path, "has second " + std::to_string(second) + " (00..59)");

    const std::int64_t seconds =
        static_cast<std::int64_t>(chrono::sys_days{date}.time_since_epoch().count()) * 86'400 +
        std::int64_t{hour} * 3'600 + std::int64_t{minute} * 60 + second -
        std::int64_t{offset_minutes} * 60;
    // Keep a second of headroom on each side for the fraction.
    const auto limit = chrono::duration_cast<chrono::seconds>(WallClock::duration::max()).count();
    if (seconds >= limit || seconds <= -limit) {
        fail(path, "is outside the range of times this platform's clock can represent");
    }
    return WallClock::time_point(
        chrono::duration_cast<WallClock::duration>(chrono::seconds(seconds)) +
        chrono::duration_cast<WallClock::duration>(chrono::nanoseconds(nanos)));
}

// --- Totals ------------------------------------------------------------------------------------

std::int64_t parse_count(const json& totals, const char* key) {
    const std::string path = pointer_append("/totals", key);
    const json& value = required(totals, key, path);
    if (value.is_number_unsigned()) {
        const auto count = value.get<std::uint64_t>();
        if (count > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            fail(path, "is too large (at most 2^63-1)");
        }
        return static_cast<std::int64_t>(count);
    }
    if (value.is_number_integer()) {
        const auto count = value.get<std::int64_t>();
        if (count < 0) fail(path, "must be a non-negative integer, not negative");
        return count;
    }
    if (value.is_number_float()) {
        fail(path, "must be a non-negative integer, not a fractional number");
    }
    fail(path, std::string("must be a non-negative integer, not ") + value.type_name());
}

ConversationTotals parse_totals(const json& root) {
    const json& totals = required(root, "totals", "/totals");
    if (!totals.is_object()) fail("/totals", "must be a JSON object");
    only_keys(totals, "/totals",
              {"input_tokens", "output_tokens", "reasoning_tokens", "cached_read_tokens",
               "cached_write_tokens", "cost_usd", "rounds"},
              "the totals");
    ConversationTotals out;
    out.input_tokens = parse_count(totals, "input_tokens");
    out.output_tokens = parse_count(totals, "output_tokens");
    out.reasoning_tokens = parse_count(totals, "reasoning_tokens");
    out.cached_read_tokens = parse_count(totals, "cached_read_tokens");
    out.cached_write_tokens = parse_count(totals, "cached_write_tokens");
    out.rounds = parse_count(totals, "rounds");
    const json& cost = required(totals, "cost_usd", "/totals/cost_usd");
    if (!cost.is_number() || !std::isfinite(cost.get<double>()) || cost.get<double>() < 0) {
        fail("/totals/cost_usd", "must be a finite non-negative number");
    }
    out.cost_usd = cost.get<double>();

    if (out.reasoning_tokens > out.output_tokens) {
        fail("/totals/reasoning_tokens",
             "must not exceed output_tokens (reasoning tokens are part of the output)");
    }
    if (out.cached_read_tokens > out.input_tokens) {
        fail("/totals/cached_read_tokens",
             "must not exceed input_tokens (cached tokens are part of the input)");
    }
    return out;
}

// --- Messages ----------------------------------------------------------------------------------

// The stored messages, an array within `limits.max_messages`.
const json& stored_messages(const json& root, const SnapshotLimits& limits) {
    const json& messages = required(root, "messages", "/messages");
    if (!messages.is_array()) fail("/messages", "must be an array");
    if (messages.size() > limits.max_messages) {
        fail("/messages", "holds " + std::to_string(messages.size()) + " messages; at most " +
                              std::to_string(limits.max_messages) + " are allowed");
    }
    return messages;
}

// Stored message `index`, `element`.
Message parse_stored_message(const json& element, std::size_t index, const SnapshotLimits& limits) {
    const std::string path = pointer_append("/messages", index);
    Message message;
    try {
        message = parse_message(element, path);
    } catch (const InvalidMessageError& error) {
        fail(error.path(), error.constraint());
    }
    if (message.role == Role::system) {
        fail(path + "/role",
             "must not be system: the system prompt is not part of the stored history");
    }
    if (const auto replay = element.find("replay"); replay != element.end()) {
        const std::size_t size = replay->dump().size();
        if (size > limits.max_replay_bytes) {
            fail(path + "/replay", "is " + std::to_string(size) + " bytes; at most " +
                                       std::to_string(limits.max_replay_bytes) + " are allowed");
        }
    }
    return message;
}

// Every call answered in order, every result answering a call, across the whole history.
void check_stored_sequence(const std::vector<Message>& messages) {
    if (const auto violation = detail::check_tool_sequence(messages)) {
        fail(pointer_append("/messages", violation->message) + violation->pointer, violation->rule);
    }
}

std::vector<Message> parse_history(const json& root, const SnapshotLimits& limits) {
    const json& messages = stored_messages(root, limits);
    std::vector<Message> out;
    out.reserve(messages.size());
    for (std::size_t index = 0; index < messages.size(); ++index) {
        out.push_back(parse_stored_message(messages[index], index, limits));
    }
    check_stored_sequence(out);
    return out;
}

// --- Text --------------------------------------------------------------------------------------

// Follows the parser's events to refuse duplicate keys and over-deep nesting while the text is
// parsed, naming the JSON pointer of the offending value.
class StructureGuard {
public:
    bool operator()(int depth, json::parse_event_t event, json& parsed) {
        switch (event) {
            case json::parse_event_t::object_start:
            case json::parse_event_t::array_start:
                if (static_cast<std::size_t>(depth) >= detail::max_json_depth) {
                    fail(current_path(),
                         "nests deeper than " + std::to_string(detail::max_json_depth) + " levels");
                }
                frames_.push_back({event == json::parse_event_t::object_start, {}, 0, {}});
                break;
            case json::parse_event_t::key: {
                Frame& frame = frames_.back();
                frame.key = parsed.get<std::string>();
                if (!frame.keys.insert(frame.key).second)
                    fail(current_path(), "is a duplicate key");
                break;
            }
            case json::parse_event_t::object_end:
            case json::parse_event_t::array_end:
                frames_.pop_back();
                advance();
                break;
            case json::parse_event_t::value:
                advance();
                break;
        }
        return true;
    }

private:
    struct Frame {
        bool object;
        std::string key;
        std::size_t index;
        std::set<std::string> keys;
    };

    void advance() {
        if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    }

    [[nodiscard]] std::string current_path() const {
        std::string path;
        for (const auto& frame : frames_) {
            path =
                frame.object ? pointer_append(path, frame.key) : pointer_append(path, frame.index);
        }
        return path;
    }

    std::vector<Frame> frames_;
};

// The parser's reason without the text it last read (which may quote conversation content).
std::string parse_reason(const std::string& what) {
    const auto start = what.find(" - ");
    if (start == std::string::npos) return "malformed JSON";
    const auto end = what.find("; last read", start);
    return what.substr(start + 3, end == std::string::npos ? std::string::npos : end - start - 3);
}

}  // namespace

ConversationTotals& ConversationTotals::operator+=(const Usage& usage) noexcept {
    add_tokens(usage);
    rounds = add_count(rounds, 1);
    return *this;
}

void ConversationTotals::add_tokens(const Usage& usage) noexcept {
    input_tokens = add_count(input_tokens, usage.input_tokens);
    output_tokens = add_count(output_tokens, usage.output_tokens);
    reasoning_tokens = add_count(reasoning_tokens, usage.reasoning_tokens);
    cached_read_tokens = add_count(cached_read_tokens, usage.cached_read_tokens);
    cached_write_tokens = add_count(cached_write_tokens, usage.cached_write_tokens);
    if (usage.cost_usd && std::isfinite(*usage.cost_usd) && *usage.cost_usd > 0) {
        cost_usd += *usage.cost_usd;
        if (!std::isfinite(cost_usd)) cost_usd = std::numeric_limits<double>::max();
    }
}

ConversationTotals& ConversationTotals::operator+=(const ConversationTotals& other) noexcept {
    input_tokens = add_count(input_tokens, other.input_tokens);
    output_tokens = add_count(output_tokens, other.output_tokens);
    reasoning_tokens = add_count(reasoning_tokens, other.reasoning_tokens);
    cached_read_tokens = add_count(cached_read_tokens, other.cached_read_tokens);
    cached_write_tokens = add_count(cached_write_tokens, other.cached_write_tokens);
    cost_usd += other.cost_usd;
    if (!std::isfinite(cost_usd)) cost_usd = std::numeric_limits<double>::max();
    rounds = add_count(rounds, other.rounds);
    return *this;
}

json totals_to_json(const ConversationTotals& totals) {
    return {{"input_tokens", totals.input_tokens},
            {"output_tokens", totals.output_tokens},
            {"reasoning_tokens", totals.reasoning_tokens},
            {"cached_read_tokens", totals.cached_read_tokens},
            {"cached_write_tokens", totals.cached_write_tokens},
            {"cost_usd", totals.cost_usd},
            {"rounds", totals.rounds}};
}

std::string format_timestamp(std::chrono::system_clock::time_point time) {
    namespace chrono = std::chrono;
    const auto millis = chrono::floor<chrono::milliseconds>(time);
    const auto day = chrono::floor<chrono::days>(millis);
    const chrono::year_month_day date{day};
    const chrono::hh_mm_ss clock{millis - day};
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(date.year()),
                       static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                       clock.hours().count(), clock.minutes().count(), clock.seconds().count(),
                       clock.subseconds().count());
}

json snapshot_to_json(const ConversationSnapshot& snapshot) {
    json messages = json::array();
    for (const auto& message : snapshot.messages) {
        messages.push_back(message_to_json(message, /*include_replay=*/true));
    }
    return {{"format", std::string(snapshot_format)},
            {"version", ConversationSnapshot::format_version},
            {"session_id", snapshot.session_id},
            {"tenant", snapshot.tenant},
            {"created_at", format_timestamp(snapshot.created_at)},
            {"updated_at", format_timestamp(snapshot.updated_at)},
            {"totals", totals_to_json(snapshot.totals)},
            {"messages", std::move(messages)}};
}

ConversationSnapshot parse_snapshot(const json& value, const SnapshotLimits& limits) {
    if (!value.is_object()) fail("", "a snapshot must be a JSON object");
    // Depth, finite numbers, UTF-8 and unsafe keys first, over the whole document, so that no
    // later step walks a hostile structure.
    if (auto violation = detail::check_json_rules(value, ""); !violation.constraint.empty()) {
        fail(std::move(violation.path), std::move(violation.constraint));
    }

    const json& format = required(value, "format", "/format");
    if (!format.is_string() || format.get_ref<const std::string&>() != snapshot_format) {
        fail("/format", "must be \"ullm.conversation\"");
    }
    // The version before unknown keys: a newer format may add fields, and "unsupported
    // version" is the useful message then.
    const json& version = required(value, "version", "/version");
    constexpr int current = ConversationSnapshot::format_version;
    const bool newer = version.is_number_unsigned()
                           ? version.get<std::uint64_t>() > static_cast<std::uint64_t>(current)
                           : version.is_number_integer() && version.get<std::int64_t>() > current;
    if (newer) {
        fail("/version", "unsupported snapshot version " + version.dump() +
                             " (this build reads version " + std::to_string(current) + ")");
    }
    if (!version.is_number_integer() ||
        version.get<std::int64_t>() != ConversationSnapshot::format_version) {
        fail("/version",
             "must be the integer " + std::to_string(ConversationSnapshot::format_version));
    }
    only_keys(value, "",
              {"format", "version", "session_id", "tenant", "created_at", "updated_at", "totals",
               "messages"},
              "a snapshot");

    ConversationSnapshot snapshot;
    snapshot.session_id = parse_key(value, "session_id");
    snapshot.tenant = parse_key(value, "tenant");
    check_keys(snapshot.tenant, snapshot.session_id);
    snapshot.created_at = parse_timestamp(value, "created_at");
    snapshot.updated_at = parse_timestamp(value, "updated_at");
    if (snapshot.created_at > snapshot.updated_at) fail("/created_at", "is later than updated_at");
    snapshot.totals = parse_totals(value);
    snapshot.messages = parse_history(value, limits);
    return snapshot;
}

namespace detail {

json parse_stored_json(std::string_view text, const SnapshotLimits& limits) {
    if (text.size() > limits.max_bytes) {
        fail("", "is " + std::to_string(text.size()) + " bytes; at most " +
                     std::to_string(limits.max_bytes) + " are allowed");
    }
    // nlohmann's parser ends the text at a NUL byte and would ignore what follows it.
    if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
        fail("", "is not valid JSON: a NUL byte at byte offset " + std::to_string(nul));
    }
    // Well-formed text, the usual case, is read by the fast reader; what it declines (a syntax
    // error, a duplicate key, nesting too deep, a number it leaves to nlohmann) is read again by
    // nlohmann's parser, which names the problem and where it is.
    if (auto fast = detail::parse_json_fast_strict(text, detail::max_json_depth)) {
        return std::move(*fast);
    }
    json value;
    try {
        StructureGuard guard;
        value = json::parse(
            text,
            [&guard](int depth, json::parse_event_t event, json& parsed) {
                return guard(depth, event, parsed);
            },
            /*allow_exceptions=*/true, /*ignore_comments=*/false);
    } catch (const json::parse_error& error) {
        const std::size_t offset = error.byte > 0 ? error.byte - 1 : 0;
        fail("", "is not valid JSON: " + parse_reason(error.what()) + " (at byte offset " +
                     std::to_string(offset) + ")");
    } catch (const json::out_of_range&) {
        fail("", "is not valid JSON: a number is too large to represent");
    } catch (const json::exception& error) {
        fail("", "is not valid JSON: " + parse_reason(error.what()));
    }
    return value;
}

}  // namespace detail

void detail::check_snapshot_write(const json& value, const std::vector<Message>& messages,
                                  std::size_t checked, std::size_t bytes,
                                  const SnapshotLimits& limits) {
    if (bytes > limits.max_bytes) {
        fail("", "is " + std::to_string(bytes) + " bytes; at most " +
                     std::to_string(limits.max_bytes) + " are allowed");
    }
    const json& stored = stored_messages(value, limits);
    if (stored.size() != messages.size() || checked > messages.size()) {
        fail("/messages", "does not hold the messages being written");
    }
    // In the order a load checks them: the JSON rules of the whole document (messages before
    // totals), then the fields, then each message.
    for (std::size_t index = checked; index < stored.size(); ++index) {
        if (auto violation =
                detail::check_json_rules(stored[index], pointer_append("/messages", index), {}, 2);
            !violation.constraint.empty()) {
            fail(std::move(violation.path), std::move(violation.constraint));
        }
    }
    if (auto violation = detail::check_json_rules(value.at("totals"), "/totals", {}, 1);
        !violation.constraint.empty()) {
        fail(std::move(violation.path), std::move(violation.constraint));
    }
    const std::string session_id = parse_key(value, "session_id");
    check_keys(parse_key(value, "tenant"), session_id);
    const auto created_at = parse_timestamp(value, "created_at");
    if (created_at > parse_timestamp(value, "updated_at")) {
        fail("/created_at", "is later than updated_at");
    }
    (void)parse_totals(value);
    for (std::size_t index = checked; index < stored.size(); ++index) {
        (void)parse_stored_message(stored[index], index, limits);
    }
    check_stored_sequence(messages);
}

ConversationSnapshot parse_snapshot_text(std::string_view text, const SnapshotLimits& limits) {
    return parse_snapshot(detail::parse_stored_json(text, limits), limits);
}

}  // namespace ullm
