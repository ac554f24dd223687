// The router tests' fixture: instances serving tiny models "m" and "n",
// fed hand-made snapshots at a manual notion of now.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "instance/test_profiles.h"
#include "router/cluster_view.h"
#include "router/router.h"

namespace talaria {

// Two or more instances serving the tiny model "m" (and "n"), driven by
// hand-made snapshots and a manual notion of now.
class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiles_.Add(testing::TinyProfile("m"));
    profiles_.Add(testing::TinyProfile("n"));
  }

  std::unique_ptr<Router> Make(RouterOptions o, int instances = 2) {
    std::vector<std::string> names;
    std::vector<std::int32_t> tps;
    for (int i = 0; i < instances; ++i) {
      names.push_back("i" + std::to_string(i));
      tps.push_back(1);
    }
    return std::make_unique<Router>(o, names, tps, profiles_);
  }

  // A snapshot where `resident` models are open, `active` is active, with
  // the given queued work on "m".
  static InstanceTelemetry Snap(std::uint64_t version, double at_s, double queued_m_s = 0,
                                bool m_resident = true, bool n_resident = true) {
    InstanceTelemetry t;
    t.version = version;
    t.taken_at = AtSeconds(at_s);
    ModelTelemetry m;
    m.name = "m";
    m.resident = m_resident;
    m.active = m_resident;
    m.queued_work_s = queued_m_s;
    m.full_open_s = 10.0;
    m.switch_in_s = 0.5;
    m.weight_bytes_per_rank = 8 * kGiB;
    ModelTelemetry n = m;
    n.name = "n";
    n.resident = n_resident;
    n.active = false;
    n.queued_work_s = 0;
    t.models = {m, n};
    t.round_bound_s = 18;
    t.kv_total_bytes = 40 * kGiB;
    t.kv_free_bytes = 40 * kGiB;
    t.staging_slack_bytes = 20 * kGiB;
    return t;
  }

  static RouteRequest Req(const std::string& session, bool continuation = true,
                          const std::string& model = "m") {
    RouteRequest r;
    r.session_id = session;
    r.model = model;
    r.prompt_tokens = 1000;
    r.prefix_tokens = continuation ? 900 : 0;
    r.continuation = continuation;
    return r;
  }

  // A session record of model "m" as another replica wrote it, with a
  // lease until `lease_expires_s` when that is >= 0.
  static SharedSession Record(std::int32_t instance, std::int64_t kv_tokens, double done_s,
                              double lease_expires_s = -1) {
    SharedSession s;
    s.instance = instance;
    s.model = "m";
    s.kv_tokens = kv_tokens;
    s.done = AtSeconds(done_s);
    s.lease = lease_expires_s >= 0;
    if (s.lease) s.lease_expires = AtSeconds(lease_expires_s);
    return s;
  }

  void Feed(Router& r, int instances, double at_s, double queued0 = 0, double queued1 = 0) {
    for (int i = 0; i < instances; ++i) {
      r.OnTelemetry(i, Snap(++version_, at_s, i == 0 ? queued0 : queued1), AtSeconds(at_s));
    }
  }

  // A router over two fed instances with `policy` leases of `tau_s`.
  std::unique_ptr<Router> MakeFed(LeasePolicy policy, double tau_s) {
    RouterOptions o;
    o.lease_tau_s = tau_s;
    o.lease = policy;
    auto r = Make(o);
    Feed(*r, 2, 0);
    return r;
  }

  ProfileSet profiles_;
  std::uint64_t version_ = 0;
};

}  // namespace talaria
