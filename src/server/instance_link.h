// How the gateway reaches an instance: in-process (`talaria serve`), or
// over HTTP to an instance server (`talaria gateway`, server/remote_instance.h).
// The gateway routes, then hands the placed call to the chosen link; the
// link relays output to a sink and answers telemetry polls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "telemetry/telemetry.h"
#include "server/instance_service.h"
#include "server/service.h"

namespace talaria {

// A placed call as the gateway hands it to an instance.
struct LinkCall {
  std::int64_t id = 0;  // the gateway's id (for Cancel)
  std::string model;
  std::vector<std::int32_t> prompt;  // token ids
  std::int64_t max_tokens = 0;
  // Whether the client streams: a non-streaming call is forwarded without
  // streaming too (one answer to relay instead of an event per token).
  bool stream = true;
  std::string session_id;      // as the client gave it (unscoped); empty: none
  std::string scoped_session;  // the gateway's scoped id (the same scoping the instance applies)
  std::string api_key;         // the client's key, forwarded (it scopes the session there too)
  bool session_end = false;    // agent hint: the session's last call
  double expected_tool_s = -1;  // agent hint: its tool's seconds before the next call (-1: none)
};

// The error a link reports when the instance could not be reached, or went
// silent (a hung instance): the gateway retries such a call on another
// instance if nothing has been streamed to the client yet.
inline constexpr const char* kUnreachableCode = "instance_unreachable";
ApiError UnreachableError(const std::string& instance, const std::string& why);
// The error a link reports when the instance took the request and then the
// connection broke (the instance died with it): 502, never retried, since
// the request itself may be what killed it and would kill the next one.
inline constexpr const char* kInstanceFailedCode = "instance_failed";
ApiError InstanceFailedError(const std::string& instance, const std::string& why);

class InstanceLink {
 public:
  virtual ~InstanceLink() = default;
  virtual void Start() {}
  virtual void Stop() {}
  virtual const std::string& name() const = 0;

  // Runs the call there; the sink hears its output and exactly one end.
  virtual void Submit(std::shared_ptr<const LinkCall> call, std::shared_ptr<CompletionSink> sink) = 0;
  // Drops a call that has not ended; false when it already ended.
  virtual bool Cancel(std::int64_t id) = 0;
  // Asks for a fresh telemetry snapshot; `done` gets it, or nullopt when
  // the instance did not answer. `done` may run on any thread, possibly
  // before PollTelemetry returns, and must not block.
  virtual void PollTelemetry(std::function<void(std::optional<InstanceTelemetry>)> done) = 0;
  // The instance's recent slot timeline after segment `after`, one entry in
  // server/timeline_json.h's form (a remote link's from its last polls;
  // asking keeps it polling for a while).
  virtual nlohmann::json Timeline(std::uint64_t after) = 0;
};

// An instance in this process.
class LocalInstanceLink final : public InstanceLink {
 public:
  explicit LocalInstanceLink(std::unique_ptr<InstanceService> service);
  void Start() override { service_->Start(); }
  void Stop() override { service_->Stop(); }
  const std::string& name() const override { return service_->name(); }
  void Submit(std::shared_ptr<const LinkCall> call, std::shared_ptr<CompletionSink> sink) override;
  bool Cancel(std::int64_t id) override;
  void PollTelemetry(std::function<void(std::optional<InstanceTelemetry>)> done) override {
    done(service_->Snapshot());
  }
  nlohmann::json Timeline(std::uint64_t after) override { return service_->TimelineEntry(after); }
  InstanceService& service() { return *service_; }

 private:
  class IdReleasingSink;  // relays to the gateway's sink; drops the id mapping at the end
  std::unique_ptr<InstanceService> service_;
  std::mutex mu_;
  std::unordered_map<std::int64_t, std::int64_t> live_;  // gateway id -> service id
};

}  // namespace talaria
