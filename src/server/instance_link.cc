#include "server/instance_link.h"

namespace talaria {

namespace {

ApiError LinkError(int status, const char* code, std::string message) {
  ApiError e;
  e.status = status;
  e.type = "server_error";
  e.code = code;
  e.message = std::move(message);
  return e;
}

}  // namespace

ApiError UnreachableError(const std::string& instance, const std::string& why) {
  return LinkError(503, kUnreachableCode, "instance '" + instance + "' is unreachable: " + why);
}

ApiError InstanceFailedError(const std::string& instance, const std::string& why) {
  return LinkError(502, kInstanceFailedCode, "instance '" + instance + "' failed while serving the call: " + why);
}

// Relays to the gateway's sink and forgets the call's id mapping at its end.
class LocalInstanceLink::IdReleasingSink final : public CompletionSink {
 public:
  IdReleasingSink(LocalInstanceLink& link, std::int64_t id, std::shared_ptr<CompletionSink> sink)
      : link_(link), id_(id), sink_(std::move(sink)) {}
  void OnDelta(const std::string& text) override { sink_->OnDelta(text); }
  void OnDone(const Usage& usage, const std::string& finish_reason) override {
    Drop();
    sink_->OnDone(usage, finish_reason);
  }
  void OnError(const ApiError& error) override {
    Drop();
    sink_->OnError(error);
  }

 private:
  void Drop() {
    std::lock_guard<std::mutex> lock(link_.mu_);
    link_.live_.erase(id_);
  }
  LocalInstanceLink& link_;
  std::int64_t id_;
  std::shared_ptr<CompletionSink> sink_;
};

LocalInstanceLink::LocalInstanceLink(std::unique_ptr<InstanceService> service) : service_(std::move(service)) {}

void LocalInstanceLink::Submit(std::shared_ptr<const LinkCall> call, std::shared_ptr<CompletionSink> sink) {
  // Hold the lock across the submission so a fast end cannot erase the
  // mapping before it is written.
  std::lock_guard<std::mutex> lock(mu_);
  const std::int64_t local = service_->SubmitTokens(call->model, call->prompt, call->max_tokens, call->scoped_session,
                                                    std::make_shared<IdReleasingSink>(*this, call->id, std::move(sink)),
                                                    AgentHints{call->expected_tool_s, call->session_end});
  live_[call->id] = local;
}

bool LocalInstanceLink::Cancel(std::int64_t id) {
  std::int64_t local = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return false;
    local = it->second;
    live_.erase(it);
  }
  return service_->Cancel(local);
}

}  // namespace talaria
