#include "support/redis_server.hpp"

#include "support/server_process.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace ullm::test {

namespace {

std::string find_redis() {
    if (const char* env = std::getenv("ULLM_REDIS_SERVER"); env != nullptr && *env != '\0') {
        return env;
    }
    for (const char* candidate : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
        if (std::filesystem::exists(candidate)) return candidate;
    }
    throw std::runtime_error(
        "redis-server was not found in /usr/bin or /usr/local/bin: install Debian's "
        "redis-server package (.ci/deps.sh does) or set ULLM_REDIS_SERVER");
}

// A socket connected to 127.0.0.1:`port`, or -1.
int connect_loopback(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

RedisServer& RedisServer::instance() {
    static RedisServer server;
    return server;
}

RedisServer::RedisServer() {
    dir_ = make_temp_dir("ullm-redis");
    start_once();
}

void RedisServer::start_once() {
    const std::string binary = find_redis();
    const std::string log = dir_ + "/redis.log";
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (port_ == 0 || attempt > 0) port_ = free_loopback_port();
        std::vector<std::string> argv{binary,   "--port",       std::to_string(port_),
                                      "--bind", "127.0.0.1",    "--save",
                                      "",       "--appendonly", "no",
                                      "--dir",  dir_,           "--logfile",
                                      log,      "--daemonize",  "no"};
        pid_ = ::fork();
        if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
        if (pid_ == 0) {
            std::vector<char*> args;
            for (auto& arg : argv) args.push_back(arg.data());
            args.push_back(nullptr);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        // Ready when it answers PING; gone when it exited (a port taken meanwhile).
        for (int wait = 0; wait < 500; ++wait) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            if (raw("*1\r\n$4\r\nPING\r\n") == "+PONG") return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (pid_ > 0) kill();
    }
    throw std::runtime_error("redis-server did not start 5 times; its log: " + read_text_file(log));
}

std::string RedisServer::raw(const std::string& resp) const {
    const int fd = connect_loopback(port_);
    if (fd < 0) return "";
    (void)::send(fd, resp.data(), resp.size(), MSG_NOSIGNAL);
    std::string line;
    char c = 0;
    while (::recv(fd, &c, 1, 0) == 1 && c != '\r') line += c;
    ::close(fd);
    return line;
}

std::string RedisServer::fresh_prefix() {
    return "t" + std::to_string(++prefixes_);
}

void RedisServer::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
}

void RedisServer::start() {
    if (pid_ <= 0) start_once();
}

RedisServer::~RedisServer() {
    kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
}

}  // namespace ullm::test
