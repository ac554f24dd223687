// The HBM layout of one rank of a cold-pool instance (DESIGN.md §5, paper
// §4.2): one arena managed as offsets.
//
//   0 ............ weights ... | kv_base ... KV pool ... | graph pool | runtime | arena end
//
// Weights grow up from 0 and are resized for each activated model. The KV
// pool starts at kv_base, reserved at the largest hosted model's weight size,
// so switching between hosted models never moves it. Graph pools (one per
// model, parked at the same address) and runtime buffers are anchored at the
// high end. A switch m -> m' releases the KV pool, resizes the weight region
// and rebinds; the structural base addresses stay put. Activate() compares
// them with the ones a model's cached graphs were captured against and
// reports a change, which costs a recapture (paper §4.2 pointer check).
//
// Offsets only: the engine may back the arena with bytes. Not synchronized.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "memory/region.h"

namespace talaria {

// The base addresses the pointer check compares.
struct LayoutBases {
  std::int64_t weights = 0;
  std::int64_t kv = 0;
  std::int64_t graph_pool = 0;
  std::int64_t runtime = 0;
  friend bool operator==(const LayoutBases&, const LayoutBases&) = default;
};

class HbmLayout {
 public:
  struct Options {
    std::int64_t arena_bytes = 0;       // the managed (bump) buffer per rank
    std::int64_t runtime_bytes = 0;     // activations, workspaces, NCCL buffers
    std::int64_t graph_pool_bytes = 0;  // one model's CUDA-graph pool
    std::int64_t min_kv_bytes = 0;      // the KV pool may not shrink below this
  };

  struct Activation {
    bool first = false;          // the model had never been active
    bool bases_changed = false;  // its cached graphs point at moved regions
  };

  explicit HbmLayout(Options options);

  // Registers a hosted model. False (and no change) when the layout cannot
  // hold its weights with min_kv_bytes of KV pool left.
  bool AddModel(const std::string& model, std::int64_t weight_bytes);
  bool Hosts(const std::string& model) const { return weights_.contains(model); }

  // Makes `model` the active one. REQUIRES: Hosts(model).
  Activation Activate(const std::string& model);
  const std::string& active() const { return active_; }

  Region weights() const { return {0, active_weight_bytes_}; }
  Region kv() const { return {kv_base_, graph_base()}; }
  Region graph_pool() const { return {graph_base(), runtime_base()}; }
  Region runtime() const { return {runtime_base(), options_.arena_bytes}; }
  LayoutBases bases() const;
  std::int64_t arena_bytes() const { return options_.arena_bytes; }

 private:
  std::int64_t runtime_base() const { return options_.arena_bytes - options_.runtime_bytes; }
  std::int64_t graph_base() const { return runtime_base() - options_.graph_pool_bytes; }

  Options options_;
  std::map<std::string, std::int64_t> weights_;
  std::map<std::string, LayoutBases> captured_;  // bases each model's graphs saw
  std::int64_t kv_base_ = 0;
  std::string active_;
  std::int64_t active_weight_bytes_ = 0;
};

}  // namespace talaria
