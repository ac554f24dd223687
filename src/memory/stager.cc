#include "memory/stager.h"

#include "core/error.h"

namespace talaria {

Stager::Stager(std::int64_t chunk_bytes, double h2d_bytes_per_s)
    : chunk_bytes_(chunk_bytes), h2d_bytes_per_s_(h2d_bytes_per_s) {
  TALARIA_CHECK(chunk_bytes > 0 && h2d_bytes_per_s > 0, "stager needs a chunk size and a rate");
}

std::int64_t Stager::ChunkBytes(std::size_t i) const {
  return std::min<std::int64_t>(chunk_bytes_, weight_bytes_ - static_cast<std::int64_t>(i) * chunk_bytes_);
}

Region Stager::ChunkRange(std::size_t i) const {
  const std::int64_t top = region_.end - static_cast<std::int64_t>(i) * chunk_bytes_;
  return {top - ChunkBytes(i), top};
}

void Stager::Begin(const std::string& model, std::int64_t weight_bytes, TimePoint now, KvPool& pool) {
  Clear(pool);
  model_ = model;
  weight_bytes_ = weight_bytes;
  region_ = pool.region();
  // Chunks that would not fit in the region are never staged (missing).
  const auto n = static_cast<std::size_t>((weight_bytes + chunk_bytes_ - 1) / chunk_bytes_);
  states_.assign(n, ChunkState::kMissing);
  StartNext(now, pool);
}

void Stager::StartNext(TimePoint at, KvPool& pool) {
  writing_ = SIZE_MAX;
  pool.ClearSkip();
  for (; next_ < states_.size(); ++next_) {
    const Region r = ChunkRange(next_);
    if (r.begin < region_.begin) {  // out of room: the rest stays missing
      next_ = states_.size();
      break;
    }
    if (pool.AnyAllocatedIn(r)) continue;  // rows in use by KV: leave missing
    writing_ = next_++;
    states_[writing_] = ChunkState::kWriting;
    staged_bytes_ += ChunkBytes(writing_);
    pool.SetSkip(r);
    write_done_ = at + FromSeconds(static_cast<double>(ChunkBytes(writing_)) / h2d_bytes_per_s_);
    return;
  }
}

void Stager::AdvanceTo(TimePoint now, KvPool& pool) {
  while (writing_ != SIZE_MAX && write_done_ <= now) {
    states_[writing_] = ChunkState::kClean;
    StartNext(write_done_, pool);
  }
}

void Stager::OnAllocated(std::span<const BlockId> blocks, const KvPool& pool) {
  for (BlockId b : blocks) DirtyOverlapping(pool.BlockRange(b));
}

void Stager::OnAllocated(const BlockList& blocks, const KvPool& pool) {
  for (const BlockRun& run : blocks.runs()) {  // a run's blocks tile one byte range
    DirtyOverlapping(Region{pool.BlockRange(run.first).begin, pool.BlockRange(run.end() - 1).end});
  }
}

void Stager::DirtyOverlapping(Region br) {
  if (states_.empty()) return;
  if (br.end <= region_.end - weight_bytes_) return;  // below every chunk
  // Chunk index from the top: chunk i covers (end - (i+1)C, end - iC].
  const auto first = static_cast<std::size_t>(std::max<std::int64_t>(0, (region_.end - br.end) / chunk_bytes_));
  for (std::size_t i = first; i < states_.size(); ++i) {
    const Region cr = ChunkRange(i);
    if (cr.end <= br.begin) break;
    if (cr.Overlaps(br) && states_[i] == ChunkState::kClean) {
      states_[i] = ChunkState::kDirty;
      staged_bytes_ -= ChunkBytes(i);
    }
  }
}

void Stager::Cancel(KvPool& pool) {
  if (writing_ != SIZE_MAX) {
    states_[writing_] = ChunkState::kMissing;
    staged_bytes_ -= ChunkBytes(writing_);
    writing_ = SIZE_MAX;
  }
  pool.ClearSkip();
  next_ = states_.size();
}

void Stager::Clear(KvPool& pool) {
  Cancel(pool);
  ++serial_;
  model_.clear();
  weight_bytes_ = 0;
  states_.clear();
  staged_bytes_ = 0;
  next_ = 0;
}

GatherPlan Stager::Plan(const std::string& model, std::int64_t weight_bytes) const {
  GatherPlan p;
  p.model = model;
  p.weight_bytes = weight_bytes;
  if (model == model_ && weight_bytes == weight_bytes_) {
    for (std::size_t i = 0; i < states_.size(); ++i) {
      if (states_[i] == ChunkState::kClean) p.d2d_bytes += ChunkBytes(i);
      if (states_[i] == ChunkState::kDirty) p.dirty_bytes += ChunkBytes(i);
    }
  }
  p.h2d_bytes = weight_bytes - p.d2d_bytes;
  p.path = p.d2d_bytes == weight_bytes ? SwitchPath::kD2d
           : p.d2d_bytes == 0          ? SwitchPath::kH2d
                                       : SwitchPath::kPartial;
  return p;
}

std::int64_t Stager::StagingSlackBytes(const KvPool& pool) const {
  return std::max<std::int64_t>(0, pool.region().end - pool.HighestAllocatedEnd() - staged_bytes_);
}

double Stager::SecondsToStage(const std::string& model, std::int64_t weight_bytes, const KvPool& pool) const {
  if (model != model_ || weight_bytes != weight_bytes_) return 0;
  const std::int64_t writing = StagedBytes() - CleanBytes();
  const std::int64_t left = std::min(weight_bytes - CleanBytes(), StagingSlackBytes(pool) + writing);
  return left > 0 ? static_cast<double>(left) / h2d_bytes_per_s_ : 0;
}

}  // namespace talaria
