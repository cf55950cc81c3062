#pragma once

/// `UsageLedger`: who spent which tokens on which model, one record per model request, with
/// aggregation over a time range and raw exports as JSON lines and CSV.

#include <ullm/core/usage.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ullm {

/// One model request as the ledger keeps it. A value type. Strings are any valid UTF-8 (NUL,
/// quotes and `%` included); times are kept to the millisecond.
struct UsageRecord {
    /// The idempotency id (1..256 bytes): a retried write of the same record counts once.
    std::string id;
    std::string tenant;      ///< Who pays; may be empty (0..1024 bytes, as the other strings).
    std::string session_id;  ///< The conversation, or empty for a direct call.
    std::string provider;
    std::string model;
    /// Tokens by kind; `usage.cost_usd` is the cost when it is known (finite, not negative).
    Usage usage;
    std::chrono::system_clock::time_point started_at;   ///< UTC; the time ranges filter on it.
    std::chrono::system_clock::time_point finished_at;  ///< UTC; not before `started_at`.
    bool streamed = false;

    friend bool operator==(const UsageRecord&, const UsageRecord&) = default;
};

/// A key that `UsageLedger::aggregate` can group by. `hour` and `day` are UTC periods of
/// `started_at`.
enum class UsageGroup { tenant, session, provider, model, hour, day };

/// Which records a query reads and how it groups them. A value type.
struct UsageQuery {
    /// Only this tenant's records when set (compared byte for byte); every tenant's otherwise.
    std::optional<std::string> tenant;
    /// The half-open range [since, until) of `started_at`; an unset end is open.
    std::optional<std::chrono::system_clock::time_point> since;
    std::optional<std::chrono::system_clock::time_point> until;
    /// The keys to group by, each at most once, not both `hour` and `day`; empty: one row of
    /// totals (with zero requests when nothing matched).
    std::vector<UsageGroup> group_by;
};

/// One group of an aggregate. The key fields that the query did not group by are empty.
struct UsageRow {
    std::string tenant;
    std::string session_id;
    std::string provider;
    std::string model;
    /// The start of the hour or day, when grouped by one of them.
    std::optional<std::chrono::system_clock::time_point> period;
    std::int64_t requests = 0;
    /// Summed tokens; `cost_usd` is the sum of the known costs, unset when none was known.
    Usage usage;
    /// How many of the requests had no known cost.
    std::int64_t requests_without_cost = 0;
};

/// Throws `InvalidOptionError` `invalid_usage_query` when `until` is before `since`, a key is
/// repeated, or both `hour` and `day` are asked for. Every ledger calls it first.
void validate_usage_query(const UsageQuery& query);

/// Throws `InvalidOptionError` `invalid_usage_record` when the id is empty or longer than 256
/// bytes, a string is longer than 1024 bytes (the model 10240) or not valid UTF-8, a token
/// count is negative, the cost is negative or not finite, or `finished_at` is before
/// `started_at`. Every ledger calls it first.
void validate_usage_record(const UsageRecord& record);

/// The record's times truncated to whole milliseconds, as a ledger keeps them.
[[nodiscard]] UsageRecord normalized_usage_record(UsageRecord record);

/// The name of a group key as the CLI and the docs spell it (`tenant`, `session`, `provider`,
/// `model`, `hour`, `day`); `parse_usage_group` is its inverse (nullopt for another name).
[[nodiscard]] const char* to_string(UsageGroup group) noexcept;
[[nodiscard]] std::optional<UsageGroup> parse_usage_group(std::string_view name) noexcept;

/// Where usage records are kept. Implementations: `SqliteUsageLedger` (embedded) and
/// `PostgresUsageLedger` (the `ullm::postgres` component). Every member of an implementation
/// is thread-safe.
class UsageLedger {
public:
    virtual ~UsageLedger() = default;
    UsageLedger() = default;
    UsageLedger(const UsageLedger&) = delete;
    UsageLedger& operator=(const UsageLedger&) = delete;

    /// Adds `record` (times truncated to milliseconds). Writing a record whose id is already
    /// kept with equal fields does nothing (a retry counts once). Throws `InvalidOptionError`
    /// `invalid_usage_record`, `UsageRecordConflictError` when the id is kept with other
    /// fields (nothing written), and `UsageLedgerError` when the storage fails.
    virtual void record(const UsageRecord& record) = 0;

    /// Adds every record of `records` in one transaction, each as `record` would: all or none
    /// (a conflict or a failure writes nothing). Throws as `record`.
    virtual void record_all(std::span<const UsageRecord> records) = 0;

    /// The totals of the records `query` selects, one row per group, ordered by the group keys
    /// (bytewise, periods by time). Throws `InvalidOptionError` `invalid_usage_query` and
    /// `UsageLedgerError`.
    [[nodiscard]] virtual std::vector<UsageRow> aggregate(const UsageQuery& query) = 0;

    /// Calls `visit` with each record `query` selects (its `group_by` is ignored), in order of
    /// `started_at`, then id. `visit` runs while the ledger is read and must not call the same
    /// ledger object. Throws as `aggregate`, and what `visit` throws.
    virtual void for_each(const UsageQuery& query,
                          const std::function<void(const UsageRecord&)>& visit) = 0;

    /// Writes the selected records to `out` as JSON lines, one object per record with the keys, in
    /// this order, `id`, `tenant`, `session_id`, `provider`, `model`, `input_tokens`,
    /// `output_tokens`, `cached_read_tokens`, `cached_write_tokens`, `reasoning_tokens`, `cost_usd`
    /// (null when unknown), `started_at`, `finished_at` (ISO 8601 UTC with milliseconds) and
    /// `streamed`. Throws as `for_each`.
    void export_jsonl(const UsageQuery& query, std::ostream& out);

    /// Writes the selected records to `out` as CSV (RFC 4180: a header row, the same columns as
    /// `export_jsonl`, every text field quoted with its quotes doubled, CRLF line ends), so no
    /// value can break a column. Throws as `for_each`.
    void export_csv(const UsageQuery& query, std::ostream& out);
};

}  // namespace ullm
