#include "memory/hbm_layout.h"

#include "core/error.h"

namespace talaria {

HbmLayout::HbmLayout(Options options) : options_(options) {
  TALARIA_CHECK(options_.arena_bytes > options_.runtime_bytes + options_.graph_pool_bytes,
                "HBM arena smaller than its fixed regions");
}

bool HbmLayout::AddModel(const std::string& model, std::int64_t weight_bytes) {
  const std::int64_t base = std::max(kv_base_, weight_bytes);
  if (graph_base() - base < options_.min_kv_bytes) return false;
  weights_[model] = weight_bytes;
  kv_base_ = base;
  return true;
}

LayoutBases HbmLayout::bases() const {
  return {0, kv_base_, graph_base(), runtime_base()};
}

HbmLayout::Activation HbmLayout::Activate(const std::string& model) {
  auto it = weights_.find(model);
  TALARIA_CHECK(it != weights_.end(), "activating a model the layout does not host");
  active_ = model;
  active_weight_bytes_ = it->second;
  Activation a;
  const LayoutBases now = bases();
  auto [cap, inserted] = captured_.try_emplace(model, now);
  a.first = inserted;
  if (!inserted && !(cap->second == now)) {
    a.bases_changed = true;
    cap->second = now;  // recaptured against the new layout
  }
  return a;
}

}  // namespace talaria
