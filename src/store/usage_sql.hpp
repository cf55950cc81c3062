#pragma once

// Internal to the usage ledgers: the SQL that SQLite and PostgreSQL share (the queries differ
// only in placeholders and casts), so the two ledgers group and order alike.

#include <ullm/core/error.hpp>
#include <ullm/store/usage_ledger.hpp>

#include <string>
#include <string_view>

namespace ullm::detail {

enum class UsageSqlDialect { sqlite, postgres };

/// The columns of a record, in the order the ledgers read them.
inline constexpr const char* usage_record_columns =
    "id, tenant, session_id, provider, model, input_tokens, output_tokens, cached_read_tokens, "
    "cached_write_tokens, reasoning_tokens, cost_usd, started_at, finished_at, streamed";

/// The row field that holds a text key.
inline std::string& usage_row_key(UsageRow& row, UsageGroup group) {
    switch (group) {
        case UsageGroup::tenant:
            return row.tenant;
        case UsageGroup::session:
            return row.session_id;
        case UsageGroup::provider:
            return row.provider;
        default:
            return row.model;
    }
}

/// Throws the `UsageRecordConflictError` for a record whose id is kept with other fields. The
/// id is not quoted: it may be anything the caller chose.
[[noreturn]] inline void throw_usage_conflict(const std::string& id) {
    throw UsageRecordConflictError("usage record: a record with this id (" +
                                   std::to_string(id.size()) +
                                   " bytes) is already kept with other fields; nothing written");
}

inline std::string usage_group_sql(UsageGroup group) {
    // The start of the UTC hour or day, in milliseconds (floored for times before 1970 too).
    switch (group) {
        case UsageGroup::tenant:
            return "tenant";
        case UsageGroup::session:
            return "session_id";
        case UsageGroup::provider:
            return "provider";
        case UsageGroup::model:
            return "model";
        case UsageGroup::hour:
            return "(started_at - (((started_at % 3600000) + 3600000) % 3600000))";
        case UsageGroup::day:
            return "(started_at - (((started_at % 86400000) + 86400000) % 86400000))";
    }
    return "model";
}

/// The WHERE clause: since, until and (when the query has one) the tenant are parameters 1, 2
/// and 3.
inline std::string usage_where_sql(const UsageQuery& query, UsageSqlDialect dialect) {
    const bool pg = dialect == UsageSqlDialect::postgres;
    std::string sql = pg ? " WHERE started_at >= $1 AND started_at < $2"
                         : " WHERE started_at >= ?1 AND started_at < ?2";
    if (query.tenant) sql += pg ? " AND tenant = $3" : " AND tenant = ?3";
    return sql;
}

/// The aggregate: the group keys in the query's order, then requests, the five token sums,
/// the cost sum and the count of rows without a cost.
inline std::string usage_aggregate_sql(const UsageQuery& query, UsageSqlDialect dialect) {
    const bool pg = dialect == UsageSqlDialect::postgres;
    std::string keys;
    for (const UsageGroup group : query.group_by) {
        if (!keys.empty()) keys += ", ";
        keys += usage_group_sql(group);
    }
    const auto sum = [&](std::string_view column) {
        return "COALESCE(SUM(" + std::string(column) + ")" + (pg ? "::bigint" : "") + ", 0)";
    };
    std::string sql = "SELECT ";
    if (!keys.empty()) sql += keys + ", ";
    sql += "COUNT(*), " + sum("input_tokens") + ", " + sum("output_tokens") + ", " +
           sum("cached_read_tokens") + ", " + sum("cached_write_tokens") + ", " +
           sum("reasoning_tokens") + ", SUM(cost_usd), COUNT(*) - COUNT(cost_usd) FROM ullm_usage" +
           usage_where_sql(query, dialect);
    if (!keys.empty()) sql += " GROUP BY " + keys + " ORDER BY " + keys;
    return sql;
}

/// The raw records, in order of start time, then id.
inline std::string usage_select_sql(const UsageQuery& query, UsageSqlDialect dialect) {
    return std::string("SELECT ") + usage_record_columns + " FROM ullm_usage" +
           usage_where_sql(query, dialect) + " ORDER BY started_at, id";
}

}  // namespace ullm::detail
