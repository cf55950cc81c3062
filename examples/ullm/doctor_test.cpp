// `ullm doctor` against an in-process server and a port nobody listens on: one line per check,
// the key never shown nor sent, exit 1 when a configured server does not answer.
//   ullm_cli_doctor_test PATH_TO_ULLM SCRATCH_DIR

#include <cstdio>
#include <string>

#include "cli_check.hpp"
#include "support/test_server.hpp"

namespace {

using ullm_cli_test::check;
using ullm_cli_test::failures;
using ullm_cli_test::run;

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: ullm_cli_doctor_test PATH_TO_ULLM SCRATCH_DIR\n");
        return 64;
    }
    const std::string ullm = argv[1];
    const std::string scratch = std::string(argv[2]) + "/doctor-test";
    ullm::test::TestServer server;
    const std::string secret = "sk-doctor-secret-0123456789";
    // A clean environment: only what the test sets (and PATH, for the shell).
    const std::string environment =
        "env -i PATH=\"$PATH\" HOME='" + scratch + "' OPENAI_API_KEY=" + secret +
        " OPENAI_BASE_URL=" + server.base_url() + "/v1 OLLAMA_HOST=127.0.0.1:9 ";
    const std::string store = " --store '" + scratch + "/data/sessions.db'";

    int status = -1;
    std::string out =
        run("rm -rf '" + scratch + "' && mkdir -p '" + scratch + "' && " + environment + "'" +
                ullm + "' doctor --timeout 3000" + store + " 2>&1",
            status);
    check(status == 1,
          "exit 1 when a configured server does not answer (got " + std::to_string(status) + ")");
    check(has(out, "ok   OPENAI_API_KEY is set: openai/… go to " + server.base_url() +
                       "/v1/chat/completions, openai-responses/… to " + server.base_url() +
                       "/v1/responses (OPENAI_BASE_URL is set)"),
          "the key's routes and where they go");
    check(has(out, "--   ANTHROPIC_API_KEY is not set"), "a missing key is said");
    check(has(out, "ok   openai is reachable: " + server.base_url() + " (HTTP "),
          "the server answers");
    check(has(out, "FAIL ollama is not reachable: http://127.0.0.1:9: [ullm.connection_failed]"),
          "a configured server that does not answer fails");
    check(has(out, "session store " + scratch + "/data/sessions.db: not created yet; " + scratch +
                       " is writable"),
          "the store's folder is checked without creating it");
    check(has(out, "\n1 problem found\n"), "the summary counts the failure");
    check(!has(out, secret), "the key is never printed");
    const auto requests = server.requests();
    check(requests.size() == 1 && requests[0].method == "GET" && requests[0].target == "/" &&
              !requests[0].has_header("authorization"),
          "one bare GET of the root, without the key");

    // Nothing unreachable: no problems. And --no-network contacts nobody.
    out = run(environment + "OLLAMA_HOST=" + server.base_url() + " '" + ullm + "' doctor" + store +
                  " 2>&1",
              status);
    check(status == 0 && has(out, "\nno problems found\n"), "exit 0 when everything answers");
    out = run(environment + "'" + ullm + "' doctor --no-network" + store + " 2>&1", status);
    check(status == 0 && has(out, "servers not contacted (--no-network)"),
          "--no-network contacts no server");
    check(server.requests().size() == 2, "(so the server saw one more request only)");
    out = run("'" + ullm + "' doctor --timeout 0 2>&1", status);
    check(status == 64 && has(out, "--timeout needs milliseconds"), "a bad --timeout is usage");
    if (failures == 0) std::printf("all doctor checks passed\n");
    if (failures != 0) std::printf("output of the last run:\n%s\n", out.c_str());
    return failures == 0 ? 0 : 1;
}
