#include <ullm/http/transport.hpp>

#include <ullm/core/error.hpp>

#include <stop_token>
#include <thread>
#include <utility>

namespace ullm {

namespace {

// A request of the default `Transport::start`: `send` on a thread of its own.
class ThreadRequest final : public PendingRequest {
public:
    void cancel() noexcept override { stop_.request_stop(); }
    std::stop_token token() const noexcept { return stop_.get_token(); }

private:
    std::stop_source stop_;
};

}  // namespace

std::shared_ptr<PendingRequest> Transport::start(const HttpRequest& request,
                                                 ResponseHandler on_done) {
    auto pending = std::make_shared<ThreadRequest>();
    // Detached: the handler may drop the last reference to whoever would join the thread. After
    // the handler returns, the thread touches nothing but its own captures.
    std::thread([this, request, stop = pending->token(), on_done = std::move(on_done)]() mutable {
        HttpResponse response;
        std::exception_ptr error;
        try {
            response = send(request, stop);
        } catch (...) {
            error = std::current_exception();
        }
        ResponseHandler handler = std::move(on_done);
        handler(std::move(response), std::move(error));
    }).detach();
    return pending;
}

}  // namespace ullm
