#include "support/postgres_server.hpp"

#include "support/server_process.hpp"

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace ullm::test {

namespace {

// Where Debian puts the server binaries; ULLM_PG_BIN overrides.
std::string find_bin() {
    if (const char* env = std::getenv("ULLM_PG_BIN"); env != nullptr && *env != '\0') return env;
    for (const char* candidate : {"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin",
                                  "/usr/lib/postgresql/15/bin"}) {
        if (std::filesystem::exists(std::string(candidate) + "/initdb")) return candidate;
    }
    throw std::runtime_error(
        "PostgreSQL's server binaries (initdb, pg_ctl, postgres) were not found in "
        "/usr/lib/postgresql/<version>/bin: install Debian's postgresql package (.ci/deps.sh "
        "does) or set ULLM_PG_BIN");
}

// Runs `argv` (as `user` through setpriv when we are root), its output appended to `log`;
// returns its exit status.
int run(std::vector<std::string> argv, const std::string& user, const std::string& log) {
    if (!user.empty()) {
        argv.insert(argv.begin(),
                    {"setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups", "--"});
    }
    const pid_t pid = ::fork();
    if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (pid == 0) {
        std::vector<char*> args;
        for (auto& arg : argv) args.push_back(arg.data());
        args.push_back(nullptr);
        if (!log.empty()) {
            if (std::FILE* out = std::fopen(log.c_str(), "a"); out != nullptr) {
                ::dup2(::fileno(out), 1);
                ::dup2(::fileno(out), 2);
            }
        }
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

}  // namespace

PostgresServer& PostgresServer::instance() {
    static PostgresServer server;
    return server;
}

PostgresServer::PostgresServer() : bin_(find_bin()) {
    dir_ = make_temp_dir("ullm-pg");
    if (::geteuid() == 0) {
        const passwd* entry = ::getpwnam("postgres");
        if (entry == nullptr) entry = ::getpwnam("nobody");
        if (entry == nullptr) throw std::runtime_error("no postgres or nobody user to run as");
        user_ = entry->pw_name;
        if (::chown(dir_.c_str(), entry->pw_uid, entry->pw_gid) != 0) {
            throw std::system_error(errno, std::generic_category(), "chown " + dir_);
        }
    }
    const std::string log = dir_ + "/initdb.log";
    // -N: no fsync of the new files; trust: the cluster listens on loopback for this process.
    if (run({bin_ + "/initdb", "-D", dir_ + "/data", "-U", "ullm", "--auth=trust", "-E", "UTF8",
             "--locale=C", "-N"},
            user_, log) != 0) {
        throw std::runtime_error("initdb failed; its output: " + read_text_file(log));
    }
    start_once();
}

void PostgresServer::start_once() {
    const std::string log = dir_ + "/server.log";
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (port_ == 0 || attempt > 0) port_ = free_loopback_port();
        const std::string options = "-c listen_addresses=127.0.0.1 -p " + std::to_string(port_) +
                                    " -c unix_socket_directories=" + dir_ +
                                    " -c fsync=off -c full_page_writes=off"
                                    " -c max_connections=60";
        if (run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-l", log, "-w", "-t", "30", "-o", options,
                 "start"},
                user_, dir_ + "/pg_ctl.log") == 0) {
            running_ = true;
            return;
        }
    }
    throw std::runtime_error("pg_ctl start failed 5 times; the server log: " + read_text_file(log));
}

void PostgresServer::start() {
    if (!running_) start_once();
}

void PostgresServer::kill() {
    if (!running_) return;
    run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"}, user_,
        dir_ + "/pg_ctl.log");
    running_ = false;
}

namespace {

// The postmaster of the cluster in `data` and the processes it started.
std::vector<pid_t> server_processes(const std::string& data) {
    std::ifstream pid_file(data + "/postmaster.pid");
    pid_t postmaster = 0;
    if (!(pid_file >> postmaster) || postmaster <= 0) {
        throw std::runtime_error("no postmaster.pid in " + data);
    }
    std::vector<pid_t> pids{postmaster};
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream status(entry.path() / "status");
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("PPid:", 0) == 0) {
                if (std::stol(line.substr(5)) == postmaster) pids.push_back(std::stoi(name));
                break;
            }
        }
    }
    return pids;
}

void signal_all(const std::vector<pid_t>& pids, int signal) {
    for (const pid_t pid : pids) ::kill(pid, signal);
}

}  // namespace

void PostgresServer::pause() {
    signal_all(server_processes(dir_ + "/data"), SIGSTOP);
}

void PostgresServer::resume() {
    signal_all(server_processes(dir_ + "/data"), SIGCONT);
}

PostgresServer::~PostgresServer() {
    kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

std::string PostgresServer::connection_string(const std::string& dbname) const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=ullm dbname=" + dbname;
}

std::string PostgresServer::create_database() {
    const std::string name = "t" + std::to_string(++databases_);
    sql("postgres", "CREATE DATABASE " + name);
    return name;
}

void PostgresServer::sql(const std::string& dbname, const std::string& statement) const {
    const std::string log = dir_ + "/psql.log";
    if (run({bin_ + "/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", connection_string(dbname),
             "-c", statement},
            "", log) != 0) {
        throw std::runtime_error("psql failed on `" + statement + "`: " + read_text_file(log));
    }
}

}  // namespace ullm::test
