#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace talaria {
namespace {

std::string Number(double x) { return MetricNumber(x); }

void Counter(std::string& out, const std::string& name, const std::string& help, std::uint64_t value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
         std::to_string(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1) {}

void Histogram::Observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<std::uint64_t>(std::llround(std::max(0.0, value) * 1e6)),
                        std::memory_order_relaxed);
}

void Histogram::Render(std::string& out, const std::string& name, const std::string& help) const {
  FamilyHeader(out, name, "histogram", help);
  RenderSamples(out, name, "");
}

void Histogram::RenderSamples(std::string& out, const std::string& name, const std::string& labels) const {
  const std::string open = labels.empty() ? "{" : "{" + labels + ",";
  const std::string plain = labels.empty() ? "" : "{" + labels + "}";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    out += name + "_bucket" + open + "le=\"" + Number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  cumulative += buckets_.back().load(std::memory_order_relaxed);
  out += name + "_bucket" + open + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += name + "_sum" + plain + " " + Number(static_cast<double>(sum_micros_.load()) * 1e-6) + "\n";
  out += name + "_count" + plain + " " + std::to_string(count_.load()) + "\n";
}

void LabeledHistogram::Observe(const std::string& label, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& h = values_[label];
  if (h == nullptr) h = std::make_unique<Histogram>(bounds_);
  h->Observe(value);
}

void LabeledHistogram::RenderSamples(std::string& out, const std::string& name, const std::string& labels,
                                     const std::string& label_name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [value, h] : values_) {
    h->RenderSamples(out, name, labels + (labels.empty() ? "" : ",") + label_name + "=\"" + value + "\"");
  }
}

std::string MetricNumber(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  return buf;
}

void FamilyHeader(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void LabeledCounter::Add(const std::string& label, std::uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[label] += n;
}

std::uint64_t LabeledCounter::Get(const std::string& label) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(label);
  return it == values_.end() ? 0 : it->second;
}

void LabeledCounter::Render(std::string& out, const std::string& name, const std::string& label_name,
                            const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [label, value] : values_) {
    // A label of "a,b" with label_name "x,y" becomes {x="a",y="b"}.
    std::string labels;
    std::size_t ls = 0, ns = 0;
    while (ls <= label.size() && ns <= label_name.size()) {
      auto lc = label.find(',', ls);
      auto nc = label_name.find(',', ns);
      if (lc == std::string::npos) lc = label.size();
      if (nc == std::string::npos) nc = label_name.size();
      if (!labels.empty()) labels += ",";
      labels += label_name.substr(ns, nc - ns) + "=\"" + label.substr(ls, lc - ls) + "\"";
      ls = lc + 1;
      ns = nc + 1;
    }
    out += name + "{" + labels + "} " + std::to_string(value) + "\n";
  }
}

ServerMetrics::ServerMetrics()
    : ttft_s({0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 60}),
      tpot_s({0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1}),
      call_s({0.1, 0.5, 1, 2, 5, 10, 20, 60, 120, 300}),
      session_s({1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}) {}

std::string ServerMetrics::Render() const {
  std::string out;
  requests.Render(out, "talaria_http_requests_total", "endpoint,status", "HTTP requests by endpoint and status");
  Counter(out, "talaria_calls_accepted_total", "calls placed on an instance", accepted.load());
  Counter(out, "talaria_calls_completed_total", "accepted calls that finished", completed.load());
  Counter(out, "talaria_calls_failed_total", "accepted calls that ended in an error", failed.load());
  {
    const std::uint64_t a = accepted.load(), c = completed.load(), f = failed.load();
    out += "# HELP talaria_calls_in_flight accepted calls not yet completed or failed\n"
           "# TYPE talaria_calls_in_flight gauge\ntalaria_calls_in_flight " +
           std::to_string(a >= c + f ? a - c - f : 0) + "\n";
  }
  out += "# HELP talaria_http_connections client connections open now\n"
         "# TYPE talaria_http_connections gauge\ntalaria_http_connections " +
         std::to_string(connections.load()) + "\n";
  rejected.Render(out, "talaria_calls_rejected_total", "reason", "calls no instance could take, by reason");
  Counter(out, "talaria_calls_waited_total", "calls that waited at the gateway for an instance to take them",
          waited.load());
  out += "# HELP talaria_calls_waiting calls waiting at the gateway now\n"
         "# TYPE talaria_calls_waiting gauge\ntalaria_calls_waiting " +
         std::to_string(waiting.load()) + "\n";
  kv_source.Render(out, "talaria_kv_source_total", "source", "where a call's prefix KV came from");
  switches.Render(out, "talaria_model_switches_total", "path", "model switches by path (d2d, partial, h2d)");
  Counter(out, "talaria_lease_hits_total", "returns routed by their session's lease", lease_hits.load());
  Counter(out, "talaria_lease_misses_total", "returns placed by cost", lease_misses.load());
  Counter(out, "talaria_calls_retried_total", "calls placed again after their instance was unreachable",
          retries.load());
  unreachable.Render(out, "talaria_instance_unreachable_total", "instance",
                     "placements that found their instance unreachable");
  ttft_s.Render(out, "talaria_ttft_seconds", "time to first token (emulated seconds)");
  tpot_s.Render(out, "talaria_tpot_seconds", "mean time per output token after the first (emulated seconds)");
  call_s.Render(out, "talaria_call_seconds", "call latency, arrival to last token (emulated seconds)");
  session_s.Render(out, "talaria_session_seconds",
                   "session completion time (SCT), first call's arrival to last call's end, observed once the "
                   "session has been idle for serve.session_idle_s (emulated seconds)");
  return out;
}

}  // namespace talaria
