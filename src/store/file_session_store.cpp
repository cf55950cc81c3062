#include <ullm/store/file_session_store.hpp>

#include <ullm/core/error.hpp>

#include "store_rules.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace ullm {

namespace fs = std::filesystem;

namespace {

// Hex names are cut into pieces of this many characters, one directory level each, so that a
// 256-byte session id (512 hex digits) stays under the usual 255-byte name limit.
constexpr std::size_t piece_chars = 200;
constexpr std::size_t max_session_hex_chars = std::size_t{2} * 256;
constexpr std::string_view format_file = "FORMAT";
constexpr std::string_view format_prefix = "ullm.file_session_store ";
constexpr std::uint64_t format_version = 1;
constexpr std::string_view lock_file = "lock";
constexpr std::string_view temp_prefix = ".tmp-";
constexpr std::string_view record_suffix = ".rec";
constexpr std::string_view record_magic = "ullm-session-record 1\n";
// Longer than any header this store writes (at most about 900 bytes).
constexpr std::size_t max_header_bytes = 4096;

std::atomic<std::uint64_t> temp_counter{0};

// --- errors -----------------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& what, const fs::path& path, int error) {
    const bool retryable = error == EINTR || error == EAGAIN || error == EBUSY;
    throw SessionStoreError("file session store: cannot " + what + " " + path.string() + ": " +
                                std::generic_category().message(error),
                            retryable);
}

[[noreturn]] void fail_damaged(const fs::path& path, const std::string& why) {
    throw SessionStoreError("file session store: the record " + path.string() + " is damaged (" +
                            why + "); remove it or restore it from a backup");
}

// --- CRC-32 (IEEE 802.3, reflected), eight bytes per step -------------------------------------

struct CrcTables {
    std::array<std::array<std::uint32_t, 256>, 8> table{};
};

constexpr CrcTables make_crc_tables() {
    CrcTables tables;
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t crc = i;
        for (int bit = 0; bit < 8; ++bit)
            crc = (crc & 1U) != 0 ? (crc >> 1U) ^ 0xEDB88320U : crc >> 1U;
        tables.table[0][i] = crc;
    }
    for (std::size_t i = 0; i < 256; ++i) {
        for (std::size_t k = 1; k < 8; ++k) {
            const std::uint32_t previous = tables.table[k - 1][i];
            tables.table[k][i] = (previous >> 8U) ^ tables.table[0][previous & 0xFFU];
        }
    }
    return tables;
}

constexpr CrcTables crc_tables = make_crc_tables();

std::uint32_t load_le32(const unsigned char* p) {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8U) |
           (static_cast<std::uint32_t>(p[2]) << 16U) | (static_cast<std::uint32_t>(p[3]) << 24U);
}

// Continues the CRC `crc` (0 to start) over `data`.
std::uint32_t crc32(std::uint32_t crc, std::string_view data) {
    const auto& t = crc_tables.table;
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    std::size_t n = data.size();
    crc = ~crc;
    while (n >= 8) {
        const std::uint32_t one = load_le32(p) ^ crc;
        const std::uint32_t two = load_le32(p + 4);
        crc = t[7][one & 0xFFU] ^ t[6][(one >> 8U) & 0xFFU] ^ t[5][(one >> 16U) & 0xFFU] ^
              t[4][one >> 24U] ^ t[3][two & 0xFFU] ^ t[2][(two >> 8U) & 0xFFU] ^
              t[1][(two >> 16U) & 0xFFU] ^ t[0][two >> 24U];
        p += 8;
        n -= 8;
    }
    for (; n > 0; --n, ++p) crc = t[0][(crc ^ *p) & 0xFFU] ^ (crc >> 8U);
    return ~crc;
}

static_assert(make_crc_tables().table[0][1] == 0x77073096U);

// --- file descriptors -------------------------------------------------------------------------

class Fd {
public:
    explicit Fd(int fd = -1) noexcept : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd& operator=(Fd&&) = delete;
    [[nodiscard]] int get() const noexcept { return fd_; }
    [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
    // Closes now and reports the result (a delayed write error can surface here).
    int close() noexcept {
        const int result = ::close(fd_);
        fd_ = -1;
        return result;
    }

private:
    int fd_;
};

Fd open_file(const fs::path& path, int flags, mode_t mode = 0600) {
    for (;;) {
        const int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
        if (fd >= 0 || errno != EINTR) return Fd(fd);
    }
}

void write_all(const Fd& fd, std::string_view data, const fs::path& path) {
    while (!data.empty()) {
        const ssize_t written = ::write(fd.get(), data.data(), data.size());
        if (written < 0) {
            if (errno == EINTR) continue;
            fail("write", path, errno);
        }
        data.remove_prefix(static_cast<std::size_t>(written));
    }
}

// Reads `out.size()` bytes at `offset`; false when the file ends first.
bool read_at(const Fd& fd, std::uint64_t offset, std::string& out, const fs::path& path) {
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t got = ::pread(fd.get(), out.data() + done, out.size() - done,
                                    static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            fail("read", path, errno);
        }
        if (got == 0) return false;
        done += static_cast<std::size_t>(got);
    }
    return true;
}

void sync_directory(const fs::path& directory) {
    const Fd fd = open_file(directory, O_RDONLY | O_DIRECTORY);
    if (!fd.valid()) fail("open the directory", directory, errno);
    if (::fsync(fd.get()) != 0) fail("flush the directory", directory, errno);
}

// Creates `directory` (its parent must exist) unless it is there; a new directory's entry is
// flushed to its parent so that it survives a crash together with what is written into it.
void make_directory(const fs::path& directory) {
    if (::mkdir(directory.c_str(), 0700) == 0) {
        sync_directory(directory.parent_path());
        return;
    }
    const int error = errno;
    struct stat info {};
    if (error == EEXIST && ::stat(directory.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return;
    fail("create the directory", directory, error);
}

// Writes `head` then `body` to a temporary file in `directory`, flushes it, renames it over
// `target` and flushes the directory: readers and a crash see the old or the new file whole.
void write_atomically(const fs::path& directory, const fs::path& target, std::string_view head,
                      std::string_view body) {
    const fs::path temp = directory / (std::string(temp_prefix) + std::to_string(::getpid()) + "-" +
                                       std::to_string(temp_counter.fetch_add(1)));
    Fd fd = open_file(temp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW);
    if (!fd.valid()) fail("create", temp, errno);
    try {
        write_all(fd, head, temp);
        write_all(fd, body, temp);
        if (::fsync(fd.get()) != 0) fail("flush", temp, errno);
        if (fd.close() != 0) fail("close", temp, errno);
        if (::rename(temp.c_str(), target.c_str()) != 0) fail("replace", target, errno);
    } catch (...) {
        ::unlink(temp.c_str());
        throw;
    }
    sync_directory(directory);
}

// --- layout -----------------------------------------------------------------------------------

std::vector<std::string> hex_pieces(const std::string& hex) {
    std::vector<std::string> pieces;
    for (std::size_t start = 0; start < hex.size(); start += piece_chars) {
        pieces.push_back(hex.substr(start, piece_chars));
    }
    return pieces;
}

// The directories from the store's root down to the tenant's, outermost first.
std::vector<fs::path> tenant_directories(const fs::path& root, std::string_view tenant) {
    std::vector<fs::path> out;
    const std::string hex = detail::to_hex(tenant);
    if (hex.empty()) {
        out.push_back(root / "t");
        return out;
    }
    fs::path path = root;
    for (const auto& piece : hex_pieces(hex)) {
        path /= "t" + piece;
        out.push_back(path);
    }
    return out;
}

fs::path tenant_directory(const fs::path& root, std::string_view tenant) {
    return tenant_directories(root, tenant).back();
}

struct RecordPath {
    std::vector<fs::path> piece_directories;  // Between the tenant's directory and the file.
    fs::path directory;                       // The directory holding the file.
    fs::path file;
};

RecordPath record_path(const fs::path& tenant_dir, std::string_view session_id) {
    RecordPath out;
    const std::vector<std::string> pieces = hex_pieces(detail::to_hex(session_id));
    fs::path path = tenant_dir;
    for (std::size_t i = 0; i + 1 < pieces.size(); ++i) {
        path /= "s" + pieces[i];
        out.piece_directories.push_back(path);
    }
    out.directory = path;
    out.file = path / ("s" + pieces.back() + std::string(record_suffix));
    return out;
}

bool is_lower_hex(std::string_view text) {
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// --- the exclusive lock of a tenant -------------------------------------------------------------

class TenantLock {
public:
    // Waits for the lock of the tenant whose directory is `tenant_dir`. Returns an unlocked
    // object when the directory does not exist (or, with `wait` false, when it is held).
    static TenantLock acquire(const fs::path& tenant_dir, bool wait = true) {
        const fs::path path = tenant_dir / lock_file;
        Fd fd = open_file(path, O_RDWR | O_CREAT | O_NOFOLLOW);
        if (!fd.valid()) {
            if (errno == ENOENT) return TenantLock(Fd());
            fail("open the lock file", path, errno);
        }
        for (;;) {
            if (::flock(fd.get(), wait ? LOCK_EX : LOCK_EX | LOCK_NB) == 0) break;
            if (errno == EINTR) continue;
            if (!wait && errno == EWOULDBLOCK) return TenantLock(Fd());
            fail("lock", path, errno);
        }
        return TenantLock(std::move(fd));
    }
    [[nodiscard]] bool held() const noexcept { return fd_.valid(); }

private:
    explicit TenantLock(Fd fd) : fd_(std::move(fd)) {}
    Fd fd_;  // Closing it releases the lock.
};

// --- records ----------------------------------------------------------------------------------

struct RecordHeader {
    std::uint64_t version = 0;
    std::int64_t updated_at_ms = 0;
    std::uint64_t snapshot_bytes = 0;
    std::uint32_t crc = 0;
    std::size_t checked_bytes = 0;  // The header bytes the CRC covers (all before the crc line).
    std::size_t header_bytes = 0;   // Where the snapshot starts.
};

struct Record {
    RecordHeader header;
    std::string snapshot;
};

// The bytes of a record before its snapshot, CRC line excluded.
std::string header_fields(std::uint64_t version, std::int64_t updated_at_ms,
                          std::string_view tenant_hex, std::string_view session_hex,
                          std::size_t snapshot_bytes) {
    std::string out(record_magic);
    out += "version " + std::to_string(version) + "\n";
    out += "updated_at_ms " + std::to_string(updated_at_ms) + "\n";
    out += "tenant " + std::string(tenant_hex) + "\n";
    out += "session_id " + std::string(session_hex) + "\n";
    out += "snapshot_bytes " + std::to_string(snapshot_bytes) + "\n";
    return out;
}

std::string crc_line(std::uint32_t crc) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out = "crc32 ";
    for (int shift = 28; shift >= 0; shift -= 4) out.push_back(digits[(crc >> shift) & 0xFU]);
    out += "\n\n";
    return out;
}

// Takes the line `<name> <value>\n` from the front of `rest`; false when it is not there.
bool take_field(std::string_view& rest, std::string_view name, std::string_view& value) {
    if (rest.substr(0, name.size()) != name || rest.size() <= name.size() ||
        rest[name.size()] != ' ') {
        return false;
    }
    const std::size_t end = rest.find('\n', name.size() + 1);
    if (end == std::string_view::npos) return false;
    value = rest.substr(name.size() + 1, end - name.size() - 1);
    rest.remove_prefix(end + 1);
    return true;
}

template <class Number>
bool parse_number(std::string_view text, Number& out, int base = 10) {
    if (text.empty() || text.front() == '-') return false;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return error == std::errc() && end == text.data() + text.size();
}

// Parses the header at the front of `data`, checking that it names this key; returns why it
// is not a valid header, or an empty string.
std::string parse_header(std::string_view data, std::string_view tenant_hex,
                         std::string_view session_hex, RecordHeader& out) {
    if (data.substr(0, record_magic.size()) != record_magic) return "not a session record";
    std::string_view rest = data.substr(record_magic.size());
    std::string_view value;
    if (!take_field(rest, "version", value) || !parse_number(value, out.version) ||
        out.version == 0) {
        return "bad version";
    }
    if (!take_field(rest, "updated_at_ms", value) || !parse_number(value, out.updated_at_ms)) {
        return "bad updated_at_ms";
    }
    if (!take_field(rest, "tenant", value) || value != tenant_hex) return "not this tenant's";
    if (!take_field(rest, "session_id", value) || value != session_hex) {
        return "not this session's";
    }
    if (!take_field(rest, "snapshot_bytes", value) || !parse_number(value, out.snapshot_bytes)) {
        return "bad snapshot_bytes";
    }
    out.checked_bytes = data.size() - rest.size();
    if (!take_field(rest, "crc32", value) || value.size() != 8 ||
        !parse_number(value, out.crc, 16) || !is_lower_hex(value)) {
        return "bad crc32";
    }
    if (rest.empty() || rest.front() != '\n') return "unterminated header";
    out.header_bytes = data.size() - rest.size() + 1;
    return {};
}

// Reads the record in `file` (the header only unless `with_snapshot`); nullopt when there is
// none. Throws `SessionStoreError` when it cannot be read or is damaged.
std::optional<Record> read_record(const fs::path& file, std::string_view tenant_hex,
                                  std::string_view session_hex, bool with_snapshot) {
    const Fd fd = open_file(file, O_RDONLY | O_NOFOLLOW);
    if (!fd.valid()) {
        if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
        fail("open", file, errno);
    }
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) fail("inspect", file, errno);
    if (!S_ISREG(info.st_mode)) fail_damaged(file, "not a regular file");
    const auto size = static_cast<std::uint64_t>(info.st_size);
    std::string head(static_cast<std::size_t>(std::min<std::uint64_t>(size, max_header_bytes)),
                     '\0');
    if (!read_at(fd, 0, head, file)) fail_damaged(file, "it shrank while being read");
    Record record;
    const std::string problem = parse_header(head, tenant_hex, session_hex, record.header);
    if (!problem.empty()) fail_damaged(file, problem);
    const RecordHeader& header = record.header;
    if (size - header.header_bytes != header.snapshot_bytes) {
        fail_damaged(file, "its length does not match its header");
    }
    if (!with_snapshot) return record;
    record.snapshot.resize(static_cast<std::size_t>(header.snapshot_bytes));
    if (!read_at(fd, header.header_bytes, record.snapshot, file)) {
        fail_damaged(file, "it shrank while being read");
    }
    const std::uint32_t crc =
        crc32(crc32(0, std::string_view(head).substr(0, header.checked_bytes)), record.snapshot);
    if (crc != header.crc) fail_damaged(file, "checksum mismatch");
    return record;
}

// --- listing ----------------------------------------------------------------------------------

struct Candidate {
    std::string session_id;
    fs::path file;
};

// Collects the records under `directory` (whose hex pieces so far are `prefix`) and the
// temporary files a crashed writer left behind. Anything else is not ours and is ignored.
void collect(const fs::path& directory, const std::string& prefix, std::vector<Candidate>& out,
             std::vector<fs::path>& temps) {
    std::error_code error;
    fs::directory_iterator it(directory, error);
    if (error) {
        // No such tenant, or a piece directory removed since its parent was read.
        if (error == std::errc::no_such_file_or_directory) return;
        fail("list", directory, error.value());
    }
    for (; it != fs::directory_iterator(); it.increment(error)) {
        if (error) fail("list", directory, error.value());
        const std::string name = it->path().filename().string();
        const fs::file_type type = it->symlink_status(error).type();
        if (error) {
            // Removed since the directory was read.
            error.clear();
            continue;
        }
        if (name.rfind(temp_prefix, 0) == 0) {
            if (type == fs::file_type::regular) temps.push_back(it->path());
            continue;
        }
        if (name.empty() || name.front() != 's') continue;
        const std::string_view body = std::string_view(name).substr(1);
        if (type == fs::file_type::directory && body.size() == piece_chars && is_lower_hex(body) &&
            prefix.size() + piece_chars < max_session_hex_chars) {
            collect(it->path(), prefix + std::string(body), out, temps);
        } else if (type == fs::file_type::regular && body.size() > record_suffix.size() &&
                   body.substr(body.size() - record_suffix.size()) == record_suffix) {
            const std::string_view piece = body.substr(0, body.size() - record_suffix.size());
            std::string session_id;
            if (piece.size() <= piece_chars && is_lower_hex(piece) &&
                detail::from_hex(prefix + std::string(piece), session_id) &&
                detail::is_valid_session_id(session_id)) {
                out.push_back({std::move(session_id), it->path()});
            }
        }
    }
}

}  // namespace

FileSessionStore::FileSessionStore(fs::path directory) : directory_(std::move(directory)) {
    if (directory_.empty()) {
        throw SessionStoreError("file session store: the directory path is empty");
    }
    std::error_code error;
    fs::create_directories(directory_, error);
    if (error) fail("create the directory", directory_, error.value());
    const fs::path format = directory_ / format_file;
    const std::string expected = std::string(format_prefix) + std::to_string(format_version);
    const Fd fd = open_file(format, O_RDONLY | O_NOFOLLOW);
    if (!fd.valid()) {
        if (errno != ENOENT) fail("open", format, errno);
        // Concurrent openers all write the same text; the last rename wins harmlessly.
        write_atomically(directory_, format, expected + "\n", {});
        return;
    }
    std::string text(64, '\0');
    const ssize_t got = ::read(fd.get(), text.data(), text.size());
    if (got < 0) fail("read", format, errno);
    text.resize(static_cast<std::size_t>(got));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text == expected) return;
    std::uint64_t found = 0;
    if (text.rfind(format_prefix, 0) == 0 &&
        parse_number(std::string_view(text).substr(format_prefix.size()), found)) {
        throw SessionStoreError("file session store: " + directory_.string() +
                                " holds layout version " + std::to_string(found) +
                                ", newer than this ullm reads (" + std::to_string(format_version) +
                                "); upgrade ullm");
    }
    throw SessionStoreError("file session store: " + directory_.string() +
                            " is not a session store directory (its FORMAT file is not ours)");
}

std::shared_ptr<FileSessionStore> FileSessionStore::open(const fs::path& directory) {
    return std::make_shared<FileSessionStore>(directory);
}

std::optional<StoredSession> FileSessionStore::get(std::string_view tenant,
                                                   std::string_view session_id) {
    validate_session_key(tenant, session_id);
    const RecordPath path = record_path(tenant_directory(directory_, tenant), session_id);
    auto record = read_record(path.file, detail::to_hex(tenant), detail::to_hex(session_id), true);
    if (!record) return std::nullopt;
    return StoredSession{std::string(tenant), std::string(session_id), record->header.version,
                         std::move(record->snapshot),
                         detail::from_unix_ms(record->header.updated_at_ms)};
}

std::uint64_t FileSessionStore::put(std::string_view tenant, std::string_view session_id,
                                    std::string_view snapshot, std::uint64_t expected_version) {
    validate_session_key(tenant, session_id);
    const std::string tenant_hex = detail::to_hex(tenant);
    const std::string session_hex = detail::to_hex(session_id);
    const std::vector<fs::path> tenant_dirs = tenant_directories(directory_, tenant);
    for (const auto& directory : tenant_dirs) make_directory(directory);
    const TenantLock lock = TenantLock::acquire(tenant_dirs.back());
    if (!lock.held()) fail("lock", tenant_dirs.back(), ENOENT);

    const RecordPath path = record_path(tenant_dirs.back(), session_id);
    const auto current = read_record(path.file, tenant_hex, session_hex, true);
    const std::uint64_t actual = current ? current->header.version : 0;
    if (actual != expected_version) detail::throw_conflict(expected_version, actual);

    const std::uint64_t version = expected_version + 1;
    const std::string fields = header_fields(version, detail::to_unix_ms(detail::now_ms()),
                                             tenant_hex, session_hex, snapshot.size());
    const std::string head = fields + crc_line(crc32(crc32(0, fields), snapshot));
    for (const auto& directory : path.piece_directories) make_directory(directory);
    write_atomically(path.directory, path.file, head, snapshot);
    return version;
}

bool FileSessionStore::remove(std::string_view tenant, std::string_view session_id) {
    validate_session_key(tenant, session_id);
    const fs::path tenant_dir = tenant_directory(directory_, tenant);
    const TenantLock lock = TenantLock::acquire(tenant_dir);
    if (!lock.held()) return false;  // The tenant never wrote anything.
    const RecordPath path = record_path(tenant_dir, session_id);
    if (::unlink(path.file.c_str()) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return false;
        fail("remove", path.file, errno);
    }
    sync_directory(path.directory);
    // Drop the piece directories a long session id needed, while they are empty.
    for (auto it = path.piece_directories.rbegin(); it != path.piece_directories.rend(); ++it) {
        if (::rmdir(it->c_str()) != 0) break;
    }
    return true;
}

SessionPage FileSessionStore::list(std::string_view tenant, const SessionListOptions& options) {
    const detail::ListQuery query = detail::parse_list_query(tenant, options);
    const fs::path tenant_dir = tenant_directory(directory_, tenant);
    std::vector<Candidate> candidates;
    std::vector<fs::path> temps;
    collect(tenant_dir, {}, candidates, temps);

    if (!temps.empty()) {
        // Holding the tenant's lock, no writer is between creating and renaming a temporary
        // file, so every one seen is left over from a crash. Best effort: never wait for it.
        try {
            const TenantLock lock = TenantLock::acquire(tenant_dir, false);
            if (lock.held()) {
                for (const auto& temp : temps) ::unlink(temp.c_str());
            }
        } catch (const SessionStoreError&) {
            // A read-only store lists fine; its leftovers stay until a writer can clean up.
        }
    }

    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.session_id < b.session_id; });
    auto first = std::upper_bound(
        candidates.begin(), candidates.end(), query.after,
        [](const std::string& after, const Candidate& c) { return after < c.session_id; });
    const std::string tenant_hex = detail::to_hex(tenant);
    std::vector<SessionSummary> rows;
    for (auto it = first; it != candidates.end() && rows.size() <= query.limit; ++it) {
        const auto record =
            read_record(it->file, tenant_hex, detail::to_hex(it->session_id), false);
        if (!record) continue;  // Removed since the directory was read.
        rows.push_back(SessionSummary{it->session_id, record->header.version,
                                      detail::from_unix_ms(record->header.updated_at_ms)});
    }
    return detail::finish_page(std::move(rows), query.limit);
}

}  // namespace ullm
