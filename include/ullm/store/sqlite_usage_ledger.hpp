#pragma once

/// `SqliteUsageLedger`: the embedded `UsageLedger`, one SQLite database file.

#include <ullm/store/usage_ledger.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ullm {

/// Keeps usage records in a SQLite database: the table `ullm_usage` keyed by the record id,
/// with indexes on (tenant, started_at) and started_at for the time-range queries, and the
/// schema version in the table `ullm_usage_schema`. The database is opened in WAL mode with a
/// busy timeout of 5 seconds, so processes may share the file; it may also hold a
/// `SqliteSessionStore`'s table (the session store keeps its version in `user_version`, the
/// ledger does not touch it).
///
/// Each ledger object owns one connection and its prepared statements, guarded by a mutex:
/// every member is thread-safe (calls on one object run one at a time). Do not use a ledger
/// across `fork()`.
class SqliteUsageLedger final : public UsageLedger {
public:
    /// The schema version this ullm creates and reads.
    static constexpr int schema_version = 1;

    /// Opens (creating when missing) the database at `path`, or a private in-memory one for
    /// `":memory:"`, and creates or checks the schema. Throws `UsageLedgerError` when the file
    /// cannot be opened, is not a SQLite database or has a newer ledger schema.
    [[nodiscard]] static std::shared_ptr<SqliteUsageLedger> open(const std::string& path);

    ~SqliteUsageLedger() override;

    /// The path the ledger was opened with.
    [[nodiscard]] const std::string& path() const noexcept;

    void record(const UsageRecord& record) override;
    void record_all(std::span<const UsageRecord> records) override;
    [[nodiscard]] std::vector<UsageRow> aggregate(const UsageQuery& query) override;
    void for_each(const UsageQuery& query,
                  const std::function<void(const UsageRecord&)>& visit) override;

private:
    struct Impl;
    explicit SqliteUsageLedger(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace ullm
