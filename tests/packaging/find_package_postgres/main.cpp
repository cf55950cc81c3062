// A consumer of the installed ullm::postgres component: it links, and a malformed connection
// string is refused with the store's error code before any connection.
#include <ullm/core/error.hpp>
#include <ullm/store/postgres_session_store.hpp>

#include <iostream>

int main() {
    try {
        (void)ullm::PostgresSessionStore::open({.connection_string = "host='unterminated"});
    } catch (const ullm::SessionStoreError& error) {
        std::cout << error.code() << "\n";
        return error.code() == "session_store_failed" ? 0 : 1;
    }
    return 1;
}
