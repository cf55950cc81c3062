#include "usage.hpp"

#include "output.hpp"
#include "sessions.hpp"

#include <ullm/client/usage_recorder.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/sqlite_usage_ledger.hpp>
#if defined(ULLM_CLI_POSTGRES)
#include <ullm/store/postgres_usage_ledger.hpp>
#endif

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace ullm_cli {

namespace {

struct BadOption : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Reads exactly `count` digits at `at` of `text`; false when they are not there.
bool digits(const std::string& text, std::size_t& at, std::size_t count, int& value) {
    if (at + count > text.size()) return false;
    value = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const char c = text[at + i];
        if (c < '0' || c > '9') return false;
        value = value * 10 + (c - '0');
    }
    at += count;
    return true;
}

// ISO 8601: `YYYY-MM-DD`, optionally `THH:MM`, `:SS`, `.fff` and `Z` or `±HH:MM` (a space may
// stand for the T). Without an offset the time is UTC. Throws `BadOption` naming the text.
std::chrono::system_clock::time_point parse_when(const std::string& option,
                                                 const std::string& text) {
    const auto bad = [&]() -> BadOption {
        return BadOption(option + " needs an ISO 8601 date or time (2026-12-01, " +
                         "2026-12-01T09:30, 2026-12-01T09:30:00Z, 2026-12-01T09:30+02:00), not \"" +
                         text + "\"");
    };
    std::size_t at = 0;
    int year = 0;
    int month = 0;
    int day = 0;
    if (!digits(text, at, 4, year) || at >= text.size() || text[at++] != '-' ||
        !digits(text, at, 2, month) || at >= text.size() || text[at++] != '-' ||
        !digits(text, at, 2, day)) {
        throw bad();
    }
    const std::chrono::year_month_day date{std::chrono::year(year),
                                           std::chrono::month(static_cast<unsigned>(month)),
                                           std::chrono::day(static_cast<unsigned>(day))};
    if (!date.ok()) throw bad();
    std::chrono::milliseconds time_of_day{0};
    if (at < text.size() && (text[at] == 'T' || text[at] == 't' || text[at] == ' ')) {
        ++at;
        int hour = 0;
        int minute = 0;
        int second = 0;
        int millis = 0;
        if (!digits(text, at, 2, hour) || at >= text.size() || text[at++] != ':' ||
            !digits(text, at, 2, minute) || hour > 23 || minute > 59) {
            throw bad();
        }
        if (at < text.size() && text[at] == ':') {
            ++at;
            if (!digits(text, at, 2, second) || second > 59) throw bad();
            if (at < text.size() && text[at] == '.') {
                ++at;
                const std::size_t start = at;
                int scale = 100;
                while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
                    millis += (text[at] - '0') * scale;
                    scale /= 10;
                    ++at;
                }
                if (at == start) throw bad();
            }
        }
        time_of_day = std::chrono::hours(hour) + std::chrono::minutes(minute) +
                      std::chrono::seconds(second) + std::chrono::milliseconds(millis);
        if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
            ++at;
        } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
            const bool ahead = text[at++] == '+';
            int offset_hours = 0;
            int offset_minutes = 0;
            if (!digits(text, at, 2, offset_hours) || at >= text.size() || text[at++] != ':' ||
                !digits(text, at, 2, offset_minutes) || offset_hours > 23 || offset_minutes > 59) {
                throw bad();
            }
            const auto offset =
                std::chrono::hours(offset_hours) + std::chrono::minutes(offset_minutes);
            time_of_day -= ahead ? offset : -offset;
        }
    }
    if (at != text.size()) throw bad();
    return std::chrono::sys_days(date) + time_of_day;
}

std::string format_time(std::chrono::system_clock::time_point time, bool hour) {
    const auto day = std::chrono::floor<std::chrono::days>(time);
    const std::chrono::year_month_day date(day);
    std::string out =
        fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
                    static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
    if (hour) {
        const auto hours = std::chrono::floor<std::chrono::hours>(time - day).count();
        out += fmt::format("T{:02}:00Z", hours);
    }
    return out;
}

// A value for a terminal table: control bytes (and NUL) shown as \xNN, so no value can move
// the cursor or break a line. Empty shows as "-".
std::string printable(const std::string& text) {
    if (text.empty()) return "-";
    std::string out;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7F) {
            out += fmt::format("\\x{:02x}", byte);
        } else {
            out += c;
        }
    }
    return out;
}

std::shared_ptr<ullm::UsageLedger> open_ledger(const std::string& path,
                                               const std::string& postgres) {
#if defined(ULLM_CLI_POSTGRES)
    if (!postgres.empty()) return ullm::PostgresUsageLedger::open({.connection_string = postgres});
#else
    if (!postgres.empty()) {
        throw BadOption("--postgres: this ullm was built without PostgreSQL (ullm::postgres)");
    }
#endif
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error)) {
        throw ullm::UsageLedgerError("no usage ledger at " + path +
                                     " (chat and send write one with --ledger)");
    }
    return ullm::SqliteUsageLedger::open(path);
}

void print_table(const std::vector<ullm::UsageRow>& rows, const ullm::UsageQuery& query) {
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> header;
    for (const auto group : query.group_by) header.emplace_back(ullm::to_string(group));
    for (const char* name : {"requests", "input", "output", "cache read", "cache write",
                             "reasoning", "cost USD", "no cost"}) {
        header.emplace_back(name);
    }
    cells.push_back(header);
    const auto numbers = [](std::vector<std::string>& line, const ullm::UsageRow& source) {
        line.push_back(std::to_string(source.requests));
        line.push_back(std::to_string(source.usage.input_tokens));
        line.push_back(std::to_string(source.usage.output_tokens));
        line.push_back(std::to_string(source.usage.cached_read_tokens));
        line.push_back(std::to_string(source.usage.cached_write_tokens));
        line.push_back(std::to_string(source.usage.reasoning_tokens));
        line.push_back(source.usage.cost_usd ? fmt::format("{:.6f}", *source.usage.cost_usd) : "-");
        line.push_back(std::to_string(source.requests_without_cost));
    };
    ullm::UsageRow total;
    for (const auto& row : rows) {
        std::vector<std::string> line;
        for (const auto group : query.group_by) {
            switch (group) {
                case ullm::UsageGroup::tenant:
                    line.push_back(printable(row.tenant));
                    break;
                case ullm::UsageGroup::session:
                    line.push_back(printable(row.session_id));
                    break;
                case ullm::UsageGroup::provider:
                    line.push_back(printable(row.provider));
                    break;
                case ullm::UsageGroup::model:
                    line.push_back(printable(row.model));
                    break;
                case ullm::UsageGroup::hour:
                case ullm::UsageGroup::day:
                    line.push_back(row.period
                                       ? format_time(*row.period, group == ullm::UsageGroup::hour)
                                       : "-");
                    break;
            }
        }
        numbers(line, row);
        cells.push_back(std::move(line));
        total.requests += row.requests;
        total.usage += row.usage;
        total.requests_without_cost += row.requests_without_cost;
    }
    if (!query.group_by.empty()) {
        std::vector<std::string> line(query.group_by.size(), "");
        line[0] = "total";
        numbers(line, total);
        cells.push_back(std::move(line));
    }
    std::vector<std::size_t> widths(header.size(), 0);
    for (const auto& line : cells) {
        for (std::size_t i = 0; i < line.size(); ++i) {
            widths[i] = std::max(widths[i], line[i].size());
        }
    }
    const std::size_t keys = query.group_by.size();
    for (const auto& line : cells) {
        std::string out;
        for (std::size_t i = 0; i < line.size(); ++i) {
            if (i > 0) out += "  ";
            // Keys to the left, numbers to the right.
            out += i < keys ? fmt::format("{:<{}}", line[i], widths[i])
                            : fmt::format("{:>{}}", line[i], widths[i]);
        }
        while (!out.empty() && out.back() == ' ') out.pop_back();
        fmt::print("{}\n", out);
    }
}

}  // namespace

std::string default_ledger_path() {
    return (std::filesystem::path(default_store_path()).parent_path() / "usage.db").string();
}

std::function<void(const ullm::UsageReport&)> ledger_callback(const std::string& path,
                                                              const std::string& session_id) {
    const auto parent = std::filesystem::path(path).parent_path();
    std::error_code ignored;
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
    const auto recorder =
        ullm::UsageRecorder::make(ullm::SqliteUsageLedger::open(path), {.session_id = session_id});
    return [recorder](const ullm::UsageReport& report) {
        const auto failures = recorder->failures();
        recorder->write(report);
        if (recorder->failures() != failures) {
            std::fprintf(stderr, "ullm: usage not recorded: %s\n", recorder->last_error().c_str());
        }
    };
}

int usage(const std::vector<std::string>& args) {
    std::string path;
    std::string postgres;
    ullm::UsageQuery query;
    bool csv = false;
    bool jsonl = false;
    try {
        for (std::size_t i = 0; i < args.size(); ++i) {
            const std::string& arg = args[i];
            const auto value = [&]() -> const std::string& {
                if (i + 1 >= args.size()) throw BadOption(arg + " needs a value");
                return args[++i];
            };
            if (arg == "--ledger") {
                path = value();
            } else if (arg == "--postgres") {
                postgres = value();
            } else if (arg == "--by") {
                const std::string& name = value();
                const auto group = ullm::parse_usage_group(name);
                if (!group) {
                    throw BadOption(
                        "--by takes model, day, session, provider, tenant or hour, "
                        "not \"" +
                        name + "\"");
                }
                query.group_by.push_back(*group);
            } else if (arg == "--tenant") {
                query.tenant = value();
            } else if (arg == "--since") {
                query.since = parse_when(arg, value());
            } else if (arg == "--until") {
                query.until = parse_when(arg, value());
            } else if (arg == "--csv") {
                csv = true;
            } else if (arg == "--jsonl") {
                jsonl = true;
            } else {
                throw BadOption("unknown option " + arg);
            }
        }
        if (csv && jsonl) throw BadOption("--csv and --jsonl: choose one");
        if (!path.empty() && !postgres.empty())
            throw BadOption("--ledger and --postgres: choose one");
        ullm::validate_usage_query(query);
    } catch (const BadOption& error) {
        std::fprintf(stderr, "ullm usage: %s\n", error.what());
        return exit_usage;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "ullm usage: %s\n", error.what());
        return exit_usage;
    }
    if (path.empty()) path = default_ledger_path();
    try {
        const auto ledger = open_ledger(path, postgres);
        if (csv) {
            ledger->export_csv(query, std::cout);
        } else if (jsonl) {
            ledger->export_jsonl(query, std::cout);
        } else {
            print_table(ledger->aggregate(query), query);
        }
        std::cout.flush();
        return 0;
    } catch (const BadOption& error) {
        std::fprintf(stderr, "ullm usage: %s\n", error.what());
        return exit_usage;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "ullm usage: %s\n", error.what());
        return 1;
    }
}

}  // namespace ullm_cli
