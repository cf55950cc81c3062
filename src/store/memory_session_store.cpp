#include <ullm/store/memory_session_store.hpp>

#include <ullm/core/error.hpp>

#include "store_rules.hpp"

#include <utility>
#include <vector>

namespace ullm {

std::optional<StoredSession> MemorySessionStore::get(std::string_view tenant,
                                                     std::string_view session_id) {
    validate_session_key(tenant, session_id);
    const std::lock_guard lock(mutex_);
    const auto sessions = tenants_.find(tenant);
    if (sessions == tenants_.end()) return std::nullopt;
    const auto found = sessions->second.find(session_id);
    if (found == sessions->second.end()) return std::nullopt;
    const Record& record = found->second;
    return StoredSession{std::string(tenant), std::string(session_id), record.version,
                         record.snapshot, record.updated_at};
}

std::uint64_t MemorySessionStore::put(std::string_view tenant, std::string_view session_id,
                                      std::string_view snapshot, std::uint64_t expected_version) {
    validate_session_key(tenant, session_id);
    // Copy before locking: the only step that can throw (bad_alloc) happens before any change.
    Record fresh{expected_version + 1, std::string(snapshot), detail::now_ms()};
    const std::lock_guard lock(mutex_);
    auto sessions = tenants_.find(tenant);
    const Record* current = nullptr;
    if (sessions != tenants_.end()) {
        const auto found = sessions->second.find(session_id);
        if (found != sessions->second.end()) current = &found->second;
    }
    const std::uint64_t actual = current == nullptr ? 0 : current->version;
    if (actual != expected_version) detail::throw_conflict(expected_version, actual);
    if (sessions == tenants_.end()) sessions = tenants_.try_emplace(std::string(tenant)).first;
    sessions->second.insert_or_assign(std::string(session_id), std::move(fresh));
    return expected_version + 1;
}

bool MemorySessionStore::remove(std::string_view tenant, std::string_view session_id) {
    validate_session_key(tenant, session_id);
    const std::lock_guard lock(mutex_);
    const auto sessions = tenants_.find(tenant);
    if (sessions == tenants_.end()) return false;
    const auto found = sessions->second.find(session_id);
    if (found == sessions->second.end()) return false;
    sessions->second.erase(found);
    if (sessions->second.empty()) tenants_.erase(sessions);
    return true;
}

SessionPage MemorySessionStore::list(std::string_view tenant, const SessionListOptions& options) {
    const detail::ListQuery query = detail::parse_list_query(tenant, options);
    std::vector<SessionSummary> rows;
    const std::lock_guard lock(mutex_);
    const auto sessions = tenants_.find(tenant);
    if (sessions == tenants_.end()) return {};
    rows.reserve(query.limit + 1);
    for (auto it = sessions->second.upper_bound(query.after);
         it != sessions->second.end() && rows.size() <= query.limit; ++it) {
        rows.push_back(SessionSummary{it->first, it->second.version, it->second.updated_at});
    }
    return detail::finish_page(std::move(rows), query.limit);
}

}  // namespace ullm
