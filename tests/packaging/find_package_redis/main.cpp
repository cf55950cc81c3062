// A consumer of the installed ullm::redis component: it links, and an invalid key prefix is
// refused with the store's error code before any connection.
#include <ullm/core/error.hpp>
#include <ullm/store/redis_session_store.hpp>

#include <iostream>

int main() {
    try {
        (void)ullm::RedisSessionStore::open({.key_prefix = "not a prefix"});
    } catch (const ullm::SessionStoreError& error) {
        std::cout << error.code() << "\n";
        return error.code() == "session_store_failed" ? 0 : 1;
    }
    return 1;
}
