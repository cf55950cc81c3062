// Fuzz target: the `ullm decode` subcommand (examples/ullm/decode.cpp), called as the program
// calls it: a provider name, a status and the path of the file to decode.
//
// The payload is the file. It is written to an in-memory file whose /proc/self/fd path is
// passed to `ullm_cli::decode`; the program's standard output goes to /dev/null. Nothing may
// escape `decode` (it reports a ullm::Error itself) and it must exit with 0 (decoded) or 2
// (not a transcript).
//
// Header bytes: options picks the provider name, the chunking byte the status (as
// `--status`). The seed is unused.

#include "decode.hpp"

#include "fuzz_support.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace {

const char* const providers[] = {"openai",    "openai-chat", "openai-responses",
                                 "anthropic", "gemini",      "xai"};
constexpr int statuses[] = {200, 200, 200, 201, 400, 401, 403, 404, 413, 422, 429, 500, 503, 529};

int file_descriptor = -1;
std::string file_path;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    file_descriptor = memfd_create("ullm-fuzz-decode", 0);
    if (file_descriptor < 0) {
        std::perror("memfd_create");
        return 1;
    }
    file_path = "/proc/self/fd/" + std::to_string(file_descriptor);
    // decode prints its events and response; libFuzzer reports on stderr.
    const int null = open("/dev/null", O_WRONLY);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0) {
        std::perror("/dev/null");
        return 1;
    }
    close(null);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input || file_descriptor < 0) return 0;
    if (ftruncate(file_descriptor, 0) != 0 ||
        pwrite(file_descriptor, input->payload.data(), input->payload.size(), 0) !=
            static_cast<ssize_t>(input->payload.size())) {
        ullm::fuzz::finding("cannot write the in-memory file (harness failure)");
    }
    const std::string provider = providers[input->options % std::size(providers)];
    const int status = statuses[input->chunking % std::size(statuses)];
    int exit_status = -1;
    const auto failure =
        ullm::fuzz::capture([&] { exit_status = ullm_cli::decode(provider, status, file_path); });
    std::fflush(stdout);
    if (failure) {
        ullm::fuzz::finding("a ullm::Error escaped ullm decode",
                            "provider " + provider + ", status " + std::to_string(status) + "\n" +
                                ullm::fuzz::describe(failure));
    }
    if (exit_status != 0 && exit_status != 2) {
        ullm::fuzz::finding("ullm decode exited with " + std::to_string(exit_status),
                            "provider " + provider + ", status " + std::to_string(status));
    }
    return 0;
}
