#pragma once

/// `UsageRecorder`: feeds a `UsageLedger` from `ClientOptions::on_usage`.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/usage_ledger.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace ullm {

/// Who the recorded usage belongs to. A value type.
struct UsageRecorderOptions {
    std::string tenant;
    std::string session_id;
    /// Record direct calls that their budget skipped (zero usage). Off by default.
    bool record_budget_skipped = false;
};

/// Makes `on_usage` callbacks that write each report to a ledger as a `UsageRecord` with a new
/// unique id (a random 64-bit prefix per recorder and a counter), the report's provider, model,
/// usage and streamed flag, the time of the report as `finished_at`, and the report's
/// `started_at` (when the request began: see `UsageReport::started_at`) as `started_at`; a
/// report without one (a default-constructed time point), or with one after the time of the
/// report (the wall clock was set back), is recorded as starting when it finished.
/// The callback never throws into the client: a failed write (or an exception from the ledger)
/// is counted in `failures()` and its message kept in `last_error()`. The recorder is shared by
/// its callbacks (they hold a `shared_ptr` to it); every member is thread-safe.
class UsageRecorder : public std::enable_shared_from_this<UsageRecorder> {
public:
    /// A recorder writing to `ledger` (not null). Throws `std::invalid_argument` for a null
    /// ledger.
    [[nodiscard]] static std::shared_ptr<UsageRecorder> make(std::shared_ptr<UsageLedger> ledger,
                                                             UsageRecorderOptions options = {}) {
        if (ledger == nullptr) throw std::invalid_argument("UsageRecorder: the ledger is null");
        return std::shared_ptr<UsageRecorder>(
            new UsageRecorder(std::move(ledger), std::move(options)));
    }

    /// The callback to put in `ClientOptions::on_usage`.
    [[nodiscard]] std::function<void(const UsageReport&)> callback() {
        return [self = shared_from_this()](const UsageReport& report) noexcept {
            self->write(report);
        };
    }

    /// Writes one report now; what `callback()` calls. Never throws.
    void write(const UsageReport& report) noexcept {
        if (report.budget_skipped && !options_.record_budget_skipped) return;
        try {
            UsageRecord record;
            record.id = next_id();
            record.tenant = options_.tenant;
            record.session_id = options_.session_id;
            record.provider = report.provider;
            record.model = report.model;
            record.usage = report.usage;
            record.finished_at = std::chrono::system_clock::now();
            // A wall clock set back during the request would put the start after the end,
            // which the ledger refuses: such a record starts when it finished.
            record.started_at = report.started_at == std::chrono::system_clock::time_point{}
                                    ? record.finished_at
                                    : std::min(report.started_at, record.finished_at);
            record.streamed = report.streamed;
            ledger_->record(record);
            recorded_.fetch_add(1);
        } catch (const std::exception& error) {
            note_failure(error.what());
        } catch (...) {
            note_failure("an exception that is not a std::exception");
        }
    }

    /// How many reports were written.
    [[nodiscard]] std::uint64_t recorded() const noexcept { return recorded_.load(); }
    /// How many reports could not be written.
    [[nodiscard]] std::uint64_t failures() const noexcept { return failures_.load(); }
    /// The message of the last failure, empty when none failed.
    [[nodiscard]] std::string last_error() const {
        const std::lock_guard lock(mutex_);
        return last_error_;
    }

private:
    UsageRecorder(std::shared_ptr<UsageLedger> ledger, UsageRecorderOptions options)
        : ledger_(std::move(ledger)), options_(std::move(options)) {
        std::random_device device;
        prefix_ = (static_cast<std::uint64_t>(device()) << 32U) ^ device();
    }

    std::string next_id() {
        static constexpr const char* digits = "0123456789abcdef";
        std::string id = "u-";
        for (int shift = 60; shift >= 0; shift -= 4) {
            id += digits[(prefix_ >> static_cast<unsigned>(shift)) & 0xFU];
        }
        return id + "-" + std::to_string(counter_.fetch_add(1));
    }

    void note_failure(const char* message) noexcept {
        failures_.fetch_add(1);
        try {
            const std::lock_guard lock(mutex_);
            last_error_ = message;
        } catch (...) {  // NOLINT(bugprone-empty-catch): counted already; the text is optional
        }
    }

    std::shared_ptr<UsageLedger> ledger_;
    UsageRecorderOptions options_;
    std::uint64_t prefix_ = 0;
    std::atomic<std::uint64_t> counter_{0};
    std::atomic<std::uint64_t> recorded_{0};
    std::atomic<std::uint64_t> failures_{0};
    mutable std::mutex mutex_;
    std::string last_error_;
};

}  // namespace ullm
