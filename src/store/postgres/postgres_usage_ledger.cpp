#include <ullm/store/postgres_usage_ledger.hpp>

#include <ullm/core/error.hpp>

#include "../store_rules.hpp"
#include "../usage_sql.hpp"
#include "libpq_client.hpp"

#include <libpq-fe.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm {

namespace {

// Any constant: the key of the advisory lock that serialises the ledger's schema creation.
constexpr std::int64_t ledger_schema_lock_key = 0x756c6c6d5f757365;  // "ullm_use"

constexpr const char* ledger_schema_sql = R"sql(
CREATE TABLE ullm_usage (
    id                  bytea            NOT NULL PRIMARY KEY,
    tenant              bytea            NOT NULL,
    session_id          bytea            NOT NULL,
    provider            bytea            NOT NULL,
    model               bytea            NOT NULL,
    input_tokens        bigint           NOT NULL,
    output_tokens       bigint           NOT NULL,
    cached_read_tokens  bigint           NOT NULL,
    cached_write_tokens bigint           NOT NULL,
    reasoning_tokens    bigint           NOT NULL,
    cost_usd            double precision,
    started_at          bigint           NOT NULL,
    finished_at         bigint           NOT NULL,
    streamed            boolean          NOT NULL
);
CREATE INDEX ullm_usage_by_time ON ullm_usage (started_at);
CREATE INDEX ullm_usage_by_tenant_time ON ullm_usage (tenant, started_at);
INSERT INTO ullm_usage_schema (singleton, version) VALUES (true, 1);
)sql";

constexpr const char* insert_name = "ullm_usage_insert";
constexpr const char* insert_sql =
    "INSERT INTO ullm_usage (id, tenant, session_id, provider, model, input_tokens, "
    "output_tokens, cached_read_tokens, cached_write_tokens, reasoning_tokens, cost_usd, "
    "started_at, finished_at, streamed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
    "$12, $13, $14) ON CONFLICT (id) DO NOTHING";
constexpr const char* find_name = "ullm_usage_find";
const std::string find_sql =
    std::string("SELECT ") + detail::usage_record_columns + " FROM ullm_usage WHERE id = $1";

// A batch goes through a temporary table of the connection (emptied at each commit): COPY
// fills it, one statement moves the new records over, and one looks for a record whose id is
// kept with other values (an earlier record, or another record of the same batch).
constexpr const char* batch_begin_sql =
    "BEGIN; CREATE TEMPORARY TABLE IF NOT EXISTS ullm_usage_incoming (LIKE ullm_usage) "
    "ON COMMIT DELETE ROWS";
const std::string batch_copy_sql = std::string("COPY ullm_usage_incoming (") +
                                   detail::usage_record_columns + ") FROM STDIN (FORMAT binary)";
const std::string batch_insert_sql =
    std::string("INSERT INTO ullm_usage (") + detail::usage_record_columns + ") SELECT " +
    detail::usage_record_columns + " FROM ullm_usage_incoming ON CONFLICT (id) DO NOTHING";
// The record's columns, each with `alias.` before it.
std::string qualified_columns(std::string_view alias) {
    std::string out;
    std::string_view rest = detail::usage_record_columns;
    for (;;) {
        const std::size_t comma = rest.find(", ");
        out.append(alias).append(".").append(rest.substr(0, comma));
        if (comma == std::string_view::npos) return out;
        out += ", ";
        rest.remove_prefix(comma + 2);
    }
}
const std::string batch_conflict_sql =
    "SELECT i.id FROM ullm_usage_incoming i JOIN ullm_usage u ON u.id = i.id WHERE (" +
    qualified_columns("u") + ") IS DISTINCT FROM (" + qualified_columns("i") + ") LIMIT 1";

constexpr Oid float8_oid = 701;
constexpr Oid bool_oid = 16;

detail::pg::Param float8_param(const std::optional<double>& value) {
    if (!value) return {float8_oid, std::string(8, '\0'), true};
    detail::pg::Param param =
        detail::pg::int8_param(static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(*value)));
    param.type = float8_oid;
    return param;
}

detail::pg::Param bool_param(bool value) {
    return {bool_oid, std::string(1, value ? '\1' : '\0')};
}

std::optional<double> read_float8(const PGresult* result, int row, int column) {
    if (PQgetisnull(result, row, column) != 0) return std::nullopt;
    return std::bit_cast<double>(
        static_cast<std::uint64_t>(detail::pg::read_int8(result, row, column)));
}

std::vector<detail::pg::Param> insert_params(const UsageRecord& record) {
    using detail::pg::bytea_param;
    using detail::pg::int8_param;
    return {bytea_param(record.id),
            bytea_param(record.tenant),
            bytea_param(record.session_id),
            bytea_param(record.provider),
            bytea_param(record.model),
            int8_param(record.usage.input_tokens),
            int8_param(record.usage.output_tokens),
            int8_param(record.usage.cached_read_tokens),
            int8_param(record.usage.cached_write_tokens),
            int8_param(record.usage.reasoning_tokens),
            float8_param(record.usage.cost_usd),
            int8_param(detail::to_unix_ms(record.started_at)),
            int8_param(detail::to_unix_ms(record.finished_at)),
            bool_param(record.streamed)};
}

UsageRecord read_record(const PGresult* result, int row) {
    using detail::pg::read_bytes;
    using detail::pg::read_int8;
    UsageRecord record;
    record.id = read_bytes(result, row, 0);
    record.tenant = read_bytes(result, row, 1);
    record.session_id = read_bytes(result, row, 2);
    record.provider = read_bytes(result, row, 3);
    record.model = read_bytes(result, row, 4);
    record.usage.input_tokens = read_int8(result, row, 5);
    record.usage.output_tokens = read_int8(result, row, 6);
    record.usage.cached_read_tokens = read_int8(result, row, 7);
    record.usage.cached_write_tokens = read_int8(result, row, 8);
    record.usage.reasoning_tokens = read_int8(result, row, 9);
    record.usage.cost_usd = read_float8(result, row, 10);
    record.started_at = detail::from_unix_ms(read_int8(result, row, 11));
    record.finished_at = detail::from_unix_ms(read_int8(result, row, 12));
    record.streamed = *PQgetvalue(result, row, 13) != 0;
    return record;
}

std::vector<detail::pg::Param> filter_params(const UsageQuery& query) {
    std::vector<detail::pg::Param> params{
        detail::pg::int8_param(query.since ? detail::to_unix_ms(*query.since)
                                           : std::numeric_limits<std::int64_t>::min()),
        detail::pg::int8_param(query.until ? detail::to_unix_ms(*query.until)
                                           : std::numeric_limits<std::int64_t>::max())};
    if (query.tenant) params.push_back(detail::pg::bytea_param(*query.tenant));
    return params;
}

}  // namespace

struct PostgresUsageLedger::Impl : detail::pg::Client<UsageLedgerError> {
    void migrate(PGconn* conn) {
        exec(conn, "BEGIN", {}, "begin the schema transaction");
        try {
            exec(conn, "SELECT pg_advisory_xact_lock($1)",
                 {detail::pg::int8_param(ledger_schema_lock_key)}, "lock the schema");
            exec(conn,
                 "CREATE TABLE IF NOT EXISTS ullm_usage_schema ("
                 "singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), "
                 "version bigint NOT NULL)",
                 {}, "create the schema table");
            const detail::pg::Result found =
                exec(conn, "SELECT version FROM ullm_usage_schema", {}, "read the schema version");
            const std::int64_t version =
                PQntuples(found.get()) == 0 ? 0 : detail::pg::read_int8(found.get(), 0, 0);
            if (version > schema_version || version < 0) {
                throw UsageLedgerError(label + " " + target.description +
                                       ": the database has ledger schema version " +
                                       std::to_string(version) + ", newer than this ullm reads (" +
                                       std::to_string(schema_version) + ")");
            }
            if (version == 0) {
                run_sql(conn, ledger_schema_sql, "create the schema");
            }
            exec(conn, "COMMIT", {}, "commit the schema");
        } catch (...) {
            rollback(conn);
            throw;
        }
    }

    // Inserts one validated, normalized record on `conn`; an equal one already kept is left
    // alone. Outside a transaction (the statements are prepared on first use).
    void insert_one(PGconn* conn, const UsageRecord& record) {
        const detail::pg::Result inserted = exec_prepared(
            conn, insert_name, insert_sql, insert_params(record), "write a usage record");
        if (std::string_view(PQcmdTuples(inserted.get())) == "1") return;
        const detail::pg::Result found =
            exec_prepared(conn, find_name, find_sql.c_str(), {detail::pg::bytea_param(record.id)},
                          "read a usage record");
        if (PQntuples(found.get()) != 1) {
            throw UsageLedgerError(label + " " + target.description +
                                   ": a usage record was neither written nor found");
        }
        if (read_record(found.get(), 0) != record) detail::throw_usage_conflict(record.id);
    }
};

PostgresUsageLedger::PostgresUsageLedger(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PostgresUsageLedger::~PostgresUsageLedger() = default;

std::shared_ptr<PostgresUsageLedger> PostgresUsageLedger::open(
    const PostgresStoreOptions& options) {
    auto impl = std::make_unique<Impl>();
    impl->configure("postgres usage ledger", options);
    impl->with_connection([&](PGconn* conn) {
        impl->migrate(conn);
        return 0;
    });
    return std::shared_ptr<PostgresUsageLedger>(new PostgresUsageLedger(std::move(impl)));
}

const std::string& PostgresUsageLedger::target() const noexcept {
    return impl_->target.description;
}

void PostgresUsageLedger::record(const UsageRecord& record) {
    validate_usage_record(record);
    const UsageRecord normalized = normalized_usage_record(record);
    impl_->with_connection([&](PGconn* conn) {
        impl_->insert_one(conn, normalized);
        return 0;
    });
}

void PostgresUsageLedger::record_all(std::span<const UsageRecord> records) {
    std::vector<UsageRecord> normalized;
    normalized.reserve(records.size());
    for (const UsageRecord& record : records) {
        validate_usage_record(record);
        normalized.push_back(normalized_usage_record(record));
    }
    if (normalized.empty()) return;
    impl_->with_connection([&](PGconn* conn) {
        impl_->run_sql(conn, batch_begin_sql, "begin a transaction");
        try {
            // Sent in pieces of about 64 KiB, so a large batch is never held twice.
            std::size_t next = 0;
            const auto produce = [&](std::string& chunk) {
                if (next == 0) chunk += detail::pg::copy_header;
                while (next < normalized.size() && chunk.size() < 65536) {
                    detail::pg::append_copy_tuple(chunk, insert_params(normalized[next++]));
                }
                if (next < normalized.size()) return true;
                chunk += detail::pg::copy_trailer;
                return false;
            };
            impl_->copy_in(conn, batch_copy_sql.c_str(), produce, "write usage records");
            impl_->exec(conn, batch_insert_sql.c_str(), {}, "write usage records");
            const detail::pg::Result conflict =
                impl_->exec(conn, batch_conflict_sql.c_str(), {}, "compare usage records");
            if (PQntuples(conflict.get()) != 0) {
                detail::throw_usage_conflict(detail::pg::read_bytes(conflict.get(), 0, 0));
            }
            impl_->exec(conn, "COMMIT", {}, "commit usage records");
        } catch (...) {
            impl_->rollback(conn);
            throw;
        }
        return 0;
    });
}

std::vector<UsageRow> PostgresUsageLedger::aggregate(const UsageQuery& query) {
    validate_usage_query(query);
    const std::string sql = detail::usage_aggregate_sql(query, detail::UsageSqlDialect::postgres);
    return impl_->with_connection([&](PGconn* conn) {
        const detail::pg::Result result =
            impl_->exec(conn, sql.c_str(), filter_params(query), "aggregate usage");
        std::vector<UsageRow> rows;
        const int count = PQntuples(result.get());
        rows.reserve(static_cast<std::size_t>(count));
        for (int at = 0; at < count; ++at) {
            UsageRow row;
            int column = 0;
            for (const UsageGroup group : query.group_by) {
                if (group == UsageGroup::hour || group == UsageGroup::day) {
                    row.period =
                        detail::from_unix_ms(detail::pg::read_int8(result.get(), at, column++));
                } else {
                    detail::usage_row_key(row, group) =
                        detail::pg::read_bytes(result.get(), at, column++);
                }
            }
            row.requests = detail::pg::read_int8(result.get(), at, column++);
            row.usage.input_tokens = detail::pg::read_int8(result.get(), at, column++);
            row.usage.output_tokens = detail::pg::read_int8(result.get(), at, column++);
            row.usage.cached_read_tokens = detail::pg::read_int8(result.get(), at, column++);
            row.usage.cached_write_tokens = detail::pg::read_int8(result.get(), at, column++);
            row.usage.reasoning_tokens = detail::pg::read_int8(result.get(), at, column++);
            row.usage.cost_usd = read_float8(result.get(), at, column++);
            row.requests_without_cost = detail::pg::read_int8(result.get(), at, column++);
            rows.push_back(std::move(row));
        }
        return rows;
    });
}

void PostgresUsageLedger::for_each(const UsageQuery& query,
                                   const std::function<void(const UsageRecord&)>& visit) {
    validate_usage_query(query);
    const std::string sql = detail::usage_select_sql(query, detail::UsageSqlDialect::postgres);
    // Read in pages of the (started_at, id) order, so that a large export holds one page in
    // memory; each page is its own statement, run when the previous one was visited.
    constexpr int page_size = 10000;
    std::optional<std::pair<std::int64_t, std::string>> after;
    for (;;) {
        std::string paged = sql;
        std::vector<detail::pg::Param> params = filter_params(query);
        if (after) {
            const std::string first = std::to_string(params.size() + 1);
            const std::string second = std::to_string(params.size() + 2);
            paged.insert(paged.find(" ORDER BY"),
                         " AND (started_at, id) > ($" + first + ", $" + second + ")");
            params.push_back(detail::pg::int8_param(after->first));
            params.push_back(detail::pg::bytea_param(after->second));
        }
        paged += " LIMIT " + std::to_string(page_size);
        std::vector<UsageRecord> page = impl_->with_connection([&](PGconn* conn) {
            const detail::pg::Result result =
                impl_->exec(conn, paged.c_str(), params, "read usage records");
            std::vector<UsageRecord> records;
            const int count = PQntuples(result.get());
            records.reserve(static_cast<std::size_t>(count));
            for (int row = 0; row < count; ++row) records.push_back(read_record(result.get(), row));
            return records;
        });
        for (const UsageRecord& record : page) visit(record);
        if (page.size() < static_cast<std::size_t>(page_size)) return;
        after.emplace(detail::to_unix_ms(page.back().started_at), page.back().id);
    }
}

}  // namespace ullm
