// Prometheus text-format metrics for the servers: counters and fixed-bucket
// histograms, lock-free to update from any thread. Render() writes the
// exposition format (text/plain; version=0.0.4).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace talaria {

class Histogram {
 public:
  // Upper bounds in seconds, ascending; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // The whole family: HELP, TYPE and the samples.
  void Render(std::string& out, const std::string& name, const std::string& help) const;
  // The samples alone, each with `labels` (`a="x",b="y"`, or empty) before
  // le: for a family whose label sets are several histograms.
  void RenderSamples(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> buckets_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_micros_{0};
};

// Counters keyed by a label value, created on first use.
class LabeledCounter {
 public:
  void Add(const std::string& label, std::uint64_t n = 1);
  std::uint64_t Get(const std::string& label) const;
  void Render(std::string& out, const std::string& name, const std::string& label_name,
              const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> values_;
};

// Histograms keyed by a label value, created on first use with the same
// bounds (label values must come from a bounded set: paths, phases).
class LabeledHistogram {
 public:
  explicit LabeledHistogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {}
  void Observe(const std::string& label, double value);
  // Samples of every label value as `label_name`="value", after `labels`
  // (`a="x",b="y"`, or empty).
  void RenderSamples(std::string& out, const std::string& name, const std::string& labels,
                     const std::string& label_name) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Histogram>> values_;
};

// A sample's value as the exposition format writes it (15 significant
// digits: byte counts stay exact).
std::string MetricNumber(double x);

// The HELP and TYPE lines that open a metric family.
void FamilyHeader(std::string& out, const std::string& name, const char* type, const std::string& help);

struct ServerMetrics {
  ServerMetrics();
  LabeledCounter requests;   // by "endpoint,status"
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> failed{0};
  LabeledCounter rejected;   // by reason
  LabeledCounter kv_source;  // device / host / recompute
  LabeledCounter switches;   // by path
  std::atomic<std::uint64_t> lease_hits{0};
  std::atomic<std::uint64_t> lease_misses{0};
  std::atomic<std::uint64_t> retries{0};  // calls placed again after their instance was unreachable
  std::atomic<std::uint64_t> waited{0};   // calls that waited at the gateway (overload)
  std::atomic<std::uint64_t> waiting{0};  // calls waiting there now
  LabeledCounter unreachable;             // by instance
  std::atomic<std::int64_t> connections{0};  // client connections open now (the HTTP front's)

  Histogram ttft_s;
  Histogram tpot_s;
  Histogram call_s;  // first intended byte to last token of a call
  Histogram session_s;  // session completion time: first call's arrival to last call's end

  std::string Render() const;
};

}  // namespace talaria
