#include <ullm/store/usage_ledger.hpp>

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/detail/json_checks.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <ostream>
#include <string>
#include <string_view>

namespace ullm {

namespace {
namespace ledger_rules {

constexpr std::size_t max_id_bytes = 256;
constexpr std::size_t max_text_bytes = 1024;
constexpr std::size_t max_model_bytes = 10240;

[[noreturn]] void bad_record(const std::string& why) {
    throw InvalidOptionError(ErrorCode::invalid_usage_record, "usage record: " + why);
}

void check_text(std::string_view field, std::string_view value, std::size_t limit) {
    if (value.size() > limit) {
        bad_record(std::string(field) + " is " + std::to_string(value.size()) +
                   " bytes, over the limit of " + std::to_string(limit));
    }
    if (!detail::is_valid_utf8(value)) bad_record(std::string(field) + " is not valid UTF-8");
}

// ISO 8601 UTC with milliseconds, e.g. 2026-12-04T16:05:02.123Z.
std::string iso_ms(std::chrono::system_clock::time_point time) {
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(time.time_since_epoch()).count();
    const auto seconds = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    const auto millis = static_cast<int>(ms - static_cast<std::int64_t>(seconds) * 1000);
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    std::array<char, 40> text{};
    const auto length = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &parts);
    std::array<char, 8> fraction{};
    std::snprintf(fraction.data(), fraction.size(), ".%03dZ", millis);
    return std::string(text.data(), length) + fraction.data();
}

// One CSV field, quoted per RFC 4180: inside quotes, a quote is written twice; everything else
// (commas, line breaks, NUL) is kept as it is.
void csv_text(std::ostream& out, std::string_view value) {
    out << '"';
    for (const char c : value) {
        if (c == '"') out << '"';
        out << c;
    }
    out << '"';
}

std::string cost_text(const std::optional<double>& cost) {
    if (!cost) return {};
    return json(*cost).dump();
}

}  // namespace ledger_rules
}  // namespace

using ledger_rules::bad_record;
using ledger_rules::check_text;
using ledger_rules::cost_text;
using ledger_rules::csv_text;
using ledger_rules::iso_ms;
using ledger_rules::max_id_bytes;
using ledger_rules::max_model_bytes;
using ledger_rules::max_text_bytes;

void validate_usage_query(const UsageQuery& query) {
    if (query.since && query.until && *query.until < *query.since) {
        throw InvalidOptionError(ErrorCode::invalid_usage_query,
                                 "usage query: until (" + iso_ms(*query.until) +
                                     ") is before since (" + iso_ms(*query.since) + ")");
    }
    bool period = false;
    for (std::size_t i = 0; i < query.group_by.size(); ++i) {
        const UsageGroup group = query.group_by[i];
        if (std::find(query.group_by.begin(), query.group_by.begin() + static_cast<long>(i),
                      group) != query.group_by.begin() + static_cast<long>(i)) {
            throw InvalidOptionError(
                ErrorCode::invalid_usage_query,
                std::string("usage query: the group key ") + to_string(group) + " is given twice");
        }
        if (group == UsageGroup::hour || group == UsageGroup::day) {
            if (period) {
                throw InvalidOptionError(ErrorCode::invalid_usage_query,
                                         "usage query: group by hour or by day, not both");
            }
            period = true;
        }
    }
}

void validate_usage_record(const UsageRecord& record) {
    if (record.id.empty()) bad_record("the id is empty");
    check_text("the id", record.id, max_id_bytes);
    check_text("the tenant", record.tenant, max_text_bytes);
    check_text("the session id", record.session_id, max_text_bytes);
    check_text("the provider", record.provider, max_text_bytes);
    check_text("the model", record.model, max_model_bytes);
    const Usage& usage = record.usage;
    if (usage.input_tokens < 0 || usage.output_tokens < 0 || usage.cached_read_tokens < 0 ||
        usage.cached_write_tokens < 0 || usage.reasoning_tokens < 0) {
        bad_record("a token count is negative");
    }
    if (usage.cost_usd && (!std::isfinite(*usage.cost_usd) || *usage.cost_usd < 0)) {
        bad_record("the cost is negative or not finite");
    }
    if (record.finished_at < record.started_at) bad_record("finished_at is before started_at");
}

UsageRecord normalized_usage_record(UsageRecord record) {
    record.started_at = std::chrono::floor<std::chrono::milliseconds>(record.started_at);
    record.finished_at = std::chrono::floor<std::chrono::milliseconds>(record.finished_at);
    return record;
}

const char* to_string(UsageGroup group) noexcept {
    switch (group) {
        case UsageGroup::tenant:
            return "tenant";
        case UsageGroup::session:
            return "session";
        case UsageGroup::provider:
            return "provider";
        case UsageGroup::model:
            return "model";
        case UsageGroup::hour:
            return "hour";
        case UsageGroup::day:
            return "day";
    }
    return "?";
}

std::optional<UsageGroup> parse_usage_group(std::string_view name) noexcept {
    for (const UsageGroup group : {UsageGroup::tenant, UsageGroup::session, UsageGroup::provider,
                                   UsageGroup::model, UsageGroup::hour, UsageGroup::day}) {
        if (name == to_string(group)) return group;
    }
    return std::nullopt;
}

void UsageLedger::export_jsonl(const UsageQuery& query, std::ostream& out) {
    validate_usage_query(query);
    for_each(query, [&](const UsageRecord& record) {
        // In the documented order, which readers of the lines may rely on.
        const ordered_json line = {
            {"id", record.id},
            {"tenant", record.tenant},
            {"session_id", record.session_id},
            {"provider", record.provider},
            {"model", record.model},
            {"input_tokens", record.usage.input_tokens},
            {"output_tokens", record.usage.output_tokens},
            {"cached_read_tokens", record.usage.cached_read_tokens},
            {"cached_write_tokens", record.usage.cached_write_tokens},
            {"reasoning_tokens", record.usage.reasoning_tokens},
            {"cost_usd",
             record.usage.cost_usd ? ordered_json(*record.usage.cost_usd) : ordered_json(nullptr)},
            {"started_at", iso_ms(record.started_at)},
            {"finished_at", iso_ms(record.finished_at)},
            {"streamed", record.streamed},
        };
        out << line.dump() << '\n';
    });
}

void UsageLedger::export_csv(const UsageQuery& query, std::ostream& out) {
    validate_usage_query(query);  // before the header: an invalid query writes nothing
    out << "id,tenant,session_id,provider,model,input_tokens,output_tokens,cached_read_tokens,"
           "cached_write_tokens,reasoning_tokens,cost_usd,started_at,finished_at,streamed\r\n";
    for_each(query, [&](const UsageRecord& record) {
        csv_text(out, record.id);
        out << ',';
        csv_text(out, record.tenant);
        out << ',';
        csv_text(out, record.session_id);
        out << ',';
        csv_text(out, record.provider);
        out << ',';
        csv_text(out, record.model);
        out << ',' << record.usage.input_tokens << ',' << record.usage.output_tokens << ','
            << record.usage.cached_read_tokens << ',' << record.usage.cached_write_tokens << ','
            << record.usage.reasoning_tokens << ',' << cost_text(record.usage.cost_usd) << ','
            << iso_ms(record.started_at) << ',' << iso_ms(record.finished_at) << ','
            << (record.streamed ? "true" : "false") << "\r\n";
    });
}

}  // namespace ullm
