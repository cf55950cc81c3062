// The test runner's main(), for Catch2 v2 (Debian 12) and v3 alike. After the run, when
// ULLM_REPORTED_CODES_DIR is set (ctest sets it), it writes the error codes this process
// reported, one per line, to <dir>/<pid>.txt; the `[.reported_codes]` test reads them all to
// hold docs/errors.md to the codes the tests raise (see error_codes_test.cpp).
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <ullm/core/error_code.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace {

void write_reported_codes() {
    const char* dir = std::getenv("ULLM_REPORTED_CODES_DIR");
    if (dir == nullptr || *dir == '\0') return;
    std::error_code ignored;
    std::filesystem::create_directories(dir, ignored);
    const auto path = std::filesystem::path(dir) / (std::to_string(::getpid()) + ".txt");
    std::ofstream out(path);
    for (const auto code : ullm::all_error_codes()) {
        if (ullm::detail::was_reported(code)) out << ullm::to_string(code) << '\n';
    }
    if (!out) std::fprintf(stderr, "could not write the reported error codes to %s\n", dir);
}

}  // namespace

int main(int argc, char* argv[]) {
    const int result = Catch::Session().run(argc, argv);
    write_reported_codes();
    return result;
}
