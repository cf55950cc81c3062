#pragma once

/// `PostgresUsageLedger`: a `UsageLedger` in a PostgreSQL database, shared by every process
/// that connects to it. Part of the optional `ullm::postgres` component (libpq).

#include <ullm/store/postgres_session_store.hpp>
#include <ullm/store/usage_ledger.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ullm {

/// Keeps usage records in PostgreSQL: the table `ullm_usage` keyed by the record id, every
/// text as `bytea` (exactly the bytes written, NUL included, compared and ordered byte by
/// byte), with indexes on (tenant, started_at) and started_at; its schema version is the row
/// of `ullm_usage_schema`, created on first use under an advisory lock. Statements are
/// prepared once per connection. `record_all` is one transaction.
///
/// Calls share a bounded pool of connections (`PostgresStoreOptions`, as the session store)
/// and are thread-safe. A connection that broke (the server restarted) is dropped: the call
/// that noticed fails with a retryable `UsageLedgerError` and the next one reconnects. Errors
/// name the host, port and database, never the password or the connection string.
class PostgresUsageLedger final : public UsageLedger {
public:
    /// The schema version this ullm creates and reads.
    static constexpr int schema_version = 1;

    /// Connects, creates or checks the schema, and returns the ledger. Throws
    /// `UsageLedgerError` when the connection string is malformed, the server cannot be
    /// reached (retryable), the pool size is not 1..64 or the schema is newer than this ullm
    /// reads.
    [[nodiscard]] static std::shared_ptr<PostgresUsageLedger> open(
        const PostgresStoreOptions& options);

    ~PostgresUsageLedger() override;

    /// Where the ledger connects: `host:port/dbname`.
    [[nodiscard]] const std::string& target() const noexcept;

    void record(const UsageRecord& record) override;
    void record_all(std::span<const UsageRecord> records) override;
    [[nodiscard]] std::vector<UsageRow> aggregate(const UsageQuery& query) override;
    void for_each(const UsageQuery& query,
                  const std::function<void(const UsageRecord&)>& visit) override;

private:
    struct Impl;
    explicit PostgresUsageLedger(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace ullm
