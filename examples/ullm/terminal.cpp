#include "terminal.hpp"

#include <pthread.h>
#include <chrono>
#include <csignal>
#include <cstdio>

namespace ullm_cli {

namespace {

std::mutex handler_mutex;
std::function<void()> current_handler;

}  // namespace

void Interrupts::install() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set] {
        for (;;) {
            int signal = 0;
            if (sigwait(&set, &signal) != 0) continue;
            std::function<void()> handler;
            {
                std::lock_guard lock(handler_mutex);
                handler = current_handler;
            }
            if (handler) handler();
        }
    }).detach();
}

void Interrupts::on_interrupt(std::function<void()> handler) {
    std::lock_guard lock(handler_mutex);
    current_handler = std::move(handler);
}

Spinner::Spinner(bool enabled) {
    if (!enabled) return;
    running_ = true;
    thread_ = std::thread([this] {
        static const char* const frames[] = {"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"};
        for (std::size_t i = 0; running_; ++i) {
            std::fprintf(stdout, "\r%s thinking…", frames[i % 10]);
            std::fflush(stdout);
            for (int wait = 0; wait < 8 && running_; ++wait) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
    });
}

Spinner::~Spinner() {
    stop();
}

void Spinner::stop() {
    if (!thread_.joinable()) return;
    running_ = false;
    thread_.join();
    std::fputs("\r\033[K", stdout);
    std::fflush(stdout);
}

}  // namespace ullm_cli
